"""How the processes of a refit find each other: an allgather of bytes.

An executor needs nothing from the launcher but this process's rank, the number of processes,
and an *exchange*: ``allgather(data: bytes) -> list[bytes]`` that returns every process's data,
by rank. Processes started by torchrun use :func:`torch_distributed` (any backend:
``all_gather_object``), mpirun jobs :func:`mpi`, processes of separate jobs (a trainer's and an
inference engine's, each with its own ``torch.distributed`` world, as RL jobs run them)
:func:`store` over a ``torch.distributed`` store both reach, and anything else (Ray) hands in a
function with :func:`from_callable`. The executor calls it a few times while preparing a
plan (to agree on the plan, exchange memory keys and connect), not while moving bytes.

Timeouts are the exchange's own: a process that never reaches an allgather leaves the others
waiting as long as the exchange lets them, so bound it (torch: ``init_process_group(timeout=)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, runtime_checkable

__all__ = [
    "CallableExchange", "Exchange", "RenumberedExchange", "StoreExchange", "from_callable", "mpi", "renumbered",
    "store", "torch_distributed",
]  # fmt: skip


@runtime_checkable
class Exchange(Protocol):
    """What an executor needs to reach its peers."""

    rank: int
    size: int

    def allgather(self, data: bytes) -> list[bytes]:
        """Every process's ``data``, by rank; every process calls it the same number of times."""
        ...


def _contributions(out: Any, size: int) -> list[bytes]:
    """An allgather's result as one bytes object per process; refuses anything else, naming it
    (``bytes(5)`` would make five NUL bytes of an int)."""
    out = list(out)
    if len(out) != size:
        raise RuntimeError(f"the exchange returned {len(out)} contributions for {size} ranks")
    for rank, x in enumerate(out):
        if not isinstance(x, (bytes, bytearray, memoryview)):
            raise RuntimeError(f"the exchange returned a {type(x).__name__} for rank {rank} where bytes were expected")
    return [bytes(x) for x in out]


@dataclass
class CallableExchange:
    """An exchange made of a function and this process's place in the job."""

    rank: int
    size: int
    function: Callable[[bytes], list[bytes]]

    def allgather(self, data: bytes) -> list[bytes]:
        """Calls the function and checks it returned one bytes object per process."""
        return _contributions(self.function(data), self.size)


def from_callable(function: Callable[[bytes], list[bytes]], *, rank: int, size: int) -> CallableExchange:
    """An exchange from an allgather function (e.g. over Ray or a store) and this process's rank."""
    return CallableExchange(rank, size, function)


class TorchDistributedExchange:
    """An allgather over a ``torch.distributed`` process group (``all_gather_object``)."""

    def __init__(self, group: Optional[Any] = None) -> None:
        """Uses the default process group unless ``group`` is given; it must be initialised."""
        import torch.distributed as dist

        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialised: call init_process_group first")
        self._dist = dist
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)

    def allgather(self, data: bytes) -> list[bytes]:
        """Every process's data, by rank in the group."""
        out: list[Any] = [None] * self.size
        self._dist.all_gather_object(out, data, group=self.group)
        return _contributions(out, self.size)


def torch_distributed(group: Optional[Any] = None) -> TorchDistributedExchange:
    """The exchange of processes started by torchrun (or any ``torch.distributed`` job)."""
    return TorchDistributedExchange(group)


class MpiExchange:
    """An allgather over an mpi4py communicator."""

    def __init__(self, comm: Optional[Any] = None) -> None:
        """Uses ``MPI.COMM_WORLD`` unless ``comm`` is given."""
        if comm is None:
            from mpi4py import MPI

            comm = MPI.COMM_WORLD
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()

    def allgather(self, data: bytes) -> list[bytes]:
        """Every process's data, by rank in the communicator."""
        return _contributions(self.comm.allgather(data), self.size)


def mpi(comm: Optional[Any] = None) -> MpiExchange:
    """The exchange of an mpirun job, through mpi4py."""
    return MpiExchange(comm)


class StoreExchange:
    """An allgather over a ``torch.distributed`` store (``TCPStore``, ``FileStore``): each call
    sets this process's key and waits for everyone's (as long as the store's timeout lets it);
    the last process to read a call's keys deletes them."""

    def __init__(self, store: Any, rank: int, size: int, prefix: str) -> None:
        """``store``: reached by every process of the refit; ``prefix``: the keys of this
        exchange, distinct from any other user of the store."""
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} is not in 0..{size - 1}")
        self.store, self.rank, self.size, self.prefix = store, rank, size, prefix
        self._calls = 0

    def allgather(self, data: bytes) -> list[bytes]:
        """Every process's data, by rank."""
        call = f"{self.prefix}/{self._calls}"
        self._calls += 1
        keys = [f"{call}/{r}" for r in range(self.size)]
        self.store.set(keys[self.rank], data)
        self.store.wait(keys)
        out = [self.store.get(k) for k in keys]
        if self.store.add(f"{call}/read", 1) == self.size:
            for k in [*keys, f"{call}/read"]:
                self.store.delete_key(k)
        return _contributions(out, self.size)


def store(store: Any, *, rank: int, size: int, prefix: str = "refit") -> StoreExchange:
    """The exchange of processes that share a ``torch.distributed`` store but no process group:
    a trainer's ranks and an inference engine's workers, each side with its own world (as vLLM's
    ``StatelessProcessGroup`` joins them in RL jobs). ``rank`` is this process's rank in the
    plan (training ranks first), ``size`` the plan's ranks. For example, with the trainer's rank
    0 hosting the store::

        tcp = torch.distributed.TCPStore(host, port, is_master=(rank == 0))
        exchange = refit.exchange.store(tcp, rank=rank, size=problem.world_size)
    """
    return StoreExchange(store, rank, size, prefix)


class RenumberedExchange:
    """An exchange whose processes are numbered as a plan numbers them, over one that numbers
    them otherwise (``torch.distributed.new_group`` numbers its members by global rank, which a
    join's plan does not): the first call learns each process's plan rank, every later one puts
    the contributions in plan-rank order."""

    def __init__(self, inner: Exchange, rank: int) -> None:
        """``rank``: this process's rank in the plan, in ``0 .. inner.size - 1``; collective."""
        if not 0 <= rank < inner.size:
            raise ValueError(f"rank {rank} is not in 0..{inner.size - 1}")
        self.inner, self.rank, self.size = inner, rank, inner.size
        order = [int(x) for x in inner.allgather(str(rank).encode())]
        if sorted(order) != list(range(self.size)):
            raise RuntimeError(f"the processes gave plan ranks {order}: each of 0..{self.size - 1} must be given once")
        self._order = order  # the plan rank of each of the inner exchange's processes

    def allgather(self, data: bytes) -> list[bytes]:
        """Every process's data, by plan rank."""
        out = [b""] * self.size
        for inner_rank, x in enumerate(_contributions(self.inner.allgather(data), self.size)):
            out[self._order[inner_rank]] = x
        return out


def renumbered(exchange: Exchange, *, rank: int) -> RenumberedExchange:
    """``exchange`` with this process as plan rank ``rank`` (every process gives its own, each
    rank once); collective. For example, a join's processes over a ``torch.distributed`` group of
    theirs (:meth:`refit.Join.exchange` does this)::

        group = torch.distributed.new_group(join.world, use_local_synchronization=True)
        exchange = refit.exchange.renumbered(refit.exchange.torch_distributed(group), rank=join_rank)
    """
    return RenumberedExchange(exchange, rank)
