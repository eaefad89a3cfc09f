"""Delta refit from Python (``refit.Executor(..., delta=True)``): ranks as threads, numpy buffers.
After every step each inference rank holds exactly the training ranks' weights of that step, and
what moved is what changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

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
