"""One process of the killed-process test (test_processes.py): a refit over torch.distributed
(gloo) in which the rank VICTIM kills itself (SIGKILL) after its first chunk is sent. Every other
process prints one JSON line with the exception execute() raised, and how long after the start of
execute() it came."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import timedelta

import numpy as np
import torch.distributed as dist

import refit


def main() -> None:
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    victim, timeout = int(os.environ["VICTIM"]), float(os.environ["REFIT_TIMEOUT"])
    dist.init_process_group("gloo", init_method=os.environ["INIT_METHOD"], rank=rank, world_size=size,
                            timeout=timedelta(seconds=30))  # fmt: skip
    problem = refit.Problem.from_model(sys.argv[1], train="tp=2,ep=2,etp=1", infer="tp=2,dp=2")
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host:gpus_per_domain=2"), chunk_bytes=4096)

    def die(transfer: int, chunk: int) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    executor = refit.Executor("ucx", refit.exchange.torch_distributed(), timeout=timeout,
                              on_chunk_sent=die if rank == victim else None)  # fmt: skip
    buffers = {s.tensor: np.zeros(s.extent, refit.numpy_dtype(s.dtype)) for s in problem.shards(rank)}
    prepared = executor.prepare(plan, buffers)
    start = time.monotonic()
    try:
        prepared.execute()
        outcome = {"rank": rank, "raised": None}
    except refit.Error as e:
        outcome = {"rank": rank, "raised": type(e).__name__, "runtime_error": isinstance(e, RuntimeError),
                   "code": e.code, "message": str(e)}  # fmt: skip
    outcome["seconds"] = time.monotonic() - start
    print(json.dumps(outcome), flush=True)
    os._exit(0)  # the process group cannot be shut down with a dead member


if __name__ == "__main__":
    main()
