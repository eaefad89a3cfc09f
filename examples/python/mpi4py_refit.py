"""The refit of torchrun_refit.py between the processes of an mpirun job, through mpi4py, with
numpy arrays: 2 training processes (TP2 x EP2, ETP1) -> 2 inference processes (TP2), the tiny MoE model
in fp32. The arrays live in memory the UCX executor hands out (Executor.empty), which peers on the
same host write into directly.

    mpirun -np 4 python examples/python/mpi4py_refit.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from mpi4py import MPI

import refit

TINY_MODEL = Path(__file__).resolve().parents[2] / "tests/data/models/tiny-qwen3-moe.json"


def weights(problem: refit.Problem, name: str) -> np.ndarray:
    """The full tensor `name`: element i of tensor t is (7 i + t) mod 251."""
    index = [t.name for t in problem.tensors].index(name)
    tensor = problem.tensors[index]
    values = (np.arange(np.prod(tensor.shape)) * 7 + index) % 251
    return values.reshape(tensor.shape).astype(refit.numpy_dtype(tensor.dtype))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(TINY_MODEL))
    parser.add_argument("--train", default="tp=2,ep=2,etp=1")
    parser.add_argument("--infer", default="tp=2")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    problem = refit.Problem.from_model(args.model, train=args.train, infer=args.infer, dtype="fp32")
    if comm.Get_size() != problem.world_size:
        raise SystemExit(f"start {problem.world_size} processes (mpirun -np {problem.world_size})")
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    executor = refit.Executor("ucx", refit.exchange.mpi(comm), timeout=30)

    training = problem.is_training(rank)
    shards = problem.shards(rank)
    arrays = {s.tensor: executor.empty(s) for s in shards}
    if training:
        for s in shards:
            arrays[s.tensor][...] = weights(problem, s.tensor)[s.slices]
    prepared = executor.prepare(plan, arrays)
    for _ in range(args.steps):
        if not training:
            for a in arrays.values():
                a.fill(0)
        report = prepared.execute()

    if training:
        print(f"rank {rank} (training): sent {report.bytes_sent} bytes per step, {args.steps} steps", flush=True)
    else:
        for s in shards:
            if not np.array_equal(arrays[s.tensor], weights(problem, s.tensor)[s.slices]):
                raise SystemExit(f"rank {rank}: tensor {s.tensor} box {s.slices} is wrong")
        checked = sum(a.size for a in arrays.values())
        print(f"rank {rank} (inference): received {report.bytes_received} bytes, "
              f"verified {checked} elements of {len(shards)} tensors", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
