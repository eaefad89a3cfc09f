"""Buffers for a problem's ranks whose bytes say where they belong, as numpy arrays or torch CPU
tensors: what the buffer tests move between ranks run as threads."""

from __future__ import annotations

from typing import Any

import numpy as np

import refit

SENTINEL = 7  # what a destination holds before the refit: still there after a refusal


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """Whole numbers below 256 as bf16 bit patterns (bf16 is the top half of an fp32)."""
    return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def full_tensor(problem: refit.Problem, name: str) -> np.ndarray:
    """The full tensor: element i of tensor t holds (7 i + t) mod 251, in the tensor's dtype."""
    index = [t.name for t in problem.tensors].index(name)
    tensor = problem.tensors[index]
    values = ((np.arange(int(np.prod(tensor.shape))) * 7 + index) % 251).reshape(tensor.shape)
    return bf16_bits(values) if tensor.dtype == "bf16" else values.astype(refit.numpy_dtype(tensor.dtype))


def numpy_buffers(problem: refit.Problem, rank: int) -> dict[str, Any]:
    """A rank's buffers as numpy arrays: a training rank's shards of full_tensor, an inference
    rank's filled with SENTINEL."""
    if problem.is_training(rank):
        return {s.tensor: np.ascontiguousarray(full_tensor(problem, s.tensor)[s.slices]) for s in problem.shards(rank)}
    return {s.tensor: np.full(s.extent, SENTINEL, dtype=refit.numpy_dtype(s.dtype)) for s in problem.shards(rank)}


def torch_buffers(problem: refit.Problem, rank: int) -> dict[str, Any]:
    """numpy_buffers as torch CPU tensors (bf16 as torch.bfloat16)."""
    import torch

    out = {}
    for name, a in numpy_buffers(problem, rank).items():
        dtype = refit.torch_dtype([t for t in problem.tensors if t.name == name][0].dtype)
        t = torch.from_numpy(a.view(np.int16) if a.dtype == np.uint16 else a)
        out[name] = t.view(dtype) if dtype.itemsize == t.element_size() and t.dtype != dtype else t
    return out
