"""One process of a refit between the frameworks' own parameters (test_framework_buffers.py): a
training process hands refit its Megatron-Core parameters, an inference process its vLLM
parameters, keyed by the frameworks' names (``storage="framework"``), as numpy arrays or torch CPU
tensors. Both are laid out from one random HF checkpoint by the numpy reference
(framework_reference.py, seed 7 on every process). The processes meet through torch.distributed
(gloo); each inference process checks, after every step, that its parameters equal vLLM's layout
of the checkpoint byte for byte, and prints one JSON line: its rank, the steps and the parameters
that differ.

    RANK=r WORLD_SIZE=n INIT_METHOD=tcp://... python framework_worker.py CONFIG TRAIN INFER numpy|torch
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

import refit
from framework_reference import Megatron, Model, Params, Vllm, hf_state_dict, megatron_params, vllm_params


def sizes(text: str) -> dict[str, str]:
    """"tp=2,ep=2" -> {"tp": "2", "ep": "2"}."""
    return dict(kv.split("=") for kv in text.split(","))


def reference(config: Path, train: str, infer: str, rank: int, source_ranks: int) -> Params:
    """The rank's parameters as its framework lays the seed-7 checkpoint out (inference ranks: what
    they must hold after the refit)."""
    model = Model.from_config(json.loads(config.read_text()))
    state = hf_state_dict(model, np.random.default_rng(7))
    if rank < source_ranks:
        return megatron_params(state, model, Megatron(**{k: int(v) for k, v in sizes(train).items()}))[rank]
    i = sizes(infer)
    vllm = Vllm(tp=int(i.get("tp", 1)), dp=int(i.get("dp", 1)), expert_parallel=int(i.get("ep", 0)) > 0,
                placement=i.get("placement", "linear"))  # fmt: skip
    return vllm_params(state, model, vllm, first_rank=source_ranks)[rank]


def as_torch(a: np.ndarray, dtype: str) -> torch.Tensor:
    """The bits of a numpy array as a torch tensor of a refit dtype ('bf16' -> torch.bfloat16)."""
    bits = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}[a.itemsize]  # kinds torch.from_numpy takes
    return torch.from_numpy(np.ascontiguousarray(a).view(bits)).view(refit.torch_dtype(dtype))


def as_bytes(a: Any) -> bytes:
    """The bytes of an array or tensor, row-major."""
    if isinstance(a, torch.Tensor):
        return a.contiguous().view(torch.uint8).numpy().tobytes()
    return np.ascontiguousarray(a).tobytes()


def buffers(problem: refit.Problem, rank: int, expected: Params, kind: str) -> dict[str, Any]:
    """The rank's parameters: the reference's on a training rank, zeros on an inference rank (as
    both frameworks zero their padding rows), in the dtype refit lists for the parameter."""
    out: dict[str, Any] = {}
    for p in problem.parameters(rank):
        dtype = refit.numpy_dtype(p.dtype)  # the reference's bits, viewed as refit's dtype
        training = problem.is_training(rank)
        a = np.ascontiguousarray(expected[p.name]).view(dtype) if training else np.zeros(p.shape, dtype)
        out[p.name] = as_torch(a, p.dtype) if kind == "torch" else a
    return out


def main() -> None:
    config, train, infer, kind = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=os.environ["INIT_METHOD"], rank=rank, world_size=size,
                            timeout=timedelta(seconds=60))  # fmt: skip
    problem = refit.Problem.from_model(config, train=train, infer=infer)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    expected = reference(config, train, infer, rank, problem.source_ranks)
    assert sorted(p.name for p in problem.parameters(rank)) == sorted(expected), "refit's parameters"
    mine = buffers(problem, rank, expected, kind)
    prepared = refit.Executor("ucx", refit.exchange.torch_distributed(), timeout=30).prepare(
        plan, mine, storage="framework"
    )
    wrong: list[str] = []
    for step in range(2):
        for name, a in mine.items():
            if not problem.is_training(rank):
                a[...] = 0  # each step's refit is checked on its own
        prepared.execute()
        wrong += [f"step {step}: {name}" for name, a in mine.items() if as_bytes(a) != as_bytes(expected[name])]
    print(json.dumps({"rank": rank, "parameters": len(mine), "wrong": wrong}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
