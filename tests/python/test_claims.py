"""Memory that ranks run as threads of one process share: a rank may not write memory another
rank's live plan reads or writes, whichever prepared first (refit/_claims.py); memory a plan that
is gone used is free again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import refit
from conftest import run_ranks, write_manifest
from rank_buffers import numpy_buffers


def test_ranks_of_one_process_that_share_memory_one_writes_are_refused_on_every_rank(rows_to_columns: Path) -> None:
    # Rank 2's destination 'w' given the very array rank 0 sends 'w' from: rank 2's bytes landed
    # under what rank 0 was sending, silently. Ranks as threads of one process now refuse it
    # together, whichever prepared first; arrays that are only read by both stay allowed.
    problem = refit.Problem.from_manifest(rows_to_columns)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    shared = {rank: numpy_buffers(problem, rank) for rank in range(problem.world_size)}
    column = shared[2]["w"]
    shared[0]["w"] = column.reshape(shared[0]["w"].shape)  # a view of the same bytes

    def body(rank: int, exchange: Any) -> Any:
        return refit.Executor("ucx", exchange, timeout=20).prepare(plan, shared[rank])

    results = run_ranks(problem.world_size, body, timeout=30)
    for rank, r in enumerate(results):
        assert isinstance(r, refit.BadInput), (rank, r)
        assert "shares memory with one that rank" in str(r) and "ranks must not share memory" in str(r), str(r)


@pytest.mark.parametrize("keep", [False, True], ids=["dropped", "kept"])
def test_memory_a_dropped_plan_used_may_be_used_again_by_another_rank(tmp_path: Path, keep: bool) -> None:
    # Ranks as long-lived threads that reuse memory across steps, as an allocator hands it out again:
    # step 1's destination is step 2's source. Claims were kept per executor for its whole life,
    # so step 2 was refused ("a buffer it reads shares memory with one that rank 1 ... writes")
    # although step 1's plan was gone. A plan still alive keeps its claims: then it is refused.
    side = {"mesh": [1], "placements": ["R"]}
    manifest = write_manifest(tmp_path / "one.json", [{"name": "w", "shape": [64, 64], "dtype": "fp32",
                                                       "source": side, "destination": side}], 1, 1)  # fmt: skip
    plan = refit.plan(refit.Problem.from_manifest(manifest), refit.Cluster.preset("cpu-host"))
    pool = np.zeros((2, 64, 64), np.float32)
    steps = [{0: np.ones((64, 64), np.float32), 1: pool[0]}, {0: pool[0], 1: pool[1]}]
    kept: list[Any] = []

    def body(rank: int, exchange: Any) -> list[str]:
        executor, out = refit.Executor("ucx", exchange, timeout=20), []
        for buffers in steps:
            try:
                prepared = executor.prepare(plan, {"w": buffers[rank]})
                prepared.execute()
                out.append("ok")
                if keep:
                    kept.append(prepared)
                del prepared
            except refit.BadInput as e:
                out.append(str(e))
        return out

    results = run_ranks(2, body, timeout=30)
    if not keep:
        assert results == [["ok", "ok"], ["ok", "ok"]], results
        assert np.all(pool[1] == 1)
        return
    assert [r[0] for r in results] == ["ok", "ok"], results
    assert "rank 0: a buffer it reads shares memory with one that rank 1 (prepared in this process) writes" in results[0][1]


def test_a_live_plan_of_a_thread_that_ended_still_claims_its_memory(tmp_path: Path) -> None:
    # Claims told threads apart by threading.get_ident(), which Python gives a new thread once
    # another ended: a rank on a new thread could read memory a live plan of an ended one writes.
    side = {"mesh": [1], "placements": ["R"]}
    manifest = write_manifest(tmp_path / "one.json", [{"name": "w", "shape": [8], "dtype": "fp32",
                                                       "source": side, "destination": side}], 1, 1)  # fmt: skip
    plan = refit.plan(refit.Problem.from_manifest(manifest), refit.Cluster.preset("cpu-host"))
    written = np.zeros(8, np.float32)
    first = run_ranks(2, lambda rank, exchange: refit.Executor("ucx", exchange, timeout=20).prepare(
        plan, {"w": written if rank == 1 else np.ones(8, np.float32)}))  # fmt: skip
    assert all(isinstance(p, refit.Prepared) for p in first), first
    again = run_ranks(2, lambda rank, exchange: refit.Executor("ucx", exchange, timeout=20).prepare(
        plan, {"w": written if rank == 0 else np.zeros(8, np.float32)}))  # fmt: skip
    assert all(isinstance(r, refit.BadInput) for r in again), again
    assert "shares memory with one that rank 1 (prepared in this process) writes" in str(again[0]), again[0]
