"""A refit inside a PyTorch job started by torchrun, no mpirun: 2 training processes hold a tiny
MoE model split Megatron's way (TP2 x EP2, ETP1), 2 inference processes need it split vLLM's way (TP2).
The processes find each other through torch.distributed (gloo, CPU tensors); each plans the same
plan, prepares it once with its own tensors and refits every "step", then the inference processes
check every element they received.

    torchrun --standalone --nproc-per-node 4 examples/python/torchrun_refit.py

Ranks 0-1 are the training side and 2-3 the inference side (the plan's ranks are the job's).
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

import refit

TINY_MODEL = Path(__file__).resolve().parents[2] / "tests/data/models/tiny-qwen3-moe.json"


def weights(problem: refit.Problem, name: str) -> torch.Tensor:
    """The full tensor `name` as training would hold it: element i of tensor t is (7 i + t) mod
    251, a whole number every dtype holds exactly, so a misplaced element shows."""
    index = [t.name for t in problem.tensors].index(name)
    tensor = problem.tensors[index]
    values = (torch.arange(tensor.nbytes // refit.torch_dtype(tensor.dtype).itemsize) * 7 + index) % 251
    return values.reshape(tensor.shape).to(refit.torch_dtype(tensor.dtype))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(TINY_MODEL))
    parser.add_argument("--train", default="tp=2,ep=2,etp=1", help="Megatron sizes of the training side")
    parser.add_argument("--infer", default="tp=2", help="vLLM sizes of the inference side")
    parser.add_argument("--steps", type=int, default=3, help="refits with one prepared plan")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
    rank = dist.get_rank()
    problem = refit.Problem.from_model(args.model, train=args.train, infer=args.infer)
    if dist.get_world_size() != problem.world_size:
        raise SystemExit(f"start {problem.world_size} processes (torchrun --nproc-per-node {problem.world_size})")

    # Every process plans on its own; plans are deterministic (the executor compares hashes).
    # cpu-host: the processes of one machine in one shared-memory domain.
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    executor = refit.Executor("ucx", refit.exchange.torch_distributed(), timeout=args.timeout)

    training = problem.is_training(rank)
    shards = problem.shards(rank)
    tensors = {
        s.tensor: weights(problem, s.tensor)[s.slices].contiguous()
        if training
        else torch.zeros(s.extent, dtype=refit.torch_dtype(s.dtype))
        for s in shards
    }
    prepared = executor.prepare(plan, tensors)  # collective; checks every rank's tensors

    for _ in range(args.steps):
        if not training:
            for t in tensors.values():
                t.zero_()  # so that each step's refit is checked on its own
        report = prepared.execute()  # every rank, every training step

    if training:
        print(f"rank {rank} (training): sent {report.bytes_sent} bytes per step, {args.steps} steps", flush=True)
    else:
        checked = 0
        for s in shards:
            if not torch.equal(tensors[s.tensor], weights(problem, s.tensor)[s.slices]):
                raise SystemExit(f"rank {rank}: tensor {s.tensor} box {s.slices} is wrong")
            checked += tensors[s.tensor].numel()
        print(f"rank {rank} (inference): received {report.bytes_received} bytes, "
              f"verified {checked} elements of {len(shards)} tensors", flush=True)  # fmt: skip
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
