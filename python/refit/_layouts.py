"""Layouts of tensors over ranks as PyTorch's DTensor spells them: a mesh of ranks and one
placement per mesh axis. They make a problem of any model without a manifest file::

    import torch.distributed.tensor as dt
    layouts = [
        refit.TensorLayout.of_dtensor("w", weight, destination=refit.Layout((2,), ("S0",))),
        refit.TensorLayout("b", (64,), "bf16", refit.Layout((4,), ("R",)), refit.Layout((2,), ("R",))),
    ]
    problem = refit.Problem.from_layouts(layouts, source_ranks=4, destination_ranks=2)

A placement is ``"R"`` (replicate), ``"S<dim>"`` (shard tensor dim ``dim`` like ``torch.chunk``;
several mesh axes sharding one dim apply in mesh-axis order, as DTensor does), or the split with
a named chunk of the manifest format (``"S<dim>:<chunk>"``, ``"S<dim>:<chunk>@<start>"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

__all__ = ["Layout", "TensorLayout"]


def _placement_name(placement: Any) -> str:
    """The manifest's spelling of a placement: a string as it is, or a DTensor placement object
    (``Shard(d)`` -> ``"S<d>"``, ``Replicate()`` -> ``"R"``)."""
    if isinstance(placement, str):
        return placement
    kind = type(placement).__name__
    if kind == "Replicate":
        return "R"
    if kind == "Shard":
        dim = getattr(placement, "dim", None)
        if not hasattr(dim, "__index__") or isinstance(dim, bool) or int(dim) < 0:
            raise ValueError(
                f"placement {placement!r}: Shard needs a dim counted from 0 (DTensor counts a "
                "negative one from the end, and a placement alone does not know the tensor's dims)"
            )
        return f"S{int(dim)}"
    if kind == "Partial":
        raise ValueError(
            f"placement {placement!r}: a Partial tensor holds summands, not a piece of the tensor; "
            "reduce it (DTensor.redistribute or full_tensor) before a refit moves it"
        )
    raise ValueError(
        f"placement {placement!r}: refit lays tensors out with Shard and Replicate "
        "(the placements of torch.distributed.tensor), or the strings 'R' and 'S<dim>'"
    )


#: A mesh's axes at most (the compiled part's limit).
_MAX_MESH_AXES = 4


def _mesh_ranks(mesh: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shape, ranks in row-major order) of a torch DeviceMesh, or of a nested sequence, numpy
    array or torch tensor of ranks."""
    grid = getattr(mesh, "mesh", mesh)  # a DeviceMesh keeps its ranks in .mesh
    if hasattr(grid, "tolist"):
        grid = grid.tolist()
    shape: list[int] = []
    level: Any = grid
    while isinstance(level, (list, tuple)) and level:
        if len(shape) == _MAX_MESH_AXES:  # also ends a list that contains itself
            raise ValueError(f"mesh {mesh!r}: more than {_MAX_MESH_AXES} axes (nested lists of ints, one level per axis)")
        shape.append(len(level))
        level = level[0]
    ranks: list[Any] = [grid]
    for extent in shape:
        if not all(isinstance(row, (list, tuple)) and len(row) == extent for row in ranks):
            raise ValueError(f"mesh {mesh!r}: not a grid of ranks (a DeviceMesh, or nested lists of ints)")
        ranks = [item for row in ranks for item in row]
    if not shape or not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
        raise ValueError(f"mesh {mesh!r}: not a grid of integer ranks (a DeviceMesh, or nested lists of ints)")
    return tuple(shape), tuple(ranks)


@dataclass(frozen=True)
class Layout:
    """How one side lays a tensor over its ranks.

    Attributes:
        mesh: the mesh's shape, 1 to 4 axes.
        placements: one per mesh axis: ``"R"``, ``"S<dim>"``, ``"S<dim>:<chunk>[@<start>]"``.
        ranks: the global rank at each mesh position in row-major order; None for the side's
            ranks in order (training ranks ``0..``, inference ranks from ``source_ranks``).
    """

    mesh: tuple[int, ...]
    placements: tuple[str, ...]
    ranks: Optional[tuple[int, ...]] = None

    def __post_init__(self) -> None:
        """Refuses what is no sequence where one is expected (a str would be read letter by letter)."""
        for field_name in ("mesh", "placements", "ranks"):
            value = getattr(self, field_name)
            if value is None and field_name == "ranks":
                continue
            if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                raise TypeError(f"Layout.{field_name}: expected a sequence, got {type(value).__name__} {value!r}")

    @classmethod
    def of(cls, mesh: Any, placements: Sequence[Any]) -> Layout:
        """The layout of a torch ``DeviceMesh`` (or a nested list, numpy array or tensor of global
        ranks) with DTensor placements (``Shard(d)``, ``Replicate()``) or their strings. Its ranks
        are the mesh's: the job's global ranks, training ranks first.

        Raises:
            ValueError: a ``Partial`` or other placement refit cannot move, or not a grid of ranks.
        """
        shape, ranks = _mesh_ranks(mesh)
        if isinstance(placements, (str, bytes)) or not hasattr(placements, "__iter__"):
            raise TypeError(f"placements: expected a sequence (one per mesh axis), got {placements!r}")
        return cls(mesh=shape, placements=tuple(_placement_name(p) for p in placements), ranks=ranks)

    @classmethod
    def of_dtensor(cls, tensor: Any) -> Layout:
        """The layout of a ``torch.distributed.tensor.DTensor``: its device mesh and placements."""
        return cls.of(tensor.device_mesh, tensor.placements)

    def to_manifest(self) -> dict[str, Any]:
        """The layout as a manifest writes it."""
        out: dict[str, Any] = {"mesh": list(self.mesh), "placements": list(self.placements)}
        if self.ranks is not None:
            out["ranks"] = list(self.ranks)
        return out


@dataclass(frozen=True)
class TensorLayout:
    """A tensor of the model with its training (source) and inference (destination) layouts.

    Attributes:
        name: the tensor's name, unique in the problem.
        shape: its global shape.
        dtype: a refit dtype (``"bf16"``, ``"fp8_e4m3"``, ...), a torch spelling
            (``"bfloat16"``) or a ``torch.dtype``.
        source: how the training ranks hold it.
        destination: how the inference ranks need it.
    """

    name: str
    shape: tuple[int, ...]
    dtype: Any
    source: Layout
    destination: Layout

    def __post_init__(self) -> None:
        """Refuses sides that are no Layout, naming the tensor."""
        for side in ("source", "destination"):
            value = getattr(self, side)
            if not isinstance(value, Layout):
                raise TypeError(f"tensor {self.name!r}: {side} is a {type(value).__name__}, expected a refit.Layout")

    @classmethod
    def of_dtensor(cls, name: str, tensor: Any, destination: Layout) -> TensorLayout:
        """A training rank's DTensor (its global shape, dtype, mesh and placements) and the layout
        the inference ranks need it in."""
        return cls(name, tuple(tensor.shape), tensor.dtype, Layout.of_dtensor(tensor), destination)

    def to_manifest(self) -> dict[str, Any]:
        """The tensor as a manifest writes it."""
        dtype = str(self.dtype).removeprefix("torch.")
        return {
            "name": self.name, "shape": list(self.shape), "dtype": dtype,
            "source": self.source.to_manifest(), "destination": self.destination.to_manifest(),
        }  # fmt: skip
