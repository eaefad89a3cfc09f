"""Generates tests/data/dtensor/local_boxes.json: random DTensor layouts and, for every mesh
position, the local shape and global offset that PyTorch itself computes.

The cases are uneven splits, empty shards, replicated axes and several mesh axes sharding one
tensor dim (where PyTorch reports an empty shard's offset as the dim's global size). PyTorch's
``compute_local_shape_and_global_offset(global_shape, mesh, placements)`` needs a DeviceMesh and
the calling process's coordinate; it hands both to ``_compute_local_shape_and_global_offset``,
which this script calls directly for every coordinate of the mesh.

Run with the torch the fixture should follow:

    python tests/core/dtensor_fixture.py tests/data/dtensor/local_boxes.json
"""

from __future__ import annotations

import itertools
import json
import random
import sys

import torch
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset

CASES = 600
SEED = 20261201


def random_case(rng: random.Random) -> dict:
    """A tensor of 1-3 dims (sizes 1-13, now and then 0) over a mesh of 1-3 axes (sizes 1-5),
    with placements that shard the same dim on several axes more often than chance would."""
    ndim = rng.randint(1, 3)
    shape = [0 if rng.random() < 0.03 else rng.choice([1, 2, 3, 5, 7, 8, 10, 13]) for _ in range(ndim)]
    mesh = [rng.randint(1, 5) for _ in range(rng.randint(1, 3))]
    favourite = rng.randrange(ndim)
    placements = []
    for _ in mesh:
        roll = rng.random()
        if roll < 0.2:
            placements.append("R")
        elif roll < 0.7:
            placements.append(f"S{favourite}")
        else:
            placements.append(f"S{rng.randrange(ndim)}")
    return {"shape": shape, "mesh": mesh, "placements": placements}


def torch_placement(text: str):
    return Replicate() if text == "R" else Shard(int(text[1:]))


def local_boxes(case: dict) -> dict:
    """PyTorch's local shape and global offset at every mesh position, row-major."""
    placements = [torch_placement(p) for p in case["placements"]]
    shapes, offsets = [], []
    for coordinate in itertools.product(*(range(n) for n in case["mesh"])):
        shape, offset = _compute_local_shape_and_global_offset(
            case["shape"], case["mesh"], list(coordinate), placements
        )
        shapes.append(list(shape))
        offsets.append(list(offset))
    return {**case, "local_shapes": shapes, "global_offsets": offsets}


def main(path: str) -> None:
    rng = random.Random(SEED)
    cases = [local_boxes(random_case(rng)) for _ in range(CASES)]
    with open(path, "w") as out:
        json.dump({"torch": torch.__version__, "seed": SEED, "cases": cases}, out, separators=(",", ":"))
        out.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
