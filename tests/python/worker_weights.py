"""The weights the worker processes of the multi-process tests (elastic_worker.py, join_worker.py)
refit and check: element i of tensor t is (7 i + t) mod 251, so a misplaced or missing byte shows."""

from __future__ import annotations

import numpy as np

import refit


def weights(problem: refit.Problem, name: str) -> np.ndarray:
    """The full tensor as training holds it: element i of tensor t is (7 i + t) mod 251."""
    index = [t.name for t in problem.tensors].index(name)
    tensor = problem.tensors[index]
    count = int(np.prod(tensor.shape))
    return ((np.arange(count) * 7 + index) % 251).reshape(tensor.shape).astype(refit.numpy_dtype(tensor.dtype))


def right(problem: refit.Problem, rank: int, buffers: dict[str, np.ndarray]) -> bool:
    """Whether every box of the rank's (a destination's) buffers holds its weights."""
    return all(np.array_equal(buffers[s.tensor], weights(problem, s.tensor)[s.slices]) for s in problem.shards(rank))
