"""Predictions: how long a plan takes on a cluster, and every strategy side by side."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional, Sequence, Union

from refit._cluster import Cluster
from refit._plan import DEFAULT_CHUNK_BYTES, Plan, lower_bound, plan
from refit._plan import strategies as _all_strategies
from refit._problem import Problem

__all__ = ["Breakdown", "CriticalStep", "Resource", "Simulation", "compare", "simulate"]

#: The strategy every other is compared with (``speedup_vs_gather_broadcast``).
BASELINE = "gather-broadcast"


@dataclass(frozen=True)
class Breakdown:
    """The predicted time along the critical path, by what it was spent on (seconds)."""

    latency: float
    network: float
    nvlink: float
    copy: float
    pack_unpack: float


@dataclass(frozen=True)
class Resource:
    """A resource that carried bytes (e.g. ``nic 3 tx``, ``gpu 5 nvlink in``) and how busy it was."""

    name: str
    bytes: int
    utilisation: float


@dataclass(frozen=True)
class CriticalStep:
    """One task on the critical path: a transfer and what it waited on (network, nvlink, copy)."""

    transfer: int
    what: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Simulation:
    """A prediction: the fields of one ``strategies[]`` row of ``refit simulate --json`` with the
    command's top-level ``cluster`` and ``lower_bound_binding``, plus the busiest resources, the
    critical path and (when asked for) the Chrome trace."""

    strategy: str
    predicted_s: float
    lower_bound_s: float
    ratio_to_lower_bound: float
    network_bytes: int
    nvlink_bytes: int
    max_nic_tx_bytes: int
    max_nic_rx_bytes: int
    transfers: int
    window: int
    breakdown_s: Breakdown
    plan_seconds: float
    simulate_seconds: float
    tasks: int
    events: int
    speedup_vs_gather_broadcast: Optional[float]
    cluster: str
    lower_bound_binding: str
    resources: list[Resource] = field(default_factory=list, repr=False)
    critical_path: list[CriticalStep] = field(default_factory=list, repr=False)
    trace: Optional[str] = field(default=None, repr=False)

    def row(self) -> dict[str, object]:
        """The prediction as one flat row (breakdown as ``breakdown_<part>_s``), for tables."""
        out: dict[str, object] = {}
        for name in Simulation.__dataclass_fields__:
            if name in ("resources", "critical_path", "trace"):
                continue
            value = getattr(self, name)
            if isinstance(value, Breakdown):
                out.update({f"breakdown_{k}_s": v for k, v in value.__dict__.items()})
            else:
                out[name] = value
        return out


def _simulate_plan(p: Plan, window: Optional[int], trace: Union[bool, str, Path]) -> Simulation:
    if window is not None and window < 0:
        raise ValueError(f"--window: {window} is negative")
    placed = p.cluster.placed(p.problem)
    raw = p._handle.simulate(p.problem._handle, placed, window, bool(trace))
    stats = p.stats
    bound = stats.lower_bound_s
    text = raw.get("trace")
    if isinstance(trace, (str, Path)):
        Path(trace).write_text(text or "")
    return Simulation(
        strategy=p.strategy,
        predicted_s=raw["predicted_s"],
        lower_bound_s=bound,
        ratio_to_lower_bound=raw["predicted_s"] / bound if bound > 0 else float("inf"),
        network_bytes=stats.network_bytes,
        nvlink_bytes=stats.nvlink_bytes,
        max_nic_tx_bytes=stats.max_nic_tx_bytes,
        max_nic_rx_bytes=stats.max_nic_rx_bytes,
        transfers=stats.transfers,
        window=raw["window"],
        breakdown_s=Breakdown(**raw["breakdown_s"]),
        plan_seconds=p.plan_seconds,
        simulate_seconds=raw["simulate_seconds"],
        tasks=raw["tasks"],
        events=raw["events"],
        speedup_vs_gather_broadcast=1.0 if p.strategy == BASELINE else None,
        cluster=placed.name,
        lower_bound_binding=stats.lower_bound_binding,
        resources=[Resource(*r) for r in raw["resources"]],
        critical_path=[CriticalStep(*c) for c in raw["critical_path"]],
        trace=text if trace is True else None,
    )


def simulate(
    problem: Union[Problem, Plan],
    cluster: Optional[Cluster] = None,
    strategy: str = "refit",
    *,
    window: Optional[int] = None,
    trace: Union[bool, str, Path] = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Simulation:
    """Predicts the refit time of one strategy (``refit simulate``), or of a plan made before.

    Args:
        problem: the problem (planned here with ``strategy`` on ``cluster``), or a :class:`Plan`.
        window: chunks a receiver grants each sender ahead; a (sender, receiver) pair sends its
            transfers in plan order (0: every transfer at once). Default: the pair window of the
            plan's execution model (16 for refit and direct, 0 for the NCCL baselines).
        trace: True keeps the Chrome trace event JSON in ``.trace`` (for
            :func:`refit.figures.timeline`); a path writes it there (open it in Perfetto).

    Example::

        refit.simulate(problem, cluster, strategy="refit").predicted_s
    """
    if isinstance(problem, Plan):
        return _simulate_plan(problem, window, trace)
    if cluster is None:
        raise TypeError("simulate(problem, cluster): a cluster is needed to plan on")
    return _simulate_plan(plan(problem, cluster, strategy, chunk_bytes=chunk_bytes), window, trace)


def compare(
    problem: Problem,
    cluster: Cluster,
    *,
    strategies: Optional[Sequence[str]] = None,
    window: Optional[int] = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> list[Simulation]:
    """Plans and predicts every strategy (``refit simulate --compare``): one row per strategy,
    each with its speed-up over gather-broadcast.

    Args:
        strategies: the strategies to compare (default: all of them, :func:`refit.strategies`).
    """
    names = list(strategies) if strategies is not None else [s.name for s in _all_strategies()]
    lower_bound(problem, cluster)  # refuses a cluster that cannot hold the job before planning
    rows = [simulate(problem, cluster, name, window=window, chunk_bytes=chunk_bytes) for name in names]
    base = next((r for r in rows if r.strategy == BASELINE), None)
    if base is None:
        return rows
    return [
        replace(r, speedup_vs_gather_broadcast=base.predicted_s / r.predicted_s if r.predicted_s > 0 else float("inf"))
        for r in rows
    ]
