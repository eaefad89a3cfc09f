"""Reshard problems: every tensor of a model with its training and its inference layout."""

from __future__ import annotations

import math
import os
import re
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Union

from refit import _refit
from refit._checks import INT32_MAX, checked_flag, checked_int, checked_rank, checked_text, optional_name, optional_text
from refit._errors import BadInput
from refit._layouts import TensorLayout
from refit._paths import FilePath, json_text, output_file, path_text

__all__ = ["Box", "Parameter", "Problem", "Region", "Shard", "Tensor"]

_DTYPE_BYTES = {
    "bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "fp8_e4m3": 1, "fp8_e5m2": 1,
    "int8": 1, "uint8": 1, "int32": 4, "int64": 8, "fp8_e8m0": 1,
}  # fmt: skip


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a refit dtype name ('bf16', 'fp32', ...)."""
    return _DTYPE_BYTES[dtype]


@dataclass(frozen=True)
class Tensor:
    """One tensor of a problem: its name, global shape and dtype (refit's name, e.g. 'bf16')."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        """Bytes of the whole tensor."""
        return math.prod(self.shape) * dtype_bytes(self.dtype)


@dataclass(frozen=True)
class Shard:
    """The box of one tensor that a rank holds (training) or needs (inference).

    A rank's buffer for the tensor is this box, row-major and contiguous: an array of shape
    ``extent`` and the tensor's dtype, the same as ``full_tensor[shard.slices]``.
    """

    tensor: str
    dtype: str
    tensor_shape: tuple[int, ...]
    offset: tuple[int, ...]
    extent: tuple[int, ...]

    @property
    def slices(self) -> tuple[slice, ...]:
        """The box as slices of the full tensor."""
        return tuple(slice(o, o + e) for o, e in zip(self.offset, self.extent))

    @property
    def nbytes(self) -> int:
        """Bytes of the box."""
        return math.prod(self.extent) * dtype_bytes(self.dtype)


@dataclass(frozen=True)
class Box:
    """Part of a logical tensor: offset and extent per dim, in the full tensor's coordinates."""

    offset: tuple[int, ...]
    extent: tuple[int, ...]

    @property
    def slices(self) -> tuple[slice, ...]:
        """The box as slices of the full tensor."""
        return tuple(slice(o, o + e) for o, e in zip(self.offset, self.extent))


@dataclass(frozen=True)
class Region:
    """Where part of a rank's box of a logical tensor lies in a framework parameter.

    Element ``i`` (a tuple, from 0 within ``box.extent``) of the box lies at flat element
    ``offset + sum(i[d] * strides[d])`` of the parameter (row-major): fused ``[q; k; v]`` rows,
    ``[gate; up]`` halves and stacked experts are regions of one parameter.
    """

    tensor: str
    box: Box
    offset: int
    strides: tuple[int, ...]

    def view(self, parameter: Any) -> Any:
        """The region of a parameter's numpy array (row-major, contiguous) as a view of shape
        ``box.extent``: ``region.view(param)[...] = full_tensor[region.box.slices]``."""
        import numpy as np

        flat = np.asarray(parameter).reshape(-1)
        end = self.offset + sum((e - 1) * s for e, s in zip(self.box.extent, self.strides)) + 1
        if flat.size < end:
            raise ValueError(f"region of '{self.tensor}' reaches element {end} of a parameter of {flat.size}")
        return np.lib.stride_tricks.as_strided(
            flat[self.offset :], shape=self.box.extent, strides=tuple(s * flat.itemsize for s in self.strides)
        )


@dataclass(frozen=True)
class Parameter:
    """A framework parameter on one rank, as the framework's ``named_parameters()`` spells it: its
    local shape (padding included), dtype, and the regions of logical tensors it holds. Elements
    in no region are padding (vocab rows past the vocabulary): refit neither reads nor writes them.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    regions: tuple[Region, ...]

    @property
    def nbytes(self) -> int:
        """Bytes of the parameter."""
        return math.prod(self.shape) * dtype_bytes(self.dtype)


def _naming_tensor(error: BadInput, names: list[str]) -> BadInput:
    """The error with the tensor its manifest path points at named by its name, for a caller who
    gave layouts, not a manifest: ``tensors[3].source: ...`` -> ``tensor 'w' (tensors[3].source): ...``."""
    match = re.match(r"tensors\[(\d+)\]([^:]*): ", error.message)
    if match is None or int(match[1]) >= len(names):
        return error
    where = f"tensor {names[int(match[1])]!r} (tensors[{match[1]}]{match[2]}): "
    return BadInput(where + error.message[match.end() :], error.code)


class Problem:
    """A reshard problem: tensors with their training (source) and inference (destination) layouts.

    Global ranks: training ranks are ``0 .. source_ranks-1``, inference ranks follow them. Make
    one with :meth:`from_model`, :meth:`from_manifest` or :meth:`from_layouts`::

        problem = refit.Problem.from_model("deepseek-v3", train="pp=16,ep=16", infer="tp=32,engines=8")
    """

    def __init__(self, handle: _refit.Problem, source: dict[str, object]) -> None:
        """Wraps a loaded problem; use :meth:`from_model`, :meth:`from_manifest` or
        :meth:`from_layouts`."""
        self._handle = handle
        self._source = dict(source)
        self._tensors: Optional[list[Tensor]] = None

    @classmethod
    def from_model(
        cls,
        model: FilePath,
        *,
        train: str,
        infer: str,
        dtype: Optional[str] = None,
        per_expert: bool = False,
        mtp: bool = False,
        quantize: Optional[str] = None,
        quantize_at: str = "landing",
    ) -> Problem:
        """The problem of a model with Megatron training and vLLM inference sizes.

        Args:
            model: a built-in name (:func:`refit.models`), a Hugging Face ``config.json`` or the
                directory holding one.
            train: Megatron sizes, e.g. ``"tp=4,pp=8,ep=16"`` (keys tp, pp, ep, etp, cp, dp,
                pp_first, pp_last, vp, layout, vocab_divisible_by, spec, glu_interleave).
            infer: vLLM sizes, e.g. ``"tp=8,engines=16"`` (keys tp, dp, engines, pp, ep, placement,
                all2all).
            dtype: overrides the config's ``torch_dtype`` (``"bf16"``, ``"fp8_e4m3"``, ...).
            per_expert: one tensor per routed expert instead of stacked ``[E, out, in]``.
            mtp: include DeepSeek-V3's multi-token-prediction layer.
            quantize: FP8 in flight: ``"fp8-block128"`` or ``"mxfp8"`` inference weights, as
                ``--quantize`` (a training rank still holds and hands over bf16, unless trained
                in fp8).
            quantize_at: ``"landing"`` (the default: fp8 on the network; training ranks holding
                whole blocks quantize them, and a weight whose training layout cuts blocks reaches
                one inference replica in bf16, is quantized there once and goes on as fp8; the
                landing ranks get a ``"<weight>@landing"`` shard for the bf16, listed by
                :meth:`shards`), ``"sender"`` (as landing, but bf16 to every replica where training
                cuts blocks), ``"receiver"`` (bf16 on the network, today's practice) or
                ``"training"`` (FP8 training: the training ranks hold fp8 weights and their
                scales, which move as they are).

        Raises:
            refit.BadInput: an unknown model, a config refit cannot read, sizes that do not fit;
                the message names the option as the refit command spells it (``--train: ...``).
        """
        source = {"model": path_text(model, "model"), "train": checked_text(train, "train"),
                  "infer": checked_text(infer, "infer"), "dtype": optional_name(dtype, "dtype") or "",
                  "per_expert": checked_flag(per_expert, "per_expert"), "mtp": checked_flag(mtp, "mtp"),
                  "quantize": optional_name(quantize, "quantize") or "",
                  "quantize_at": checked_text(quantize_at, "quantize_at")}  # fmt: skip
        problem = cls(_refit.Problem.load(**source), source)
        for note in problem.notes:
            warnings.warn(note, stacklevel=2)
        return problem

    @classmethod
    def from_manifest(cls, manifest: Union[FilePath, Mapping[str, Any]]) -> Problem:
        """The problem a manifest describes (any framework; ``refit models --write-manifest``):
        a file, or the manifest itself as a mapping (e.g. ``json.load``'s, or built in code).

        Raises:
            refit.BadInput: a manifest refit cannot read; the message names the JSON path.
        """
        if isinstance(manifest, Mapping):
            return cls(_refit.Problem.parse(json_text(manifest, "manifest")), {"manifest": "(a mapping)"})
        if not isinstance(manifest, (str, bytes, os.PathLike)):
            raise TypeError(f"manifest: a path or a mapping, got {type(manifest).__name__}")
        source = {"manifest": path_text(manifest, "manifest")}
        if source["manifest"].lstrip().startswith("{") and not os.path.exists(source["manifest"]):
            raise BadInput("manifest: JSON text where a path was expected (pass json.loads(text))",
                           "invalid argument")
        return cls(_refit.Problem.load(**source), source)

    @classmethod
    def from_layouts(
        cls, tensors: Iterable[TensorLayout], *, source_ranks: int, destination_ranks: int
    ) -> Problem:
        """The problem of tensors laid out as DTensor lays them (:class:`refit.TensorLayout`, whose
        layouts may come from a ``DeviceMesh`` and its placements): training ranks are
        ``0..source_ranks-1``, inference ranks follow. It has no framework storage maps: executors
        take each rank's boxes (``storage="logical"``).

        Raises:
            refit.BadInput: layouts that do not fit (a rank outside its side, a dim a placement
                does not have, ...), the message naming the tensor as ``tensors[i]``; rank counts
                that are not positive integers, naming ``source_ranks`` or ``destination_ranks``.
        """
        source_ranks = checked_int(source_ranks, "source_ranks", 1, INT32_MAX)
        destination_ranks = checked_int(destination_ranks, "destination_ranks", 1, INT32_MAX)
        if isinstance(tensors, (str, bytes, TensorLayout)) or not isinstance(tensors, Iterable):
            raise TypeError(f"tensors: expected a list of refit.TensorLayout, got {type(tensors).__name__}")
        tensors = list(tensors)
        for i, t in enumerate(tensors):
            if not isinstance(t, TensorLayout):
                raise TypeError(f"tensors[{i}]: expected a refit.TensorLayout, got {type(t).__name__}")
        entries = [t.to_manifest() for t in tensors]
        manifest = {
            "format": "refit-manifest", "version": 1,
            "source_ranks": source_ranks, "destination_ranks": destination_ranks, "tensors": entries,
        }  # fmt: skip
        try:
            return cls(_refit.Problem.parse(json_text(manifest, "layouts")), {"manifest": "(layouts)"})
        except BadInput as e:
            raise _naming_tensor(e, [t["name"] for t in entries]) from None

    def with_layouts(self, train: Optional[str] = None, infer: Optional[str] = None) -> Problem:
        """The same model with other training and/or inference sizes (for what-if studies)."""
        if "model" not in self._source:
            raise ValueError("a problem loaded from a manifest has fixed layouts: use from_model to vary them")
        source = dict(self._source)
        train, infer = optional_text(train, "train"), optional_text(infer, "infer")
        source["train"] = train if train is not None else source["train"]
        source["infer"] = infer if infer is not None else source["infer"]
        return Problem(_refit.Problem.load(**source), source)

    @property
    def model(self) -> Optional[str]:
        """The model it was made from, or None for a manifest."""
        return self._source.get("model")  # type: ignore[return-value]

    @property
    def train(self) -> Optional[str]:
        """The training sizes it was made with, or None for a manifest."""
        return self._source.get("train")  # type: ignore[return-value]

    @property
    def infer(self) -> Optional[str]:
        """The inference sizes it was made with, or None for a manifest."""
        return self._source.get("infer")  # type: ignore[return-value]

    @property
    def notes(self) -> list[str]:
        """What loading decided that was not asked for, a sentence each: a requested
        ``placement=round_robin`` that vLLM would not keep (no expert groups, or ``dp > 1`` on an
        all2all backend without round-robin routing tables), laid out linearly as vLLM loads it.
        :meth:`from_model` also warns with each."""
        return list(self._handle.notes)

    @property
    def source_ranks(self) -> int:
        """Training ranks."""
        return self._handle.source_ranks

    @property
    def destination_ranks(self) -> int:
        """Inference ranks."""
        return self._handle.destination_ranks

    @property
    def world_size(self) -> int:
        """Training plus inference ranks: the processes of a refit."""
        return self.source_ranks + self.destination_ranks

    @property
    def total_bytes(self) -> int:
        """Bytes of one copy of every tensor."""
        return self._handle.total_bytes

    @property
    def tensors(self) -> list[Tensor]:
        """Every tensor, in the problem's order."""
        if self._tensors is None:
            self._tensors = [Tensor(n, tuple(s), d) for n, s, d in self._handle.tensors()]
        return list(self._tensors)

    def is_training(self, rank: int) -> bool:
        """Whether a global rank is on the training side (holds sources).

        Raises:
            refit.BadInput: a rank outside the problem, or one that is no int (True, 1.5, "2"),
                as :meth:`shards` refuses it.
        """
        return self._checked_rank(rank) < self.source_ranks

    def shards(self, rank: int) -> list[Shard]:
        """The non-empty boxes a training rank holds, or an inference rank needs, in tensor order.

        These are the buffers the rank hands an executor, keyed by ``shard.tensor``.

        Raises:
            refit.BadInput: a rank outside the problem.
        """
        return [
            Shard(name, dtype, tuple(shape), tuple(offset), tuple(extent))
            for name, dtype, shape, offset, extent in self._handle.shards(self._checked_rank(rank))
        ]

    def _checked_rank(self, rank: Any) -> int:
        """``rank`` as a global rank of the problem, or BadInput naming it."""
        return checked_rank(rank, self.world_size, "the problem's")

    def framework(self, rank: int) -> str:
        """The framework whose parameters a rank holds: ``"megatron"`` (training ranks) or
        ``"vllm"`` (inference ranks)."""
        return self._side_storage(rank).framework

    def parameters(self, rank: int) -> list[Parameter]:
        """The framework parameters of a rank: Megatron-Core's on a training rank, vLLM's on an
        inference rank, in the framework's order, each with the regions of the rank's logical boxes
        it holds (what ``refit models MODEL --train .. --infer .. --storage --json`` lists).

        These are the buffers the rank hands an executor with ``storage="framework"``, keyed by
        ``parameter.name``.

        Raises:
            refit.BadInput: a rank outside the problem; a problem from a manifest without storage
                maps (version 1); a tensor the framework's rules cannot place (the message names it).
        """
        return [
            Parameter(name, tuple(shape), dtype, tuple(
                Region(tensor, Box(tuple(offset), tuple(extent)), at, tuple(strides))
                for tensor, offset, extent, at, strides in regions
            ))
            for name, shape, dtype, regions in self._side_storage(rank).parameters(self._checked_rank(rank))
        ]  # fmt: skip

    def _side_storage(self, rank: int) -> _refit.Storage:
        """The storage map of a rank's side (made once per side and problem): the framework's
        rules for a problem from a model, or a version 2 manifest's maps."""
        return self._handle.storage(self.is_training(rank))

    def manifest(self) -> str:
        """The problem as a manifest (JSON text, what ``Problem.from_manifest`` reads)."""
        return self._handle.manifest()

    def save_manifest(self, path: FilePath) -> None:
        """Writes the problem as a manifest file, refusing a path that cannot be written (a folder,
        a FIFO no process reads, a folder that does not exist) as :meth:`Plan.save` does."""
        output_file(path, "path").write(self.manifest().encode())

    def __repr__(self) -> str:
        what = (
            f"{self.model} train={self.train} infer={self.infer}"
            if self.model is not None
            else f"manifest {self._source['manifest']}"
        )
        return (
            f"<refit.Problem {what}: {len(self.tensors)} tensors, "
            f"{self.source_ranks} -> {self.destination_ranks} ranks>"
        )
