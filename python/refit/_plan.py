"""Plans: which bytes move from which rank to which, what that costs, and the lower bound."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from refit import _refit
from refit._checks import INT64_MAX, checked_flag, checked_int, checked_rank, checked_text
from refit._cluster import Cluster
from refit._errors import BadInput
from refit._paths import FilePath, path_text
from refit._problem import Problem

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "Explain",
    "LowerBound",
    "Plan",
    "PlanStats",
    "SideSummary",
    "Staging",
    "Strategy",
    "checked_chunk_bytes",
    "expect",
    "lower_bound",
    "plan",
    "strategies",
]

#: The largest chunk a message is cut into (``refit plan --chunk``); refit's plan cuts what
#: relays forward finer.
DEFAULT_CHUNK_BYTES: int = _refit.DEFAULT_CHUNK_BYTES


@dataclass(frozen=True)
class Strategy:
    """A planning strategy, the execution model its plans are run with, and its pair window."""

    name: str
    description: str
    execution_model: str
    pair_window: int


def strategies() -> list[Strategy]:
    """Every strategy, the default (``refit``) first."""
    return [Strategy(*row) for row in _refit.strategies()]


@dataclass(frozen=True)
class LowerBound:
    """The time no plan can beat on the cluster, which term binds, and each term in seconds."""

    lower_bound_s: float
    lower_bound_binding: str
    destination_domain_s: float
    source_side_s: float
    source_domain_s: float
    source_nic_s: float
    gpu_ingress_s: float
    gpu_egress_s: float
    gpu_fill_s: float


def lower_bound(problem: Problem, cluster: Cluster) -> LowerBound:
    """The lower bound of the problem on the cluster (sized to its job); a :class:`Plan`'s is
    :attr:`Plan.lower_bound`."""
    expect(problem, Problem, "problem (plan.lower_bound for a Plan)")
    expect(cluster, Cluster, "cluster (refit.Cluster.preset(...))")
    return LowerBound(**_refit.lower_bound(problem._handle, cluster.placed(problem)))


@dataclass(frozen=True)
class SideSummary:
    """What became of the chunks one rank sends (or receives), as ``refit plan --explain``."""

    transfers: int
    chunks: int
    bytes: int
    in_place_chunks: int
    runs: int
    staged_chunks: int
    staged_bytes: int
    chunks_by_reason: dict[str, int]


@dataclass(frozen=True)
class Staging:
    """Chunks a rank packs (or unpacks) through staging, and the largest."""

    chunks: int
    largest_bytes: int


@dataclass(frozen=True)
class Explain:
    """What the lowering chose for one rank (the ``explain`` object of ``refit plan --json``),
    with ``text`` as ``refit plan --explain`` prints it."""

    rank: int
    sends: SideSummary
    receives: SideSummary
    waiting_chunks: int
    extract_transfers: int
    quantize_steps: int
    quantized_elements: int
    scratch_bytes: int
    send_staging: Staging
    receive_staging: Staging
    text: str = field(repr=False)

    @classmethod
    def _from(cls, d: dict[str, Any], text: str) -> Explain:
        return cls(
            rank=d["rank"],
            sends=SideSummary(**d["sends"]),
            receives=SideSummary(**d["receives"]),
            waiting_chunks=d["waiting_chunks"],
            extract_transfers=d["extract_transfers"],
            quantize_steps=d["quantize_steps"],
            quantized_elements=d["quantized_elements"],
            scratch_bytes=d["scratch_bytes"],
            send_staging=Staging(**d["send_staging"]),
            receive_staging=Staging(**d["receive_staging"]),
            text=text,
        )


@dataclass(frozen=True)
class PlanStats:
    """Every field of ``refit plan --json``: what the plan moves where, next to the lower bound."""

    strategy: str
    execution_model: str
    tensors: int
    transfers: int
    messages: int
    segments: int
    total_bytes: int
    network_bytes: int
    network_bytes_unquantized: int
    nvlink_bytes: int
    local_bytes: int
    max_nic_tx_bytes: int
    max_nic_rx_bytes: int
    mean_nic_tx_bytes: float
    mean_nic_rx_bytes: float
    max_domain_ingress_bytes: int
    #: bytes each NIC sends and receives, by NIC id
    nic_tx_bytes: list[int]
    nic_rx_bytes: list[int]
    #: bytes each GPU sends and receives over NVLink, by GPU id
    nvlink_egress_bytes: list[int]
    nvlink_ingress_bytes: list[int]
    #: bytes entering each NVLink domain over the network, by domain id
    domain_ingress_bytes: list[int]
    lower_bound_s: float
    lower_bound_binding: str
    plan_seconds: float
    plan_hash: str
    explain: Optional[Explain] = None


class Plan:
    """A plan for a problem on a cluster; every executor runs it and the simulator predicts it.

    Make one with :func:`refit.plan` or :meth:`load`. Plans are deterministic: every process that
    plans the same problem on the same cluster gets the same :attr:`hash`.
    """

    def __init__(
        self,
        handle: _refit.Plan,
        problem: Problem,
        cluster: Cluster,
        plan_seconds: float,
        chunk_bytes: Optional[int] = None,
    ) -> None:
        """Use :func:`refit.plan` or :meth:`Plan.load`."""
        self._handle = handle
        self.problem = problem
        self.cluster = cluster
        self.plan_seconds = plan_seconds
        #: the ``chunk_bytes`` :func:`refit.plan` planned with; None for a loaded plan, which
        #: nothing re-plans (a delta refit's re-balance skips it)
        self.chunk_bytes = chunk_bytes
        self._stats: Optional[PlanStats] = None

    @classmethod
    def load(cls, path: FilePath, problem: Problem, cluster: Cluster) -> Plan:
        """Reads a plan file (``refit plan --out``, :meth:`save`) and checks that it solves the
        problem on this cluster (``refit simulate --plan``: every transfer's link is the one
        between its ranks); raises :class:`refit.BadInput` if it does not."""
        expect(problem, Problem, "problem")
        expect(cluster, Cluster, "cluster (refit.Cluster.preset(...))")
        handle, seconds = _refit.Plan.load(path_text(path, "plan"), problem._handle, cluster.placed(problem))
        return cls(handle, problem, cluster, seconds)

    @property
    def strategy(self) -> str:
        """The strategy that made the plan."""
        return self._handle.strategy

    @property
    def execution_model(self) -> str:
        """What runs the plan: ``refit-ucx``, ``refit-nccl`` or ``nccl-collectives``."""
        return self._handle.execution_model

    @property
    def hash(self) -> str:
        """The plan's digest, 16 hex digits (``plan_hash``)."""
        return self._handle.hash

    @property
    def stats(self) -> PlanStats:
        """What the plan moves where and the lower bound: ``refit plan --json``."""
        if self._stats is None:
            self._stats = self._summary(None)
        return self._stats

    @property
    def lower_bound(self) -> LowerBound:
        """The lower bound of the plan's problem on its cluster."""
        return lower_bound(self.problem, self.cluster)

    def explain(self, rank: int) -> PlanStats:
        """``refit plan --explain RANK --json``: the statistics with ``explain`` filled in for the
        rank (``.explain.text`` is what the command prints)."""
        return self._summary(checked_rank(rank, self.problem.world_size, "the plan's"))

    def save(self, path: FilePath) -> None:
        """Writes the plan file (format ``refit-plan`` version 1)."""
        self._handle.save(path_text(path, "plan"))

    def to_json(self) -> str:
        """The plan in the ``refit-plan`` format (JSON text)."""
        return self._handle.to_json()

    def _summary(self, rank: Optional[int]) -> PlanStats:
        d = self._handle.summary(self.problem._handle, self.cluster.placed(self.problem), rank)
        explain = d.pop("explain", None)
        text = d.pop("explain_text", "")
        return PlanStats(
            **d,
            plan_seconds=self.plan_seconds,
            explain=Explain._from(explain, text) if explain is not None else None,
        )

    def __repr__(self) -> str:
        return f"<refit.Plan {self.strategy} ({self.execution_model}) {self.hash} for {self.problem!r}>"


def checked_chunk_bytes(chunk_bytes: Any) -> int:
    """The largest chunk a message is cut into, a positive 64-bit byte count (a float is refused)."""
    return checked_int(chunk_bytes, "chunk_bytes", 1, INT64_MAX, " bytes")


def expect(value: Any, kind: type, what: str) -> None:
    """TypeError naming the argument when ``value`` is not a ``kind``."""
    if not isinstance(value, kind):
        raise TypeError(f"{what}: expected a {kind.__name__}, got {type(value).__name__}")


def plan(
    problem: Problem,
    cluster: Cluster,
    strategy: str = "refit",
    *,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    for_delta: bool = False,
) -> Plan:
    """Plans the refit of ``problem`` on ``cluster`` (sized to its job) with a strategy.

    Args:
        strategy: ``refit`` (default), ``direct``, ``m2n-ring`` or ``gather-broadcast``
            (:func:`refit.strategies`).
        chunk_bytes: the largest chunk a message is cut into (refit's plan cuts what relays
            forward finer).
        for_delta: a plan for a delta refit (``Executor(delta=True)``). refit's plans may send
            some bytes through a neighbour's NIC, which keeps them outside its own boxes
            meanwhile; a delta refit keeps its baselines in the ranks' boxes and takes no such
            relay, so its plans are made without.

    Raises:
        refit.BadInput: an unknown strategy, a cluster too small for the job.
    """
    expect(problem, Problem, "problem")
    expect(cluster, Cluster, "cluster (refit.Cluster.preset(...))")
    strategy, chunk_bytes = checked_text(strategy, "strategy"), checked_chunk_bytes(chunk_bytes)
    for_delta = checked_flag(for_delta, "for_delta")
    handle, seconds = _refit.Plan.make(problem._handle, cluster.placed(problem), strategy, chunk_bytes, for_delta)
    return Plan(handle, problem, cluster, seconds, chunk_bytes)
