"""Executors: moving a plan's bytes between the processes of a job, from Python."""

from __future__ import annotations

import numbers
import sys
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Mapping, Optional, Sequence

from refit import _refit
from refit._checks import INT32_MAX, INT64_MAX, checked_flag, checked_int, checked_ints, checked_seconds
from refit._checks import optional_callable, rank_problem
from refit._claims import Claim, claiming, claims_of, memory, release
from refit._errors import BadInput, raised
from refit._plan import Plan, expect
from refit._problem import Problem, Shard
from refit.exchange import Exchange

__all__ = ["ExecutionReport", "Executor", "Prepared", "executors", "numpy_dtype", "run", "torch_dtype"]

#: How a rank's buffers hold its shards: one array per box, or the framework's parameters.
Storage = Literal["logical", "framework"]

#: Staging per rank for packing strided pieces (every rank of a refit must use the same).
DEFAULT_STAGING: int = _refit.DEFAULT_STAGING_BYTES

#: A delta refit re-plans by the bytes that move past this share drift (``--delta-rebalance``).
DELTA_REBALANCE: float = _refit.DELTA_REBALANCE

# numpy has no bf16 or fp8: their buffers may be unsigned integers of the same width.
_NUMPY_DTYPES = {
    "bf16": "uint16", "fp16": "float16", "fp32": "float32", "fp64": "float64",
    "fp8_e4m3": "uint8", "fp8_e5m2": "uint8",
    "int8": "int8", "uint8": "uint8", "int32": "int32", "int64": "int64", "fp8_e8m0": "uint8",
}  # fmt: skip


def numpy_dtype(dtype: str) -> Any:
    """The numpy dtype of a buffer for a refit dtype; bf16 and fp8 are held as their bits
    (uint16, uint8), which executors accept for them."""
    import numpy as np

    return np.dtype(_NUMPY_DTYPES[_known_dtype(dtype, _NUMPY_DTYPES)])


def torch_dtype(dtype: str) -> Any:
    """The torch dtype of a refit dtype ('bf16' -> torch.bfloat16, 'fp8_e4m3' -> float8_e4m3fn)."""
    import torch

    dtypes = {
        "bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
        "fp64": torch.float64, "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2,
        "int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64,
        "fp8_e8m0": torch.float8_e8m0fnu,
    }  # fmt: skip
    return dtypes[_known_dtype(dtype, dtypes)]


def _known_dtype(dtype: str, known: Mapping[str, Any]) -> str:
    """``dtype`` if it is one of refit's dtype names, else BadInput naming it and the names."""
    if not isinstance(dtype, str) or dtype not in known:
        raise BadInput(f"unknown dtype {dtype!r} (expected one of {', '.join(known)})", "unsupported")
    return dtype


def executors() -> list[str]:
    """The executors this build has: ``ucx``, and ``nccl`` when it was built with CUDA."""
    return list(_refit.executor_names())


@dataclass(frozen=True)
class DeltaStep:
    """What one step of a delta refit did on this rank (``Executor(..., delta=True)``)."""

    dense_bytes: int  #: what the pieces this rank sends weigh: what a full refit sends
    pieces: int  #: pieces (a box of a tensor for one receiver) this rank sends
    unchanged: int  #: of them, with no element changed: nothing sent
    full: int  #: of them, sent dense: no baseline both ends agree on (first step, failure, drift)
    encode_s: float  #: packing and encoding what this rank sends
    decode_s: float  #: decoding and unpacking what this rank receives
    exchange_s: float  #: the receivers' audit, agreeing on checksums and sizes, preparing the step
    #: how far this step's payload shares over the tensors lay from those the plan was balanced
    #: for (a total-variation distance in [0, 1]; the same on every rank); None where no
    #: re-balancing was asked for, so none was measured
    share_drift: Optional[float] = None
    rebalanced: bool = False  #: every rank re-planned by this step's payloads (the next step runs it)
    rebalance_s: float = 0.0  #: re-planning


@dataclass(frozen=True)
class ExecutionReport:
    """What one execution moved on this rank (``refit run``'s per-rank figures)."""

    rank: int
    bytes_sent: int
    bytes_received: int
    elapsed_s: float
    messages: int
    bytes_stored_directly: int
    delta: Optional[DeltaStep] = None  #: a delta refit's step: bytes_sent are its payloads
    #: elastic refit (:meth:`Executor.set_members`): the member engines that got every byte of this
    #: step, and those that missed it (a rank of theirs died, failed or was fenced, or data they
    #: needed came through one that did); the same on every rank
    engines_completed: Optional[list[int]] = None
    engines_missed: Optional[list[int]] = None  #: see ``engines_completed``


def _checked_rebalance(drift: Optional[float]) -> Optional[float]:
    """``delta_rebalance`` as a share drift in [0, 1], or None (never re-plan)."""
    if drift is None:
        return None
    if isinstance(drift, bool) or not isinstance(drift, numbers.Real) or not 0.0 <= drift <= 1.0:
        raise ValueError(f"delta_rebalance: a share drift in [0, 1] or None, got {drift!r}")
    return float(drift)


#: Where the buffers taken out of Transformer Engine fp8 parameters come from, by buffer name:
#: (the parameter, the attribute holding the buffer).
Parts = dict[str, tuple[Any, str]]

#: A buffer's layout: its shape, and its strides (torch: in elements, numpy: in bytes).
Layout = tuple[tuple[int, ...], tuple[int, ...]]


def _layout(buffer: Any) -> Optional[Layout]:
    """The layout of a torch tensor or numpy array; None for other arrays, or when reading it
    raised (then there is nothing to compare)."""
    try:
        if hasattr(buffer, "data_ptr") and hasattr(buffer, "untyped_storage"):
            return tuple(int(n) for n in buffer.shape), tuple(int(s) for s in buffer.stride())
        if isinstance(getattr(buffer, "__array_interface__", None), dict):
            return tuple(int(n) for n in buffer.shape), tuple(int(s) for s in buffer.strides)
    except Exception:  # noqa: BLE001 - an array that cannot say what it is: nothing to compare
        return None
    return None


def _spelled(layout: Optional[Layout]) -> str:
    """A layout in a message: "shape [4, 6], strides [6, 1]"."""
    if layout is None:
        return "an unknown layout"
    return f"shape {list(layout[0])}, strides {list(layout[1])}"


def _torch_tensors(buffers: Iterable[Any]) -> list[Any]:
    """The torch tensors among `buffers`, found without importing torch: when it is not imported,
    the caller passed none."""
    torch = sys.modules.get("torch")
    return [] if torch is None else [b for b in buffers if isinstance(b, torch.Tensor)]


def _bump_versions(tensors: list[Any]) -> None:
    """Tells autograd that the executor wrote `tensors` in place, as torch's own in-place ops do:
    a graph that saved one for backward then raises instead of using the new values silently.
    Tensors made under ``torch.inference_mode()`` have no version counter."""
    if not tensors:
        return
    import torch

    for t in tensors:
        if not t.is_inference():
            torch.autograd.graph.increment_version(t)


def _storage(buffer: Any) -> Any:
    """A torch tensor's storage (None for other arrays): holding it keeps the memory the
    executor was prepared with alive even when ``param.data = ...`` gives the tensor another."""
    return buffer.untyped_storage() if hasattr(buffer, "untyped_storage") else None


def _lazy_view(buffer: Any) -> Optional[str]:
    """What a torch tensor's bytes do not show (a pending negation or conjugation), if any."""
    for bit, what in (("is_neg", "negation"), ("is_conj", "conjugation")):
        test = getattr(buffer, bit, None)
        if callable(test) and test():
            return what
    return None


def _plan_rank(rank: Any, plan: Plan, fallback: int) -> tuple[int, str]:
    """``rank`` as a plan rank, or ``fallback`` and why it is not one: refused through the
    collective prepare like a wrong buffer, since raising on this rank alone would leave every
    other rank waiting."""
    problem = rank_problem(rank, plan.problem.world_size, "the problem's")
    return (fallback, problem) if problem is not None else (int(rank), "")


def _utf8(refusal: str) -> str:
    """A refusal the compiled part can take: a buffer key with a lone surrogate (which has no
    UTF-8 spelling) escaped, as repr escapes it."""
    return refusal.encode("utf-8", "backslashreplace").decode("utf-8")


class Prepared:
    """A plan prepared on an executor with this process's buffers; execute it every step."""

    def __init__(
        self,
        handle: _refit.Prepared,
        plan: Plan,
        buffers_by_rank: dict[int, dict[str, Any]],
        claims: int,
        parts_by_rank: Optional[dict[int, Parts]] = None,
    ) -> None:
        """Made by :meth:`Executor.prepare` (one plan rank) or :meth:`Executor.prepare_ranks`;
        ``claims`` is the token of its memory's claims, given up when it is gone;
        ``parts_by_rank`` says where the buffers taken out of Transformer Engine fp8 parameters
        come from (:func:`fp8_parameter_buffers`), which execute reads again."""
        weakref.finalize(self, release, claims)
        self._handle = handle
        self.plan = plan
        # The arrays the executor reads or writes, by plan rank; kept alive with it.
        self.buffers_by_rank = buffers_by_rank
        self._parts = {
            (rank, name): part for rank, parts in (parts_by_rank or {}).items() for name, part in parts.items()
        }
        # Each buffer's memory and layout as prepared, which execute must find again.
        self._prepared = {
            (rank, name): (memory(b), _layout(b))
            for rank, buffers in buffers_by_rank.items()
            for name, b in buffers.items()
        }
        self._storages = [_storage(b) for buffers in buffers_by_rank.values() for b in buffers.values()]
        # The torch tensors the executor writes (an inference rank's), for autograd's version counter.
        written = [b for rank, bs in buffers_by_rank.items() if rank >= plan.problem.source_ranks for b in bs.values()]
        self._written = _torch_tensors(written)

    @property
    def buffers(self) -> dict[str, Any]:
        """The arrays of this process's (first) plan rank."""
        return self.buffers_by_rank[self.rank]

    def _now(self, rank: int, name: str) -> Any:
        """A buffer as it is now: one taken out of a Transformer Engine fp8 parameter read again
        from the parameter (which may have been given new memory since), others as given."""
        part = self._parts.get((rank, name))
        return self.buffers_by_rank[rank][name] if part is None else getattr(part[0], part[1], None)

    def _check_unchanged(self) -> None:
        """Refuses a buffer whose memory moved since prepare: the executor reads and writes
        where it was (``param.data = ...``, ``resize_()`` or a CPU-offload round trip move it);
        or whose shape or strides changed in place (``t_()``, ``transpose_()``,
        ``as_strided_()``, ``resize_()`` to as many bytes): its memory is where it was, but the
        executor reads and writes it in the row-major layout prepare checked."""
        for (rank, name), (was, layout) in self._prepared.items():
            buffer = self._now(rank, name)
            now = memory(buffer)
            if was is not None and now != was:
                raise BadInput(
                    f"rank {rank}: buffer '{name}': its memory moved since prepare() (from "
                    f"{was[1]} bytes at {was[0]:#x} to {now[1] if now else '?'} bytes at "
                    f"{now[0] if now else 0:#x}); prepare the plan again with the buffers as they are",
                    "mismatch",
                )
            shaped = _layout(buffer)
            if layout is not None and shaped != layout:
                raise BadInput(
                    f"rank {rank}: buffer '{name}': its layout changed since prepare() (from "
                    f"{_spelled(layout)} to {_spelled(shaped)}); prepare the plan again with the buffers as they are",
                    "mismatch",
                )

    @property
    def rank(self) -> int:
        """This process's rank in the plan (the first, when it runs several)."""
        return self._handle.rank

    @property
    def ranks(self) -> list[int]:
        """The plan ranks this process runs."""
        return list(self.buffers_by_rank)

    def execute(self) -> ExecutionReport:
        """Moves the bytes; the GIL is released meanwhile. Every rank calls it, as often as it
        refits (sources are read and destinations written in place each time). Every torch
        tensor it writes has its autograd version counter bumped, as after torch's own in-place
        ops: a graph that saved one for backward raises in ``backward()``.

        Raises:
            refit.Failure: a transport failed, or a peer died or hung (``refit.PeerFailed``,
                ``refit.Timeout``); the message names the rank and what was awaited from it.
                After a failure the executor is done: every later ``execute`` or ``prepare`` on
                it raises at once (the peers and transports are in no known state); make a new
                :class:`Executor`. Two threads executing at once on one executor (one plan
                or two): the second raises.
            KeyboardInterrupt: Ctrl-C on the main thread while it executes (ucx: within 0.1 s;
                the peers fail at once, naming this rank); the executor is then done too.
            refit.BadInput: a buffer's memory moved since prepare (e.g. ``param.data = t``), or
                its shape or strides changed in place (``t_()``, ``as_strided_()``); nothing
                moves on this rank, and its peers fail at their timeout naming it.
        """
        self._check_unchanged()
        try:
            report = self._handle.execute()
        finally:  # a failed execution may have written some of them too
            _bump_versions(self._written)
        delta = report.pop("delta", None)
        return ExecutionReport(**report, delta=None if delta is None else DeltaStep(**delta))


class Executor:
    """An executor for this process: ``ucx`` (host memory), or ``nccl`` (CUDA memory) when built.

    The processes of a refit are the plan's ranks: training ranks first, then inference ranks.
    Each one makes an executor over an exchange (:mod:`refit.exchange`) and prepares the same
    plan with its own buffers::

        executor = refit.Executor("ucx", refit.exchange.torch_distributed())
        prepared = executor.prepare(plan, {name: tensor, ...})   # collective
        prepared.execute()                                      # every step

    Buffers are the rank's boxes keyed by tensor name, or with ``storage="framework"`` the
    framework's parameters keyed by their names (``plan.problem.parameters(rank)``).

    Args:
        name: the backend (:func:`refit.executors`).
        exchange: an allgather of bytes with this process's ``rank`` and ``size``.
        timeout: seconds any wait on a peer may last (at most 10^6); then every rank fails,
            naming the peer.
        staging: bytes per rank for packing strided pieces; the same on every rank.
        direct_stores: store into peers' memory mapped into this process (same-host shared
            memory) instead of going through the transport.
        on_chunk_sent: called with (transfer, chunk) after each chunk this rank sent (progress).
        comm_rank_of: ``nccl`` only: for every plan rank, the exchange rank whose process runs
            it, so that a process runs several plan ranks on its GPU (:meth:`prepare_ranks`):
            ``[0] * plan.problem.world_size`` runs a whole plan in one process over a
            communicator of size 1 (every send NCCL's send to self). Default: plan rank r is
            exchange rank r.
        device: ``nccl`` only: the CUDA device of this process (default: its rank among the
            exchange's ranks on this host, modulo the visible GPUs).
        delta: every ``execute`` is one step of a delta refit (docs/delta.md): each piece moves
            only what changed since the bytes its receiver holds, bit for bit, dense where the two
            ends' checksums disagree; the report's ``delta`` says what it did. With ``ucx`` the
            bytes and the codec are on the host (host memory only); with ``nccl`` they are on
            the GPU, encoded by the GPU codec (host or CUDA memory; one plan rank per process, no
            ``comm_rank_of``). Plans of the ``refit`` and ``direct`` strategies only. FP8 in flight (a problem with
            ``quantize`` whose weights the senders quantize, ``quantize_at="sender"``): a training
            rank hands over bf16 as in a dense refit, and the deltas are of the fp8 values and
            scales it makes, so every inference rank holds exactly what a dense FP8 refit gives
            (host memory only).
        delta_rebalance: with ``delta``, every rank re-plans by the bytes that move after a step
            whose payload shares over the tensors drift from the plan's by more than this
            total-variation distance, as ``refit run --delta-rebalance`` (docs/delta.md; default
            :data:`DELTA_REBALANCE`, 0.1; 1 or None never re-plans). Plans loaded from a file are
            never re-planned.
    """

    def __init__(
        self,
        name: str = "ucx",
        exchange: Optional[Exchange] = None,
        *,
        timeout: float = 60.0,
        staging: int = DEFAULT_STAGING,
        direct_stores: bool = True,
        on_chunk_sent: Optional[Callable[[int, int], None]] = None,
        comm_rank_of: Optional[Sequence[int]] = None,
        device: Optional[int] = None,
        delta: bool = False,
        delta_rebalance: Optional[float] = DELTA_REBALANCE,
    ) -> None:
        if exchange is None:
            raise TypeError("Executor(name, exchange): an exchange is needed (see refit.exchange)")
        if not all(hasattr(exchange, a) for a in ("allgather", "rank", "size")):
            raise TypeError(
                f"exchange: expected an allgather with a rank and a size (refit.exchange), got {type(exchange).__name__}"
            )
        if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
            raise TypeError(f"timeout: a number of seconds, got {timeout!r}")
        optional_callable(on_chunk_sent, "on_chunk_sent", "(transfer, chunk)")
        timeout = checked_seconds(timeout, "timeout", _refit.MIN_TIMEOUT_S, _refit.MAX_TIMEOUT_S)
        if not isinstance(name, str):
            raise TypeError(f"name: an executor name (refit.executors()), got {name!r}")
        staging = checked_int(staging, "staging", _refit.MIN_STAGING_BYTES, INT64_MAX, " bytes")
        if device is not None and (
            isinstance(device, bool) or not isinstance(device, numbers.Integral) or not 0 <= device <= INT32_MAX
        ):
            raise ValueError(f"device: a CUDA device number (0, 1, ...), got {device!r}")
        ranks_of = None if comm_rank_of is None else checked_ints(comm_rank_of, "comm_rank_of", 0, INT32_MAX)
        direct_stores = checked_flag(direct_stores, "direct_stores")
        self._delta_rebalance = _checked_rebalance(delta_rebalance)
        self._delta = checked_flag(delta, "delta")
        self.exchange = exchange
        self._handle = _refit.Executor(
            name, exchange.allgather, exchange.rank, exchange.size, float(timeout), staging,
            direct_stores, on_chunk_sent, ranks_of, -1 if device is None else int(device), self._delta,
        )  # fmt: skip

    @property
    def name(self) -> str:
        """The backend."""
        return self._handle.name

    def _rebalance_for(self, plan: Plan) -> None:
        """A delta refit's re-balance of ``plan`` (a plan made by :func:`refit.plan`)."""
        if not self._delta:
            return
        drift = None if plan.chunk_bytes is None else self._delta_rebalance
        self._handle.rebalance_with(
            plan.problem._handle, plan.cluster.placed(plan.problem), plan.strategy, plan.chunk_bytes or 1, drift
        )

    @property
    def rank(self) -> int:
        """This process's rank (the exchange's)."""
        return self.exchange.rank

    @property
    def cudamemory(self) -> bool:
        """Whether buffers may be CUDA memory (torch CUDA tensors): the NCCL executor."""
        return self._handle.cuda_memory

    def set_members(self, problem: Problem, members: Sequence[int], epoch: int) -> None:
        """Elastic refit (docs/elastic.md): the executions that follow run over these engines of
        ``problem`` (indices 0.. of its ``infer`` engines) and keep the prepared plans (no new
        ``prepare``). An engine whose rank dies, fails or is fenced during an execution misses
        that step; every other engine completes it, and the report names both
        (``engines_completed``, ``engines_missed``). Every process calls it with the same members
        and ``epoch`` before the step, and calls ``execute`` every step, a non-member too (it
        returns at once). A peer still at an older epoch is fenced out: it writes nothing into the
        members' engines, and its own ``execute`` raises.

        Raises:
            refit.BadInput: an engine index out of range, an epoch of 0, a problem from a manifest
                (which names no engines), or an executor that cannot run part of a plan (nccl,
                delta).
        """
        if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral) or not 1 <= epoch < 1 << 64:
            raise ValueError(f"epoch: a membership epoch (1, 2, ... below 2^64), got {epoch!r}")
        self._handle.set_members(problem._handle, checked_ints(members, "members", 0, INT32_MAX), int(epoch))

    def empty(self, shard: Shard) -> Any:
        """An uninitialised numpy array for a shard, in memory this executor moves fastest (UCX:
        memory its peers write into directly). bf16 and fp8 come as uint16 and uint8 bits;
        ``torch.from_numpy(a).view(torch.bfloat16)`` makes a tensor of it."""
        if not isinstance(shard, Shard):
            raise TypeError(f"empty: a refit.Shard (Problem.shards(rank)), got {type(shard).__name__}")
        dtype = numpy_dtype(shard.dtype)
        extent = shard.extent
        if not isinstance(extent, (tuple, list)) or any(
            isinstance(e, bool) or not isinstance(e, numbers.Integral) or e < 0 for e in extent
        ):
            raise BadInput(
                f"shard '{shard.tensor}': extent {extent!r} is not a box's (sizes of 0 or more)", "invalid argument"
            )
        nbytes = checked_int(shard.nbytes, f"shard '{shard.tensor}'", 0, INT64_MAX, " bytes")
        raw = self._handle.allocate(nbytes)
        return raw.view(dtype).reshape(tuple(int(e) for e in extent))

    def prepare(
        self,
        plan: Plan,
        buffers: Mapping[str, Any],
        rank: Optional[int] = None,
        *,
        storage: Storage = "logical",
    ) -> Prepared:
        """Prepares the plan for this process's rank with its buffers; collective (every rank
        calls it with the same plan). Nothing moves yet.

        Args:
            buffers: arrays (numpy, torch CPU tensors; torch CUDA tensors for ``nccl``),
                row-major and contiguous, writable on an inference rank, keyed as ``storage``
                says. A model's parameters go as themselves, not ``p.detach()`` or
                ``state_dict()`` tensors: :meth:`Prepared.execute` refuses one whose memory
                moved since (``param.data = t``) only when it holds the parameter.
            rank: this process's rank in the plan (default: the exchange's).
            storage: how the rank's buffers hold its shards.

                * ``"logical"``: tensor name -> the rank's box of that tensor, one per non-empty
                  box of ``plan.problem.shards(rank)``, of the box's shape and the tensor's dtype.
                * ``"framework"``: framework-parameter name -> the parameter, one per entry of
                  ``plan.problem.parameters(rank)`` (Megatron-Core's on a training rank, vLLM's
                  on an inference rank: fused qkv and gate/up, stacked experts, padded vocab), of
                  its shape and dtype; the shards are read and written where they lie in them.
                  Padding (vocab rows past the vocabulary, in no region) is left as the caller
                  gave it. Needs a problem from a model, or a version 2 manifest. A Transformer
                  Engine fp8 parameter (FP8 training) may be given as it is: see
                  :func:`fp8_parameter_buffers`.

                The choice is explicit because names alone do not tell: vLLM's
                ``model.norm.weight`` is both a tensor and a parameter. Each rank chooses for
                itself.

        Raises:
            refit.BadInput: a buffer that is missing, unknown, or of the wrong shape, dtype, size
                or memory (the message names the tensor or parameter), with ``"framework"`` a
                problem without storage maps, or an unknown ``storage``, on any rank: every rank
                refuses before any byte moves.
            refit.Failure: this executor failed in an earlier execution (make a new one).
        """
        refusal, own, parts = _checked_buffers(buffers, storage)
        at, wrong_rank = _plan_rank(self.rank if rank is None else rank, plan, fallback=self.rank)
        self._rebalance_for(plan)
        claims, unreadable = claims_of(at, at >= plan.problem.source_ranks, own)
        with claiming(self, claims, self._handle.barrier) as (conflict, token):
            handle = self._handle.prepare(
                plan._handle, plan.problem._handle, at, own, storage == "framework",
                _utf8(refusal or wrong_rank or unreadable or conflict),
            )  # fmt: skip
            return Prepared(handle, plan, {handle.rank: own}, token, {handle.rank: parts})

    def prepare_ranks(
        self, plan: Plan, buffers: Mapping[int, Mapping[str, Any]], *, storage: Storage = "logical"
    ) -> Prepared:
        """Prepares the plan for several plan ranks of this process at once (``nccl`` with
        ``comm_rank_of``: every plan rank it maps to this process's exchange rank); collective
        like :meth:`prepare`. ``buffers`` maps each of those plan ranks to its buffers, keyed as
        ``storage`` says (:meth:`prepare`); the executor then runs all of them, the traffic
        between them being NCCL's send to self.

        Example, a whole plan on one GPU::

            alone = refit.exchange.from_callable(lambda data: [data], rank=0, size=1)
            executor = refit.Executor("nccl", alone, comm_rank_of=[0] * problem.world_size)
            prepared = executor.prepare_ranks(plan, {r: buffers_of(r) for r in range(problem.world_size)})

        Raises:
            refit.BadInput: as :meth:`prepare`, naming the rank; or an executor that runs one
                plan rank per process (``ucx``).
        """
        refusal, ranks, sets = _rank_sets(buffers, plan)
        checked = [_checked_buffers(given, storage) for given in sets]
        refusal = refusal or next((f"rank {r}: {why}" for r, (why, _, _) in zip(ranks, checked) if why), "")
        owns = [own for _, own, _ in checked]
        claims: list[Claim] = []
        for r, own in zip(ranks, owns):
            mine, unreadable = claims_of(r, r >= plan.problem.source_ranks, own)
            claims += mine
            refusal = refusal or (unreadable and f"rank {r}: {unreadable}")
        with claiming(self, claims, self._handle.barrier) as (conflict, token):
            handle = self._handle.prepare_ranks(
                plan._handle, plan.problem._handle, ranks, owns, storage == "framework", _utf8(refusal or conflict)
            )
            parts = {r: rank_parts for r, (_, _, rank_parts) in zip(ranks, checked)}
            return Prepared(handle, plan, dict(zip(ranks, owns)), token, parts)

    def __repr__(self) -> str:
        return f"<refit.Executor {self.name} rank {self.rank} of {self.exchange.size}>"


def _rank_sets(buffers: Mapping[int, Mapping[str, Any]], plan: Plan) -> tuple[str, list[int], list[Any]]:
    """What is wrong with :meth:`Executor.prepare_ranks`' plan ranks ("" when nothing), and the
    ranks with their buffers; a rank that is not one is left out, and refused through the
    collective prepare."""
    try:
        items = list(buffers.items())
    except Exception as e:  # noqa: BLE001 - refused by every rank at once, whatever it raised
        return f"buffers: not a mapping of plan ranks to buffers ({raised(e)})", [], []
    refusal, ranks, sets = "", [], []
    for given, rank_buffers in items:
        rank, wrong = _plan_rank(given, plan, fallback=-1)
        if wrong:
            refusal = refusal or wrong
            continue
        ranks.append(rank)
        sets.append(rank_buffers)
    return refusal, ranks, sets


def _checked_buffers(buffers: Mapping[str, Any], storage: Storage) -> tuple[str, dict[str, Any], Parts]:
    """What is wrong with a rank's buffers ("" when nothing), the buffers as the compiled part
    takes them, and where those taken out of a Transformer Engine fp8 parameter come from. A
    mistake found here is refused through the collective prepare, as one the compiled part finds:
    raising on this rank alone would leave every other rank waiting."""
    refusal, parts = "", {}
    if storage not in ("logical", "framework"):
        refusal = f"storage: {storage!r} is neither 'logical' nor 'framework'"
    try:
        own = dict(buffers)
    except (TypeError, ValueError) as e:
        refusal, own = refusal or f"buffers: not a mapping of names to arrays ({e})", {}
    if storage == "framework":
        try:
            parts = _fp8_parts(own)
            own = fp8_parameter_buffers(own)
        except Exception as e:  # noqa: BLE001 - an attribute that raised: refused by every rank at once
            refusal = refusal or f"buffers: reading their Transformer Engine attributes raised {raised(e)}"
    for name, buffer in own.items():
        try:
            lazy = _lazy_view(buffer)
        except Exception as e:  # noqa: BLE001 - as above
            refusal = refusal or f"buffer '{name}': reading it raised {raised(e)}"
            continue
        if lazy and not refusal:
            refusal = (
                f"buffer '{name}': a torch tensor with a pending {lazy} its bytes do not show "
                f"(pass t.resolve_neg() / t.resolve_conj())"
            )
    return refusal, own, parts


#: The attribute of a Transformer Engine fp8 parameter holding its rowwise scales, and the suffix
#: of the parameter name refit's storage maps give them (``<name>._rowwise_scale_inv``).
TE_ROWWISE_SCALES = "_rowwise_scale_inv"


def fp8_parameter_buffers(buffers: Mapping[str, Any]) -> dict[str, Any]:
    """The buffers of a rank's framework parameters with each Transformer Engine fp8 parameter
    (``Float8BlockwiseQTensor``, FP8 training with fp8 parameters, which ``named_parameters()``
    presents as bf16) replaced by the two buffers refit reads: its fp8 values (``_rowwise_data``,
    uint8 of the parameter's shape) under its name, and its rowwise scales
    (``_rowwise_scale_inv``, fp32, padded as Transformer Engine pads them) under
    ``<name>._rowwise_scale_inv``, unless the caller gave that one itself. Anything without both
    attributes passes as it is. A prepared plan reads both attributes again at every
    ``execute``: one given new memory since ``prepare`` is refused, naming it.

    Example::

        prepared = executor.prepare(plan, dict(model.named_parameters()), storage="framework")

    Raises:
        TypeError: ``buffers`` that are no mapping of names to buffers (a list, None).
    """
    expect(buffers, Mapping, "buffers (parameter names to buffers)")
    out = dict(buffers)
    out.update({name: getattr(holder, attribute) for name, (holder, attribute) in _fp8_parts(buffers).items()})
    return out


def _fp8_parts(buffers: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """Where each buffer :func:`fp8_parameter_buffers` takes out of a Transformer Engine fp8
    parameter comes from: its name -> (the parameter, the attribute holding it)."""
    parts: dict[str, tuple[Any, str]] = {}
    for name, value in buffers.items():
        if getattr(value, "_rowwise_data", None) is not None and getattr(value, TE_ROWWISE_SCALES, None) is not None:
            parts[name] = (value, "_rowwise_data")
            if f"{name}.{TE_ROWWISE_SCALES}" not in buffers:
                parts[f"{name}.{TE_ROWWISE_SCALES}"] = (value, TE_ROWWISE_SCALES)
    return parts


def run(executor: Executor, plan: Plan, buffers: Mapping[str, Any], *, storage: Storage = "logical") -> ExecutionReport:
    """Prepares the plan and executes it once (a job that refits every step prepares once and
    executes again instead); ``storage`` as for :meth:`Executor.prepare`."""
    return executor.prepare(plan, buffers, storage=storage).execute()
