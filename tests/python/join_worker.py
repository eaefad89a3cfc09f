"""One process of the join tests (test_join_executor.py): tiny-qwen3-moe, Megatron TP2 x EP2
(ranks 0, 1) -> three vLLM engines of TP2 (engine e: ranks 2+2e, 3+2e), over torch.distributed
(gloo). Every process takes part in a full refit (verified), then engine JOIN "restarts": its
processes drop their arrays, make fresh zeroed ones and a fresh executor, and the join fills them
from SOURCE (peers, training or both). Only the join's processes make a group of their own and an
executor over it; a free process calls nothing more until the job's closing barrier.

Every process prints one JSON line: its role and join rank, whether its destinations were right
after the full refit and (joining) after the join, and the join's bytes it sent and received.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from typing import Any

import numpy as np
import torch.distributed as dist

import refit
from worker_weights import right, weights


def zeros(problem: refit.Problem, rank: int) -> dict[str, np.ndarray]:
    """Zeroed arrays for every box the (destination) rank needs."""
    return {s.tensor: np.zeros(s.extent, refit.numpy_dtype(s.dtype)) for s in problem.shards(rank)}


def main() -> None:
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=os.environ["INIT_METHOD"], rank=rank, world_size=size,
                            timeout=timedelta(seconds=60))  # fmt: skip
    problem = refit.Problem.from_model(sys.argv[1], train="tp=2,ep=2,etp=1", infer="tp=2,engines=3")
    cluster = refit.Cluster.preset("cpu-host:gpus_per_domain=2")
    training = problem.is_training(rank)
    buffers = ({s.tensor: weights(problem, s.tensor)[s.slices].copy() for s in problem.shards(rank)}
               if training else zeros(problem, rank))  # fmt: skip
    full = refit.Executor("ucx", refit.exchange.torch_distributed(), timeout=30)
    full.prepare(refit.plan(problem, cluster, chunk_bytes=4096), buffers).execute()
    result: dict[str, Any] = {"rank": rank, "full_right": None if training else right(problem, rank, buffers)}

    join = refit.plan_join(problem, cluster, int(os.environ["JOIN"]), source=os.environ["SOURCE"], chunk_bytes=4096)
    part = join.part(rank)
    result.update(role=part.role, join_rank=part.rank, world=join.world, sent=0, received=0, join_right=None)
    if part.rank is not None:
        if part.role == "joining":  # the restart: fresh memory, fresh executor
            buffers = zeros(problem, rank)
        executor = refit.Executor("ucx", join.exchange(rank), timeout=30)
        report = executor.prepare(join.plan, join.buffers(rank, buffers)).execute()
        result.update(sent=report.bytes_sent, received=report.bytes_received)
        if part.role == "joining":
            result["join_right"] = right(problem, rank, buffers)
    # Rank 0 hosts the job's store, which the join's group is made through: every process waits
    # here for the job's end (a free one at once, having done nothing since the full refit).
    dist.barrier()
    print(json.dumps(result), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
