"""Executors: moving a plan's bytes between the processes of a job, from Python."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from refit import _refit
from refit._plan import Plan
from refit._problem import Shard
from refit.exchange import Exchange

__all__ = ["ExecutionReport", "Executor", "Prepared", "executors", "numpy_dtype", "run", "torch_dtype"]

#: Staging per rank for packing strided pieces (every rank of a refit must use the same).
DEFAULT_STAGING = 256 << 20

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

    return np.dtype(_NUMPY_DTYPES[dtype])


def torch_dtype(dtype: str) -> Any:
    """The torch dtype of a refit dtype ('bf16' -> torch.bfloat16, 'fp8_e4m3' -> float8_e4m3fn)."""
    import torch

    return {
        "bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
        "fp64": torch.float64, "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2,
        "int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64,
        "fp8_e8m0": torch.float8_e8m0fnu,
    }[dtype]  # fmt: skip


def executors() -> list[str]:
    """The executors this build has: ``ucx``, and ``nccl`` when it was built with CUDA."""
    return list(_refit.executor_names())


@dataclass(frozen=True)
class ExecutionReport:
    """What one execution moved on this rank (``refit run``'s per-rank figures)."""

    rank: int
    bytes_sent: int
    bytes_received: int
    elapsed_s: float
    messages: int
    bytes_stored_directly: int


class Prepared:
    """A plan prepared on an executor with this rank's buffers; execute it every step."""

    def __init__(self, handle: _refit.Prepared, plan: Plan, buffers: dict[str, Any]) -> None:
        """Made by :meth:`Executor.prepare`."""
        self._handle = handle
        self.plan = plan
        self.buffers = buffers  # the arrays the executor reads or writes; kept alive with it

    @property
    def rank(self) -> int:
        """This process's rank in the plan."""
        return self._handle.rank

    def execute(self) -> ExecutionReport:
        """Moves the bytes; the GIL is released meanwhile. Every rank calls it, as often as it
        refits (sources are read and destinations written in place each time).

        Raises:
            refit.Failure: a transport failed, or a peer died or hung (``refit.PeerFailed``,
                ``refit.Timeout``); the message names the rank and what was awaited from it.
        """
        return ExecutionReport(**self._handle.execute())


class Executor:
    """An executor for this process: ``ucx`` (host memory), or ``nccl`` (CUDA memory) when built.

    The processes of a refit are the plan's ranks: training ranks first, then inference ranks.
    Each one makes an executor over an exchange (:mod:`refit.exchange`) and prepares the same
    plan with its own buffers::

        executor = refit.Executor("ucx", refit.exchange.torch_distributed())
        prepared = executor.prepare(plan, {name: tensor, ...})   # collective
        prepared.execute()                                      # every step

    Args:
        name: the backend (:func:`refit.executors`).
        exchange: an allgather of bytes with this process's ``rank`` and ``size``.
        timeout: seconds any wait on a peer may last; then every rank fails, naming the peer.
        staging: bytes per rank for packing strided pieces; the same on every rank.
        direct_stores: store into peers' memory mapped into this process (same-host shared
            memory) instead of going through the transport.
        on_chunk_sent: called with (transfer, chunk) after each chunk this rank sent (progress).
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
    ) -> None:
        if exchange is None:
            raise TypeError("Executor(name, exchange): an exchange is needed (see refit.exchange)")
        if not timeout > 0:
            raise ValueError(f"--timeout: {timeout} is not positive")
        if staging <= 0:
            raise ValueError(f"--staging: {staging} is not positive")
        self.exchange = exchange
        self._handle = _refit.Executor(
            name, exchange.allgather, exchange.rank, exchange.size, float(timeout), int(staging),
            direct_stores, on_chunk_sent,
        )  # fmt: skip

    @property
    def name(self) -> str:
        """The backend."""
        return self._handle.name

    @property
    def rank(self) -> int:
        """This process's rank (the exchange's)."""
        return self.exchange.rank

    @property
    def cuda_memory(self) -> bool:
        """Whether buffers may be CUDA memory (torch CUDA tensors): the NCCL executor."""
        return self._handle.cuda_memory

    def empty(self, shard: Shard) -> Any:
        """An uninitialised numpy array for a shard, in memory this executor moves fastest (UCX:
        memory its peers write into directly). bf16 and fp8 come as uint16 and uint8 bits;
        ``torch.from_numpy(a).view(torch.bfloat16)`` makes a tensor of it."""
        dtype = numpy_dtype(shard.dtype)
        raw = self._handle.allocate(shard.nbytes)
        return raw.view(dtype).reshape(shard.extent)

    def prepare(self, plan: Plan, buffers: Mapping[str, Any], rank: Optional[int] = None) -> Prepared:
        """Prepares the plan for this process's rank with its buffers; collective (every rank
        calls it with the same plan). Nothing moves yet.

        Args:
            buffers: tensor name -> array (numpy, torch CPU tensors; torch CUDA tensors for
                ``nccl``): one per non-empty box of ``plan.problem.shards(rank)``, of that box's
                shape and the tensor's dtype, row-major and contiguous; writable on an inference
                rank. Framework parameter names are not known to refit yet: key by tensor name.
            rank: this process's rank in the plan (default: the exchange's).

        Raises:
            refit.BadInput: a buffer that is missing or of the wrong shape, dtype, size or memory
                (the message names it), on any rank: every rank refuses before any byte moves.
        """
        own = dict(buffers)
        handle = self._handle.prepare(
            plan._handle, plan.problem._handle, self.rank if rank is None else rank, own
        )
        return Prepared(handle, plan, own)

    def __repr__(self) -> str:
        return f"<refit.Executor {self.name} rank {self.rank} of {self.exchange.size}>"


def run(executor: Executor, plan: Plan, buffers: Mapping[str, Any]) -> ExecutionReport:
    """Prepares the plan and executes it once (a job that refits every step prepares once and
    executes again instead)."""
    return executor.prepare(plan, buffers).execute()
