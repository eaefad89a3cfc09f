"""Predictions: how long a plan takes on a cluster, and every strategy side by side."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional, Sequence, Union

from refit import _refit
from refit._cluster import Cluster
from refit._plan import DEFAULT_CHUNK_BYTES, Plan, lower_bound, plan
from refit._plan import strategies as _all_strategies
from refit._problem import Problem

__all__ = [
    "Breakdown",
    "Contributor",
    "CriticalStep",
    "Resource",
    "Simulation",
    "compare",
    "deployments",
    "simulate",
]

#: The prediction every other is compared with (``speedup_vs_gather_broadcast``): gather-broadcast
#: as NeMo RL runs it, today's practice.
BASELINE = ("gather-broadcast", "nemo-rl")
#: refit as its own executors run it (``time_vs_refit``).
REFIT = ("refit", "refit")
#: The note of a deployed baseline's row that :func:`compare` ran quantised at the receivers: the
#: deployed systems move bf16 and quantise on the inference side.
RECEIVER_NOTE = "quantised at the receiver, bf16 on the network, as deployed today"

#: Baselines also simulated as refit's executors would run their plans in :func:`compare`.
IDEALISED = ("direct", "m2n-ring")


@dataclass(frozen=True)
class Breakdown:
    """The predicted time along the critical path, by what it was spent on (seconds); the parts
    add up to the prediction."""

    latency: float
    network: float
    nvlink: float
    copy: float
    pack_unpack: float
    quantize: float
    fixed: float


@dataclass(frozen=True)
class Contributor:
    """A share of the critical path: one kind of time in one kind of call (``--explain``)."""

    what: str
    seconds: float
    steps: int


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
    deployment: str
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
    waiting_s: float
    contributors: list[Contributor]
    plan_seconds: float
    simulate_seconds: float
    tasks: int
    events: int
    speedup_vs_gather_broadcast: Optional[float]
    time_vs_refit: Optional[float]
    cluster: str
    lower_bound_binding: str
    resources: list[Resource] = field(default_factory=list, repr=False)
    critical_path: list[CriticalStep] = field(default_factory=list, repr=False)
    notes: list[str] = field(default_factory=list)
    trace: Optional[str] = field(default=None, repr=False)

    def row(self) -> dict[str, object]:
        """The prediction as one flat row (breakdown as ``breakdown_<part>_s``), for tables."""
        out: dict[str, object] = {}
        for name in Simulation.__dataclass_fields__:
            if name in ("resources", "critical_path", "trace", "contributors", "notes"):
                continue
            value = getattr(self, name)
            if isinstance(value, Breakdown):
                out.update({f"breakdown_{k}_s": v for k, v in value.__dict__.items()})
            else:
                out[name] = value
        return out


def deployments() -> list[tuple[str, str]]:
    """(name, description) of every deployment: who runs a plan (``refit simulate --deployment``)."""
    return [(name, description) for name, description in _refit.deployments()]


def _simulate_plan(
    p: Plan, window: Optional[int], trace: Union[bool, str, Path], deployment: Optional[str]
) -> Simulation:
    if window is not None and window < 0:
        raise ValueError(f"--window: {window} is negative")
    if not isinstance(trace, (bool, str, os.PathLike)):
        raise TypeError(f"trace: True, False or a path, got {type(trace).__name__}")
    placed = p.cluster.placed(p.problem)
    raw = p._handle.simulate(p.problem._handle, placed, window, bool(trace), deployment)
    for note in raw["notes"]:
        warnings.warn(note, stacklevel=3)
    key = (p.strategy, raw["deployment"])
    stats = p.stats
    bound = stats.lower_bound_s
    text = raw.get("trace")
    if isinstance(trace, (str, Path)):
        Path(trace).write_text(text or "")
    return Simulation(
        strategy=p.strategy,
        deployment=raw["deployment"],
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
        waiting_s=raw["waiting_s"],
        contributors=[Contributor(*c) for c in raw["contributors"]],
        plan_seconds=p.plan_seconds,
        simulate_seconds=raw["simulate_seconds"],
        tasks=raw["tasks"],
        events=raw["events"],
        speedup_vs_gather_broadcast=1.0 if key == BASELINE else None,
        time_vs_refit=1.0 if key == REFIT else None,
        cluster=placed.name,
        lower_bound_binding=stats.lower_bound_binding,
        resources=[Resource(*r) for r in raw["resources"]],
        critical_path=[CriticalStep(*c) for c in raw["critical_path"]],
        notes=list(raw["notes"]),
        trace=text if trace is True else None,
    )


def simulate(
    problem: Union[Problem, Plan],
    cluster: Optional[Cluster] = None,
    strategy: str = "refit",
    *,
    deployment: Optional[str] = None,
    window: Optional[int] = None,
    trace: Union[bool, str, Path] = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Simulation:
    """Predicts the refit time of one strategy (``refit simulate``), or of a plan made before, as a
    deployment runs it. What a deployment had to assume is in ``.notes`` (and a warning).

    Args:
        problem: the problem (planned here with ``strategy`` on ``cluster``), or a :class:`Plan`.
        deployment: who runs the plan (:func:`deployments`): ``refit`` (refit's executors),
            ``nemo-rl`` (NeMo RL's refit paths), ``m2n-bench`` (nccl_m2n's model benchmark),
            ``m2n-bench-all`` (the same with ``--no-dedup``: every layer timed).
            Default: ``refit`` for refit's plans, ``nemo-rl`` for the baselines'.
        window: chunks a receiver grants each sender ahead; a (sender, receiver) pair sends its
            transfers in plan order (0: every transfer at once). Default: the pair window of the
            plan's execution model (16 for refit and direct, 0 for the NCCL baselines).
        trace: True keeps the Chrome trace event JSON in ``.trace`` (for
            :func:`refit.figures.timeline`); a path writes it there (open it in Perfetto).

    Example::

        refit.simulate(problem, cluster, strategy="refit").predicted_s
    """
    if isinstance(problem, Plan):
        return _simulate_plan(problem, window, trace, deployment)
    if cluster is None:
        raise TypeError("simulate(problem, cluster): a cluster is needed to plan on")
    return _simulate_plan(plan(problem, cluster, strategy, chunk_bytes=chunk_bytes), window, trace, deployment)


def _relative(rows: list[Simulation]) -> list[Simulation]:
    """Each row with its speed-up over deployed gather-broadcast and its time relative to refit."""
    by_key = {(r.strategy, r.deployment): r for r in rows}
    base, ours = by_key.get(BASELINE), by_key.get(REFIT)

    def ratio(a: float, b: float) -> float:
        return a / b if b > 0 else float("inf")

    return [
        replace(
            r,
            speedup_vs_gather_broadcast=ratio(base.predicted_s, r.predicted_s) if base else None,
            time_vs_refit=ratio(r.predicted_s, ours.predicted_s) if ours else None,
        )
        for r in rows
    ]


def compare(
    problem: Problem,
    cluster: Cluster,
    *,
    strategies: Optional[Sequence[str]] = None,
    window: Optional[int] = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> list[Simulation]:
    """Plans and predicts every strategy (``refit simulate --compare``): one row per strategy as its
    default deployment runs it, and for direct and m2n-ring one more as refit's executors would run
    their plans; each with its speed-up over gather-broadcast and its time relative to refit.

    Args:
        strategies: the strategies to compare (default: all of them, :func:`refit.strategies`).
    """
    names = list(strategies) if strategies is not None else [s.name for s in _all_strategies()]
    lower_bound(problem, cluster)  # refuses a cluster that cannot hold the job before planning
    today = problem.quantized_at_receivers()
    rows: list[Simulation] = []
    for name in names:
        made = plan(problem, cluster, name, chunk_bytes=chunk_bytes)
        if today is None or name == "refit":
            rows.append(_simulate_plan(made, window, False, None))
        else:
            deployed = _simulate_plan(plan(today, cluster, name, chunk_bytes=chunk_bytes), window, False, None)
            rows.append(replace(deployed, notes=[*deployed.notes, RECEIVER_NOTE]))
        if name in IDEALISED:
            rows.append(_simulate_plan(made, window, False, "refit"))
    return _relative(rows)
