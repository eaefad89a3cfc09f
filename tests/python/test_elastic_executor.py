"""Elastic refit from Python (docs/elastic.md), between real processes over torch.distributed
(gloo), tiny-qwen3-moe into two engines of TP2 (elastic_worker.py says what each process does):

- a process killed mid-transfer costs the other engine nothing: it completes, verified, and every
  survivor reports engine 0 completed and engine 1 missed, within the timeout and a few seconds;
- a process of an old membership epoch is fenced out: it raises, its engine misses the step;
- 100 membership changes over one prepared plan (Executor.set_members): every member engine
  completes verified each step, a non-member's weights stay as they were, resident memory stays
  within 8 MiB from the tenth change to the last (as the C++ soak, ucx_elastic_test)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import refit
from conftest import TINY_MOE, free_port, mpirun_env, run_workers

SIZE, TIMEOUT = 6, 10.0  # long enough that a live process descheduled under load is not taken for gone


def run_elastic_workers(mode: str, **env: str) -> tuple[list[subprocess.Popen[str]], list[dict[str, Any]], float]:
    """Starts the six processes, waits for them; their exit codes, last JSON lines, seconds."""
    base = mpirun_env()
    base.update(WORLD_SIZE=str(SIZE), MODE=mode, REFIT_TIMEOUT=str(TIMEOUT),
                INIT_METHOD=f"tcp://127.0.0.1:{free_port()}", **env)  # fmt: skip
    start = time.monotonic()
    workers, outputs = run_workers(Path(__file__).with_name("elastic_worker.py"), SIZE, base)
    results = []
    for w, (out, err) in zip(workers, outputs):
        lines = out.strip().splitlines()
        results.append(json.loads(lines[-1]) if w.returncode == 0 and lines else {"err": err})
    return workers, results, time.monotonic() - start


@pytest.mark.processes
def test_an_engine_killed_mid_transfer_costs_the_other_nothing() -> None:
    workers, results, _ = run_elastic_workers("kill", VICTIM="4")
    assert workers[4].returncode == -9, results[4]
    for rank in (0, 1, 2, 3, 5):
        assert workers[rank].returncode == 0, results[rank]
        (step,) = results[rank]["steps"]
        assert step["completed"] == [0] and step["missed"] == [1], (rank, step)
        # Ranks 2 and 3 (engine 0) hold every element right; rank 5's engine missed the step.
        assert step["verified"] is (True if rank in (2, 3) else None), (rank, step)
        assert step["seconds"] < TIMEOUT + 5, (rank, step)  # the dead rank is noticed once silent


@pytest.mark.processes
def test_a_process_of_an_old_membership_is_fenced_out() -> None:
    workers, results, _ = run_elastic_workers("stale", VICTIM="5")
    (stale,) = results[5]["steps"]
    assert "fenced out" in stale.get("message", ""), stale
    for rank in (0, 1, 2, 3, 4):
        (step,) = results[rank]["steps"]
        assert step["completed"] == [0] and step["missed"] == [1], (rank, step)
        assert step["verified"] is (True if rank in (2, 3) else None), (rank, step)


@pytest.mark.processes
def test_membership_changes_reuse_the_prepared_plan_with_memory_flat() -> None:
    changes, margin = 100, 8 << 20
    workers, results, _ = run_elastic_workers("changes", CHANGES=str(changes))
    for rank in range(SIZE):
        assert workers[rank].returncode == 0, results[rank]
        steps = results[rank]["steps"]
        assert len(steps) == changes, steps[-1]
        for i, step in enumerate(steps):
            # Step i leaves engine i % 3 out (2: none); the members complete, nobody misses.
            assert step["completed"] == ([1 - i % 3] if i % 3 != 2 else [0, 1]) and step["missed"] == [], (rank, i)
            assert step["verified"] is not False, (rank, i, step)
        after_warm_up, end = results[rank]["resident"]
        assert end - after_warm_up < margin, (rank, after_warm_up, end)


def test_set_members_refuses_what_does_not_fit_naming_it() -> None:
    problem = refit.Problem.from_model(str(TINY_MOE), train="tp=2,ep=2,etp=1", infer="tp=2,engines=2")
    # set_members exchanges nothing: an exchange that is never called stands in for the job's.
    never = refit.exchange.from_callable(lambda data: [data] * SIZE, rank=0, size=SIZE)
    executor = refit.Executor("ucx", never)
    executor.set_members(problem, [1], epoch=3)
    with pytest.raises(refit.BadInput, match="engine 2 is not one of the problem's 2 engines"):
        executor.set_members(problem, [0, 2], epoch=4)
    with pytest.raises(ValueError, match="epoch: a membership epoch"):
        executor.set_members(problem, [0], epoch=0)
    with pytest.raises(refit.BadInput, match="delta refit"):
        refit.Executor("ucx", never, delta=True).set_members(problem, [0], epoch=1)
