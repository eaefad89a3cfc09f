"""FP8 at the landing ranks through the Python package: Megatron tp=4 cuts the attention
weights' 128x128 blocks, so with ``quantize_at="landing"`` each of them reaches one vLLM engine in
bf16 (a ``<weight>@landing`` shard its ranks pass like any other), is quantized there once, and
goes on to the other engine as fp8 values and scales. Every inference rank's bytes are held to
vLLM's ``per_block_cast_to_fp8`` of the whole weight (tests/quantize/make_vectors.py, numpy and
ml_dtypes: not refit's code)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

import refit
from conftest import run_ranks

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "quantize"))
from make_vectors import BF16, block128  # noqa: E402

MODEL = Path(__file__).resolve().parents[1] / "data" / "models" / "small-llama-blocks.json"
SUFFIX = "@landing"


def _weights(problem: refit.Problem) -> dict[str, np.ndarray]:
    """Every model tensor as the training ranks hold it: bf16 bits with exponents 120..135, so no
    block has a NaN or an infinity."""
    rng = np.random.default_rng(17)
    out = {}
    for t in problem.tensors:
        if t.name.endswith(SUFFIX) or t.name.endswith("_scale_inv"):
            continue
        bits = rng.integers(0, 1 << 16, size=t.shape, dtype=np.uint16)
        out[t.name] = ((bits & 0x807F) | ((((bits >> 7) & 0xF) + 0x78) << 7)).astype(np.uint16)
    return out


def _buffers(problem: refit.Problem, rank: int, weights: dict[str, np.ndarray]) -> dict[str, Any]:
    if problem.is_training(rank):
        return {s.tensor: np.ascontiguousarray(weights[s.tensor.removesuffix(SUFFIX)][s.slices])
                for s in problem.shards(rank)}  # fmt: skip
    return {s.tensor: np.zeros(s.extent, dtype=refit.numpy_dtype(s.dtype)) for s in problem.shards(rank)}


def _expected(name: str, weights: dict[str, np.ndarray]) -> np.ndarray:
    """What an inference rank must hold of tensor ``name``, whole."""
    if name.endswith(SUFFIX):
        return weights[name.removesuffix(SUFFIX)]
    if name.endswith("_scale_inv"):
        return block128(weights[name.removesuffix("_scale_inv")].view(BF16))[1]
    if name.endswith("_proj.weight"):
        return block128(weights[name].view(BF16))[0].view(np.uint8)
    return weights[name]


def test_weights_whose_blocks_training_cuts_are_quantized_once_at_landing() -> None:
    problem = refit.Problem.from_model(MODEL, train="tp=4", infer="tp=2,engines=2", quantize="fp8-block128",
                                       quantize_at="landing")  # fmt: skip
    landing = [t.name for t in problem.tensors if t.name.endswith(SUFFIX)]
    # q, k, v and o_proj of both layers (64-row or 64-column parts at tp=4).
    assert len(landing) == 8
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host:gpus_per_domain=2"))
    weights = _weights(problem)
    buffers = [_buffers(problem, r, weights) for r in range(problem.world_size)]

    def body(rank: int, exchange: Any) -> Any:
        return refit.Executor("ucx", exchange, timeout=20).prepare(plan, buffers[rank]).execute()

    for result in run_ranks(problem.world_size, body):
        assert not isinstance(result, BaseException), result
    held_copies = 0
    for rank in range(problem.source_ranks, problem.world_size):
        for s in problem.shards(rank):
            got = buffers[rank][s.tensor].view(refit.numpy_dtype(s.dtype))
            want = _expected(s.tensor, weights)[s.slices].view(refit.numpy_dtype(s.dtype))
            np.testing.assert_array_equal(got, want, err_msg=f"{s.tensor} on rank {rank}")
            held_copies += s.tensor.endswith(SUFFIX)
    # Each landing copy lands on one engine's two ranks, never on both engines.
    assert held_copies == 2 * len(landing)
