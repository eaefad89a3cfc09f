"""One process of the elastic refit tests (test_elastic_executor.py): tiny-qwen3-moe, Megatron TP2 x EP2
(ranks 0, 1) -> two vLLM engines of TP2 (engine 0: ranks 2, 3; engine 1: ranks 4, 5), over
torch.distributed (gloo). MODE says what happens:

- ``kill``: every engine a member; rank VICTIM kills itself (SIGKILL) once its first chunk is sent.
- ``stale``: rank VICTIM stays at membership epoch 1 while the others move to epoch 2.
- ``changes``: CHANGES membership changes over one prepared plan, each leaving out engine
  ``step % 3`` (2: none); non-members' weights must stay as they were.

Every surviving process prints one JSON line: per step, the engines completed and missed and
whether its own destinations were right (None: not a member's rank, or a training rank) and how long
execute() took, or the exception it raised; its resident memory after the first tenth and at the end.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from datetime import timedelta
from typing import Any, Optional

import numpy as np
import torch.distributed as dist

import refit
from worker_weights import right, weights


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def members_of(mode: str, step: int) -> list[int]:
    if mode == "changes" and step % 3 != 2:
        return [1 - step % 3]
    return [0, 1]


def main() -> None:
    rank, size, mode = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), os.environ["MODE"]
    victim, timeout = int(os.environ.get("VICTIM", "-1")), float(os.environ["REFIT_TIMEOUT"])
    dist.init_process_group("gloo", init_method=os.environ["INIT_METHOD"], rank=rank, world_size=size,
                            timeout=timedelta(seconds=30))  # fmt: skip
    problem = refit.Problem.from_model(sys.argv[1], train="tp=2,ep=2,etp=1", infer="tp=2,engines=2")
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host:gpus_per_domain=2"), chunk_bytes=4096)

    def die(transfer: int, chunk: int) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    executor = refit.Executor("ucx", refit.exchange.torch_distributed(), timeout=timeout,
                              on_chunk_sent=die if mode == "kill" and rank == victim else None)  # fmt: skip
    training = problem.is_training(rank)
    buffers = {s.tensor: weights(problem, s.tensor)[s.slices].copy() if training
               else np.zeros(s.extent, refit.numpy_dtype(s.dtype)) for s in problem.shards(rank)}  # fmt: skip
    prepared = executor.prepare(plan, buffers)
    engine = None if training else (rank - problem.source_ranks) // 2
    steps: list[dict[str, Any]] = []
    changes = int(os.environ.get("CHANGES", "1"))
    resident: list[int] = []
    for step in range(changes):
        members = members_of(mode, step)
        epoch = 1 if mode == "stale" and rank == victim else step + 2
        executor.set_members(problem, members, epoch)
        member = engine is None or engine in members
        if member and not training:
            for b in buffers.values():
                b.fill(0)
        before = {k: b.copy() for k, b in buffers.items()} if not member else None
        steps.append(execute(prepared, problem, rank, buffers, engine, before))
        if "raised" in steps[-1]:
            break
        if step + 1 == max(1, changes // 10):
            resident.append(resident_bytes())
    resident.append(resident_bytes())
    print(json.dumps({"rank": rank, "steps": steps, "resident": resident}), flush=True)
    os._exit(0)  # the process group cannot be shut down with a dead member


def execute(prepared: refit.Prepared, problem: refit.Problem, rank: int, buffers: dict[str, np.ndarray],
            engine: Optional[int], before: Optional[dict[str, np.ndarray]]) -> dict[str, Any]:  # fmt: skip
    start = time.monotonic()
    try:
        report = prepared.execute()
    except refit.Error as e:
        return {"raised": type(e).__name__, "message": str(e)}
    seconds = time.monotonic() - start
    completed = report.engines_completed or []
    if before is not None:  # not a member: its weights are as they were
        verified: Optional[bool] = all(np.array_equal(before[k], b) for k, b in buffers.items())
    elif engine is not None and engine in completed:
        verified = right(problem, rank, buffers)
    else:
        verified = None
    return {"completed": completed, "missed": report.engines_missed, "verified": verified, "seconds": seconds}


if __name__ == "__main__":
    main()
