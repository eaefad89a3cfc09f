"""Delta refit from Python (``refit.Executor(..., delta=True)``): ranks as threads, numpy buffers.
After every step each inference rank holds exactly the training ranks' weights of that step, and
what moved is what changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest

import refit
from conftest import run_ranks

STEPS = 5


def _weights(problem: refit.Problem, step: int) -> dict[str, np.ndarray]:
    """Every tensor at `step`: seeded values, then at each step 1 % of the elements' lowest bit
    flipped (a change of one unit in the last place, as most changes of an RL step are)."""
    out = {}
    for index, t in enumerate(problem.tensors):
        dtype = refit.numpy_dtype(t.dtype)
        rng = np.random.default_rng(index)
        bits = np.uint16 if dtype == np.uint16 else np.uint32
        full = rng.integers(0, 2**15, size=t.shape).astype(bits)
        for s in range(1, step + 1):
            flip = np.random.default_rng(1000 * s + index).random(t.shape) < 0.01
            full[flip] ^= 1
        out[t.name] = full.view(dtype)
    return out


def test_each_step_delivers_exactly_that_steps_weights_and_moves_only_what_changed(rows_to_columns: Path) -> None:
    problem = refit.Problem.from_manifest(rows_to_columns)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"), strategy="direct")
    steps = [_weights(problem, s) for s in range(STEPS)]
    buffers = [{s.tensor: np.zeros(s.extent, dtype=refit.numpy_dtype(s.dtype)) for s in problem.shards(r)}
               for r in range(problem.world_size)]  # fmt: skip

    def body(rank: int, exchange: Any) -> Any:
        executor = refit.Executor("ucx", exchange, timeout=20, delta=True)
        prepared = executor.prepare(plan, buffers[rank])
        reports = []
        for step in range(STEPS):
            for s in problem.shards(rank):
                if problem.is_training(rank):
                    buffers[rank][s.tensor][...] = steps[step][s.tensor][s.slices]
            reports.append(prepared.execute())
            if not problem.is_training(rank):
                for s in problem.shards(rank):
                    np.testing.assert_array_equal(buffers[rank][s.tensor], steps[step][s.tensor][s.slices])
        return reports

    results = run_ranks(problem.world_size, body)
    for r in results:
        assert not isinstance(r, BaseException), r
    for rank in range(problem.source_ranks):
        first, *later = results[rank]
        assert first.delta is not None and first.delta.full == first.delta.pieces
        for report in later:
            assert report.delta is not None and report.delta.full == 0
            # 1 % of the elements changed by one bit: a few bytes each, plus 56 bytes a piece.
            assert report.bytes_sent * 4 < report.delta.dense_bytes


MODELS = Path(__file__).resolve().parents[1] / "data" / "models"


def _bf16_weights(problem: refit.Problem, step: int, frozen: int = 0) -> dict[str, np.ndarray]:
    """Every tensor as a training rank holds it at `step`: bf16 bits of N(0, 0.02^2) (finite, so
    every fp8 block has a real scale), then at each step 1 % of the elements moved by one unit in
    the last place, except in the first `frozen` tensors."""
    out = {}
    for index, t in enumerate(problem.tensors):
        rng = np.random.default_rng(index)
        full = (rng.normal(0.0, 0.02, size=t.shape).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        for s in range(1, step + 1) if index >= frozen else ():
            full[np.random.default_rng(1000 * s + index).random(t.shape) < 0.01] ^= 1
        out[t.name] = full
    return out


def _buffers(problem: refit.Problem, rank: int) -> dict[str, np.ndarray]:
    return {s.tensor: np.zeros(s.extent, dtype=refit.numpy_dtype(s.dtype)) for s in problem.shards(rank)}


def _delta_beside_dense(problem: refit.Problem, plan: refit.Plan, steps: list[dict[str, np.ndarray]]) -> list[Any]:
    """Runs a delta executor and a dense one side by side over `steps` (each tensor's whole value
    at each step) on every rank; after each step every inference rank must hold the same bytes in
    both. Returns each rank's delta step reports."""

    def body(rank: int, exchange: Any) -> Any:
        delta_buffers, dense_buffers = _buffers(problem, rank), _buffers(problem, rank)
        delta = refit.Executor("ucx", exchange, timeout=20, delta=True).prepare(plan, delta_buffers)
        dense = refit.Executor("ucx", exchange, timeout=20).prepare(plan, dense_buffers)
        reports = []
        for step in steps:
            if problem.is_training(rank):
                for s in problem.shards(rank):
                    delta_buffers[s.tensor][...] = dense_buffers[s.tensor][...] = step[s.tensor][s.slices]
            reports.append(delta.execute())
            dense.execute()
            if not problem.is_training(rank):
                for s in problem.shards(rank):
                    np.testing.assert_array_equal(delta_buffers[s.tensor], dense_buffers[s.tensor], err_msg=s.tensor)
        return reports

    results = run_ranks(problem.world_size, body, timeout=120)
    for r in results:
        assert not isinstance(r, BaseException), r
    return results


def _expect_deltas_after_the_first_step(problem: refit.Problem, results: list[Any]) -> None:
    """After the first step the training ranks send no piece densely, and less than its dense bytes."""
    for rank in range(problem.source_ranks):
        for report in results[rank][1:]:
            assert report.delta is not None and report.delta.full == 0
            assert report.bytes_sent < report.delta.dense_bytes


@pytest.mark.parametrize("train, quantize_at", [("tp=2", "sender"), ("tp=4", "landing")])
def test_fp8_deltas_give_every_inference_rank_what_a_dense_fp8_refit_gives(train: str, quantize_at: str) -> None:
    # small-llama-blocks: at tp=2 every linear weight is whole 128x128 blocks at the training
    # ranks, which quantize it; at tp=4 training cuts q_proj's blocks and its landing ranks
    # quantize it. At every step each rank runs the delta executor and a dense one over the same
    # bf16; every inference rank's fp8 values and scales (and landing copies) must be the same
    # bytes in both.
    problem = refit.Problem.from_model(MODELS / "small-llama-blocks.json", train=train, infer="tp=2,engines=2",
                                       quantize="fp8-block128", quantize_at=quantize_at)  # fmt: skip
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"), strategy="refit", for_delta=True)
    steps = [_bf16_weights(problem, s) for s in range(STEPS)]

    results = _delta_beside_dense(problem, plan, steps)
    assert any(s.dtype == "fp8_e4m3" for s in problem.shards(problem.source_ranks))
    assert any(t.name.endswith("@landing") for t in problem.tensors) == (quantize_at == "landing")
    _expect_deltas_after_the_first_step(problem, results)


def _fp8_trained_weights(problem: refit.Problem, step: int) -> dict[str, np.ndarray]:
    """Every tensor as the training ranks hold it at `step` when trained in fp8: fp8 values, their
    scales and bf16 norms are all plain bytes to a delta refit, so each starts as random bytes and
    at each step 1 % of its bytes have their low bit flipped."""
    out = {}
    for index, t in enumerate(problem.tensors):
        full = np.random.default_rng(index).integers(0, 256, t.nbytes, dtype=np.uint8)
        for s in range(1, step + 1):
            full[np.random.default_rng(1000 * s + index).random(full.shape) < 0.01] ^= 1
        out[t.name] = full.view(refit.numpy_dtype(t.dtype)).reshape(t.shape)
    return out


def test_weights_trained_in_fp8_move_as_deltas_of_their_bytes_exactly() -> None:
    # small-llama-blocks trained in fp8 at tp=2 (whole 128x128 blocks): the training ranks hold
    # the fp8 values and scales themselves. At every step each rank runs the delta executor and a
    # dense one over the same bytes; every inference rank must hold the same bytes in both, and
    # after the first step the training ranks send less than the dense bytes, none densely.
    problem = refit.Problem.from_model(MODELS / "small-llama-blocks.json", train="tp=2", infer="tp=2,engines=2",
                                       quantize="fp8-block128", quantize_at="training")  # fmt: skip
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"), strategy="refit", for_delta=True)
    steps = [_fp8_trained_weights(problem, s) for s in range(STEPS)]

    results = _delta_beside_dense(problem, plan, steps)
    assert any(s.dtype == "fp8_e4m3" for s in problem.shards(0))
    _expect_deltas_after_the_first_step(problem, results)


def test_delta_rebalance_re_plans_by_the_bytes_that_move_unless_told_not_to() -> None:
    # Two data-parallel training replicas, each behind a NIC of its own, the first half of the
    # tensors frozen: the plan balanced by dense bytes leaves one replica sending all that changes,
    # so after step 1 the payload shares drift by about 1/2 and, past the default threshold (0.1),
    # every rank re-plans; with delta_rebalance=None no step re-plans. Every step stays exact.
    problem = refit.Problem.from_model(MODELS / "small-llama-blocks.json", train="tp=1,dp=2", infer="tp=2")
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host:gpus_per_node=1"), strategy="refit", for_delta=True)
    frozen = len(problem.tensors) // 2
    steps = [_bf16_weights(problem, s, frozen) for s in range(3)]

    def run(drift: Optional[float]) -> list[Any]:
        def body(rank: int, exchange: Any) -> Any:
            buffers = _buffers(problem, rank)
            executor = refit.Executor("ucx", exchange, timeout=20, delta=True, delta_rebalance=drift)
            prepared = executor.prepare(plan, buffers)
            reports = []
            for step in range(3):
                for s in problem.shards(rank):
                    if problem.is_training(rank):
                        buffers[s.tensor][...] = steps[step][s.tensor][s.slices]
                reports.append(prepared.execute())
                if not problem.is_training(rank):
                    for s in problem.shards(rank):
                        np.testing.assert_array_equal(buffers[s.tensor], steps[step][s.tensor][s.slices])
            return reports

        results = run_ranks(problem.world_size, body, timeout=120)
        for r in results:
            assert not isinstance(r, BaseException), r
        return results

    default, never = run(refit.DELTA_REBALANCE), run(None)
    assert refit.DELTA_REBALANCE == 0.1
    assert default[0][1].delta.share_drift > 0.4
    assert [r.delta.rebalanced for r in default[0]] == [False, True, False]
    assert [r.delta.rebalanced for r in never[0]] == [False, False, False]


def test_delta_rebalance_outside_zero_to_one_is_refused() -> None:
    alone = refit.exchange.from_callable(lambda data: [data], rank=0, size=1)
    for bad in (-0.1, 1.5, True, "0.1"):
        with pytest.raises(ValueError, match="delta_rebalance"):
            refit.Executor("ucx", alone, delta=True, delta_rebalance=bad)  # type: ignore[arg-type]


def test_a_delta_refit_over_nccl_runs_one_plan_rank_a_process() -> None:
    """With ``nccl`` a delta refit keeps each step's bytes on the process's GPU and runs its one
    plan rank there: a map of several plan ranks onto this process is refused before anything
    starts, whether or not the build has NCCL and the machine a GPU."""
    alone = refit.exchange.from_callable(lambda data: [data], rank=0, size=1)
    with pytest.raises(refit.BadInput, match="a delta refit runs one plan rank per process"):
        refit.Executor("nccl", alone, delta=True, comm_rank_of=[0, 0])


def test_a_plan_for_a_delta_refit_sends_nothing_through_a_neighbours_nic() -> None:
    """refit's plans may hop bytes over NVLink to a rank beside a busy NIC, which keeps them
    outside its own boxes while it sends them on; a delta refit takes no such relay, so
    ``for_delta=True`` plans none. WideLlama TP1 -> 2 engines of TP2 on nodes of 2 GPUs: the
    training rank's NIC sends 29.4 MB alone, 14.7 MB once the inference rank beside it lends its."""
    problem = refit.Problem.from_model(MODELS / "wide-llama.json", train="tp=1", infer="tp=2,engines=2")
    cluster = refit.Cluster.preset("dgx-h100:gpus_per_node=2")
    relayed = refit.plan(problem, cluster).stats
    for_delta = refit.plan(problem, cluster, for_delta=True).stats
    assert relayed.max_nic_tx_bytes * 2 == pytest.approx(for_delta.max_nic_tx_bytes, rel=1e-3)
    with pytest.raises(refit.BadInput, match="for_delta"):
        refit.plan(problem, cluster, for_delta="yes")  # type: ignore[arg-type]
