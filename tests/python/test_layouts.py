"""Problems from layouts as DTensor spells them (refit.Layout, refit.TensorLayout) and from
manifests given as mappings: the same problem as the manifest file, refits that land every byte,
and refusals that name what is wrong."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pytest

import refit
from conftest import TINY_MOE, run_ranks


def _readme_example() -> list[refit.TensorLayout]:
    """The README's manifest example: 4 training ranks, two replicas (`R`) of two TP ranks
    splitting the 128 columns (`S1`); 2 inference ranks splitting the 64 rows (`S0`)."""
    return [
        refit.TensorLayout(
            "model.layers.0.mlp.down_proj.weight", (64, 128), "bf16",
            source=refit.Layout((2, 2), ("R", "S1"), ranks=(0, 1, 2, 3)),
            destination=refit.Layout((2,), ("S0",), ranks=(4, 5)),
        )
    ]  # fmt: skip


def test_layouts_make_the_problem_their_manifest_describes(tmp_path: Path) -> None:
    layouts = _readme_example()
    problem = refit.Problem.from_layouts(layouts, source_ranks=4, destination_ranks=2)
    manifest = {"source_ranks": 4, "destination_ranks": 2, "tensors": [t.to_manifest() for t in layouts]}
    (tmp_path / "m.json").write_text(json.dumps(manifest))
    from_file = refit.Problem.from_manifest(tmp_path / "m.json")
    assert problem.manifest() == from_file.manifest() == refit.Problem.from_manifest(manifest).manifest()
    # Training rank 1 holds columns 64..127 of every row; inference rank 5 needs rows 32..63.
    w = "model.layers.0.mlp.down_proj.weight"
    assert [(s.offset, s.extent) for s in problem.shards(1)] == [((0, 64), (64, 64))]
    assert [(s.offset, s.extent) for s in problem.shards(5)] == [((32, 0), (32, 128))]
    assert problem.shards(1)[0].tensor == w
    cluster = refit.Cluster.preset("cpu-host")
    assert refit.plan(problem, cluster).hash == refit.plan(from_file, cluster).hash


def test_device_meshes_and_dtensor_placements_are_read_as_dtensor_spells_them() -> None:
    torch = pytest.importorskip("torch")
    from torch.distributed.tensor import Replicate, Shard

    # A DeviceMesh keeps its global ranks in `.mesh`; building a real one needs a process group
    # of its size, so a stand-in with the same attribute is used.
    mesh = SimpleNamespace(mesh=torch.arange(6).reshape(3, 2))
    layout = refit.Layout.of(mesh, [Shard(0), Replicate()])
    assert layout == refit.Layout((3, 2), ("S0", "R"), ranks=(0, 1, 2, 3, 4, 5))
    dtensor = SimpleNamespace(shape=torch.Size([10, 7]), dtype=torch.bfloat16, device_mesh=mesh,
                              placements=(Shard(0), Shard(0)))  # fmt: skip
    t = refit.TensorLayout.of_dtensor("x", dtensor, destination=refit.Layout((1,), ("R",)))
    assert (t.shape, t.to_manifest()["dtype"]) == ((10, 7), "bfloat16")
    problem = refit.Problem.from_layouts([t], source_ranks=6, destination_ranks=1)
    # Two mesh axes on dim 0 apply in mesh-axis order, as DTensor does: torch.chunk(10, 3) gives
    # 4, 4, 2 rows, each cut in two by the second axis: 2+2, 2+2, 1+1.
    assert [s.extent[0] for r in range(6) for s in problem.shards(r)] == [2, 2, 2, 2, 1, 1]
    assert [s.offset[0] for r in range(6) for s in problem.shards(r)] == [0, 2, 4, 6, 8, 9]
    assert problem.tensors[0].dtype == "bf16"


def test_a_problem_from_layouts_refits_every_byte() -> None:
    # 4 training ranks hold a [12, 10] fp32 tensor in column pairs-of-replicas; 3 inference ranks
    # need row thirds: each element lands once, where the destination layout puts it.
    full = (np.arange(120, dtype=np.float32) * 7 % 251).reshape(12, 10)
    problem = refit.Problem.from_layouts(
        [refit.TensorLayout("w", (12, 10), "fp32", refit.Layout((2, 2), ("R", "S1")), refit.Layout((3,), ("S0",)))],
        source_ranks=4, destination_ranks=3,
    )  # fmt: skip
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))

    def body(rank: int, exchange: Any) -> dict[str, np.ndarray]:
        fill: Callable[[refit.Shard], np.ndarray] = (
            (lambda s: np.ascontiguousarray(full[s.slices])) if problem.is_training(rank)
            else (lambda s: np.zeros(s.extent, np.float32))
        )  # fmt: skip
        buffers = {s.tensor: fill(s) for s in problem.shards(rank)}
        refit.run(refit.Executor("ucx", exchange, timeout=20), plan, buffers)
        return buffers

    results = run_ranks(problem.world_size, body)
    assert not any(isinstance(r, BaseException) for r in results), results
    for rank in range(4, 7):
        (s,) = problem.shards(rank)
        np.testing.assert_array_equal(results[rank]["w"], full[s.slices])


def test_layouts_refit_cannot_move_are_refused_naming_them() -> None:
    torch = pytest.importorskip("torch")
    from torch.distributed.tensor import Partial

    with pytest.raises(ValueError, match="Partial tensor holds summands"):
        refit.Layout.of([[0, 1]], [Partial()])
    with pytest.raises(ValueError, match="not a grid of ranks"):
        refit.Layout.of([[0, 1], [2]], ["R", "R"])
    with pytest.raises(ValueError, match="not a grid of integer ranks"):
        refit.Layout.of(torch.tensor([0.5, 1.5]), ["S0"])
    bad = refit.TensorLayout("w", (8, 4), "bf16", refit.Layout((2,), ("S2",)), refit.Layout((1,), ("R",)))
    with pytest.raises(refit.BadInput) as refused:
        refit.Problem.from_layouts([bad], source_ranks=2, destination_ranks=1)
    assert str(refused.value) == (
        "tensor 'w' (tensors[0].source): placements[0]: S2 is out of range for a tensor of 2 dims"
    )
    outside = refit.TensorLayout("w", (8, 4), "bf16", refit.Layout((2,), ("S0",), ranks=(0, 5)),
                                 refit.Layout((1,), ("R",)))  # fmt: skip
    with pytest.raises(refit.BadInput, match=r"tensor 'w': source mesh uses rank 5, outside the source ranks \[0, 2\)"):
        refit.Problem.from_layouts([outside], source_ranks=2, destination_ranks=1)


def test_a_problem_without_storage_maps_says_to_hand_over_boxes() -> None:
    problem = refit.Problem.from_layouts(_readme_example(), source_ranks=4, destination_ranks=2)
    with pytest.raises(refit.BadInput, match='no framework storage maps.*storage="logical"'):
        problem.parameters(0)


def test_a_version_2_manifest_mapping_keeps_its_storage_maps(
    tmp_path: Path, cli: Callable[..., subprocess.CompletedProcess]
) -> None:
    path = tmp_path / "v2.json"
    done = cli("models", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2",
               "--storage", "--write-manifest", str(path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    from_file = refit.Problem.from_manifest(path)
    from_mapping = refit.Problem.from_manifest(json.loads(path.read_text()))
    for rank in range(from_file.world_size):
        assert from_mapping.parameters(rank) == from_file.parameters(rank)
    assert from_mapping.framework(0) == "megatron" and from_mapping.framework(3) == "vllm"


def test_numpy_integers_stand_for_ints_in_layouts_and_mappings() -> None:
    # numpy integers (a mesh's shape from an array, ranks from np.arange) once failed deep in
    # json.dumps naming neither the tensor nor the field.
    layouts = [
        refit.TensorLayout(
            "w", (np.int64(8), np.int32(4)), "fp32",
            source=refit.Layout((np.int64(2),), ("S0",), ranks=tuple(np.arange(2))),
            destination=refit.Layout((1,), ("R",)),
        )
    ]  # fmt: skip
    problem = refit.Problem.from_layouts(layouts, source_ranks=np.int64(2), destination_ranks=1)
    assert [(s.offset, s.extent) for s in problem.shards(1)] == [((4, 0), (4, 4))]


def test_a_mesh_that_contains_itself_is_refused_instead_of_walked_forever() -> None:
    mesh: list[Any] = []
    mesh.append(mesh)
    with pytest.raises(ValueError, match="more than 4 axes"):
        refit.Layout.of(mesh, ["R"])


def test_manifests_that_are_not_json_say_why() -> None:
    looped: dict[str, Any] = {"format": "refit-manifest"}
    looped["tensors"] = [looped]
    with pytest.raises(refit.BadInput, match="manifest: Circular reference detected"):
        refit.Problem.from_manifest(looped)
    with pytest.raises(refit.BadInput, match="manifest: a object is not a JSON value"):
        refit.Problem.from_manifest({"format": object()})
    with pytest.raises(TypeError, match="manifest: a path or a mapping, got list"):
        refit.Problem.from_manifest([])  # type: ignore[arg-type]
    with pytest.raises(refit.BadInput, match="JSON text where a path was expected"):
        refit.Problem.from_manifest('{"format": "refit-manifest"}')
    with pytest.raises(ValueError, match="manifest: an empty path"):
        refit.Problem.from_manifest("")
