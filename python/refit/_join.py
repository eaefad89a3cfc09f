"""Elastic refit's join, performed (docs/elastic.md, "Joins"): an engine that joins or restarts is
filled from live engines holding the current weights (its *peers*), from the training ranks, or
both. The join is a world of its own with its own rank numbers; :func:`plan_join` binds the
library's use case (the one ``refit run --join`` calls) and says each process's part in it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping, Optional, Sequence

from refit import _refit
from refit._checks import INT32_MAX, checked_int, checked_text, optional_ints
from refit._cluster import Cluster
from refit._errors import BadInput
from refit._plan import DEFAULT_CHUNK_BYTES, Plan, checked_chunk_bytes, expect
from refit._problem import Problem
from refit.exchange import Exchange, RenumberedExchange, renumbered, torch_distributed

__all__ = ["Join", "JoinPart", "plan_join"]

#: What a process of the full job does in a join: ``free`` (not in the join's world), ``training``
#: (sends the tensors the training ranks send), ``peer`` (sends from its engine's own weights),
#: ``joining`` (a rank of the engine being filled).
Role = Literal["free", "training", "peer", "joining"]


@dataclass(frozen=True)
class JoinPart:
    """One process's part in a join."""

    role: Role
    rank: Optional[int]  #: its rank in the join's world; None when free


class _JoinCluster(Cluster):
    """A cluster with a join's ranks placed on the GPUs of the full job's processes that play them,
    for the join plan's statistics."""

    def __init__(self, cluster: Cluster, placed: _refit.PlacedCluster) -> None:
        super().__init__(**cluster._source)
        self._join_placed = placed

    def placed(self, problem: Problem) -> _refit.PlacedCluster:
        """The join's placement (whatever problem: the join's plan has only its own)."""
        return self._join_placed


@dataclass(frozen=True)
class Join:
    """A join planned: the join's problem and plan in its own rank space, and who plays each rank.

    Join rank order: the training ranks (when they send), then the peers' ranks in ascending
    global order, then the joining engine's ranks; :attr:`world` maps them back to global ranks.
    Every process of the full job plans the same join; those in its world make an exchange of
    their own (:meth:`exchange`) and an :class:`refit.Executor` over it, and prepare :attr:`plan`
    with :meth:`buffers`; the others do nothing.
    """

    problem: Problem  #: the join's problem (join ranks; logical storage only)
    plan: Plan  #: the join's plan
    engine: int  #: the engine that joins or restarts
    peers: list[int]  #: the live engines that send (none when only the training ranks send)
    source: str  #: ``training``, ``peers`` or ``both``
    world: list[int]  #: the global rank of each join rank
    peer_tensors: int  #: tensors the peers send, of ``len(problem.tensors)``
    parts: list[JoinPart]  #: by global rank

    def part(self, global_rank: int) -> JoinPart:
        """The part of a process of the full job, by its global rank."""
        if not 0 <= global_rank < len(self.parts):
            raise ValueError(f"rank {global_rank} is not in the full problem's 0..{len(self.parts) - 1}")
        return self.parts[global_rank]

    def buffers(self, global_rank: int, full: Mapping[str, Any]) -> dict[str, Any]:
        """The buffers a process prepares the join's plan with, picked from ``full``, the buffers
        (tensor name -> array, ``storage="logical"``) it prepared the full refit with: a peer's
        destination arrays of the tensors the peers send (as its sources), a training rank's source
        arrays of the tensors it sends, the joining engine's destination arrays; the same arrays,
        nothing copied. Empty for a free process.

        Raises:
            refit.BadInput: ``full`` lacks a tensor the process holds in the join (named).
        """
        rank = self.part(global_rank).rank
        if rank is None:
            return {}
        out = {}
        for shard in self.problem.shards(rank):
            if shard.tensor not in full:
                raise BadInput(f"rank {global_rank}: the join needs its buffer of tensor '{shard.tensor}'", "mismatch")
            out[shard.tensor] = full[shard.tensor]
        return out

    def exchange(self, global_rank: int, inner: Optional[Exchange] = None) -> RenumberedExchange:
        """This process's exchange in the join's world, numbered by join rank; only the join's
        processes call it (collective among them). ``inner``: an exchange over exactly the join's
        processes, in any order; default a new ``torch.distributed`` group of them, made by them
        alone (``new_group(world, use_local_synchronization=True)``), so a free process calls
        nothing.

        Raises:
            ValueError: a free process.
        """
        rank = self.part(global_rank).rank
        if rank is None:
            raise ValueError(f"rank {global_rank} is free: it is not in the join's world {self.world}")
        if inner is None:
            import torch.distributed as dist

            inner = torch_distributed(dist.new_group(self.world, use_local_synchronization=True))
        return renumbered(inner, rank=rank)


def plan_join(
    problem: Problem,
    cluster: Cluster,
    engine: int,
    *,
    peers: Optional[Sequence[int]] = None,
    source: str = "both",
    strategy: str = "refit",
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Join:
    """Plans filling ``engine`` (an index of the problem's ``infer`` engines, ``engines=N``) that
    joins or restarts, as ``refit run --join`` does: from ``peers`` (live engines holding the
    current weights; default (None) every other engine), the training ranks, or both (``source``:
    ``peers``, ``training``, ``both``: each tensor from the side that finishes it sooner).

    Example (each process of the full job, after a full refit)::

        join = refit.plan_join(problem, cluster, 1, source="peers")
        part = join.part(rank)
        if part.rank is not None:
            executor = refit.Executor("ucx", join.exchange(rank))
            executor.prepare(join.plan, join.buffers(rank, buffers)).execute()

    Raises:
        refit.BadInput: an engine out of range, the joining engine among the peers, peers not
            ascending or an empty list of them, peers with ``source="training"``, a problem
            without engines (a manifest); the message names the option as ``refit run`` spells it
            (``--join``, ``--peers``).
    """
    expect(problem, Problem, "problem")
    expect(cluster, Cluster, "cluster (refit.Cluster.preset(...))")
    engine = checked_int(engine, "engine", 0, INT32_MAX)
    peer_engines = optional_ints(peers, "peers", 0, INT32_MAX)
    source, strategy = checked_text(source, "source"), checked_text(strategy, "strategy")
    raw = _refit.plan_join(problem._handle, cluster.placed(problem), engine, peer_engines, source, strategy,
                           checked_chunk_bytes(chunk_bytes))  # fmt: skip
    joined = Problem(raw["problem"], {"manifest": f"(join of engine {engine})"})
    plan = Plan(raw["plan"], joined, _JoinCluster(cluster, raw["cluster"]), raw["plan_seconds"])
    return Join(problem=joined, plan=plan, engine=int(engine), peers=list(raw["peers"]), source=raw["source"],
                world=list(raw["world"]), peer_tensors=raw["peer_tensors"],
                parts=[JoinPart(role, None if r < 0 else r) for role, r in raw["parts"]])  # fmt: skip
