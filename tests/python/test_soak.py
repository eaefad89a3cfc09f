"""A soak of the Python executor, as an RL job uses it: one plan prepared once and executed at
every step. The ranks run as threads of this process (as in test_buffers.py), so this process's
resident memory (VmRSS) is every rank's, bindings included; it must stay flat once the first tenth
of the executions has warmed it up. REFIT_SOAK_ITERATIONS sets the count (default 200; the
README's figure is for 1000, with `pytest -s` showing the line this test prints)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import refit
from conftest import run_ranks

# What may grow after the warm-up: nothing per execution. The bound, 2 MiB for the whole process
# (four ranks, the interpreter, numpy), leaves 512 pages for allocator noise; a leak of what one
# execution moves (64 KiB per destination rank) would pass it within 16 executions.
BOUND = 2 << 20


def _resident_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024  # the kernel prints kB (KiB)
    pytest.skip("no VmRSS in /proc/self/status (not Linux)")


def _pattern(problem: refit.Problem, name: str) -> np.ndarray:
    """The full fp32 tensor: element i holds i mod 251."""
    shape = [t.shape for t in problem.tensors if t.name == name][0]
    return (np.arange(int(np.prod(shape))) % 251).astype(np.float32).reshape(shape)


def test_resident_memory_stays_flat_over_many_executions(tmp_path: Path) -> None:
    # One fp32 tensor [256, 128], rows over 2 training ranks -> columns over 2 inference ranks.
    manifest = tmp_path / "soak.json"
    manifest.write_text(
        '{"format": "refit-manifest", "version": 1, "source_ranks": 2, "destination_ranks": 2, "tensors": '
        '[{"name": "w", "shape": [256, 128], "dtype": "fp32", "source": {"mesh": [2], "placements": ["S0"]}, '
        '"destination": {"mesh": [2], "placements": ["S1"]}}]}'
    )
    problem = refit.Problem.from_manifest(manifest)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    iterations = int(os.environ.get("REFIT_SOAK_ITERATIONS", "200"))
    warm_up = max(1, iterations // 10)
    resident: dict[int, int] = {}  # executions done -> bytes, read by rank 0 with every rank there

    def body(rank: int, exchange: Any) -> dict[str, np.ndarray]:
        executor = refit.Executor("ucx", exchange, timeout=30)
        arrays = {s.tensor: executor.empty(s) for s in problem.shards(rank)}
        for s in problem.shards(rank):
            arrays[s.tensor][...] = _pattern(problem, s.tensor)[s.slices] if problem.is_training(rank) else 0
        prepared = executor.prepare(plan, arrays)
        for done in range(1, iterations + 1):
            prepared.execute()
            if done in (warm_up, iterations):
                exchange.allgather(b"")  # every rank has executed `done` times
                if rank == 0:
                    resident[done] = _resident_bytes()
                exchange.allgather(b"")
        return arrays

    results = run_ranks(problem.world_size, body, timeout=900)
    assert not any(isinstance(r, BaseException) for r in results), results
    for rank in (2, 3):
        for s in problem.shards(rank):
            np.testing.assert_array_equal(results[rank][s.tensor], _pattern(problem, s.tensor)[s.slices])
    growth = resident[iterations] - resident[warm_up]
    print(f"\nrefit soak (Python, 4 ranks as threads): resident {resident[warm_up] / 1e6:.2f} MB after "
          f"{warm_up} executions, {resident[iterations] / 1e6:.2f} MB after {iterations} ({growth / 1e3:+.0f} KB)")
    assert growth < BOUND, resident
