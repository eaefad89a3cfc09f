"""Predictions: how long a plan takes on a cluster, and every strategy side by side."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional, Sequence, Union

from refit import _refit
from refit._checks import INT32_MAX, INT64_MAX, checked_list, checked_names, checked_seconds, checked_text
from refit._checks import optional_int, optional_ints, optional_name
from refit._cluster import Cluster
from refit._errors import BadInput
from refit._paths import FilePath, output_file
from refit._plan import DEFAULT_CHUNK_BYTES, Plan, checked_chunk_bytes, expect
from refit._plan import strategies as _all_strategies
from refit._problem import Problem

__all__ = [
    "Breakdown",
    "Contributor",
    "CriticalStep",
    "ElasticSimulation",
    "Resource",
    "Simulation",
    "compare",
    "deployments",
    "simulate",
    "simulate_elastic",
]


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
    """A resource that carried bytes (e.g. ``nic 3 tx``, ``gpu 5 nvlink in``) and how busy it was;
    a simulation lists them busiest first."""

    name: str
    bytes: int
    utilisation: float


@dataclass(frozen=True)
class CriticalStep:
    """One task on the critical path: a transfer and the kind of time its flow spent (a breakdown key)."""

    transfer: int
    what: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Simulation:
    """A prediction: the fields of one ``strategies[]`` row of ``refit simulate --json`` (the
    library's one writer of them, ``resources`` busiest first among them) with the command's
    top-level ``cluster`` and ``lower_bound_binding``, plus the critical path and (when asked for)
    the Chrome trace."""

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
    #: For a deployment that moves a part of the model (m2n-bench's representatives): the bytes it
    #: moves, their lower bound and the prediction over it; None when it moves every tensor.
    moved_bytes: Optional[int] = None
    moved_lower_bound_s: Optional[float] = None
    ratio_to_moved_lower_bound: Optional[float] = None
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


def row_records(rows: Any) -> list[Mapping[str, Any]]:
    """Rows of predictions or of a sweep (a DataFrame, or a list of rows or of
    :class:`Simulation`) as mappings, or TypeError naming the first row that is neither
    (``rows[2]``), and BadInput for rows that are no list (None, one string)."""
    if hasattr(rows, "to_dict"):  # a pandas DataFrame
        return rows.to_dict("records")
    records = [r.row() if isinstance(r, Simulation) else r for r in checked_list(rows, "rows", "rows")]
    for i, record in enumerate(records):
        expect(record, Mapping, f"rows[{i}] (a sweep's row or a refit.Simulation)")
    return records


def deployments() -> list[tuple[str, str]]:
    """(name, description) of every deployment: who runs a plan (``refit simulate --deployment``)."""
    return [(name, description) for name, description in _refit.deployments()]


def _simulation(
    raw: dict, trace: Union[bool, FilePath], trace_file: Optional[_refit.OutputFile] = None
) -> Simulation:
    """A prediction the compiled part made (a row of ``refit simulate --json`` and its extras);
    its trace written to ``trace_file`` when one was opened for it."""
    for note in raw["notes"]:
        warnings.warn(note, stacklevel=4)
    text = raw.pop("trace", None)
    if trace_file is not None:
        trace_file.write((text or "").encode())
    return Simulation(
        **{**raw, "breakdown_s": Breakdown(**raw["breakdown_s"]),
           "contributors": [Contributor(**c) for c in raw["contributors"]],
           "resources": [Resource(**r) for r in raw["resources"]],
           "critical_path": [CriticalStep(*c) for c in raw["critical_path"]],
           "speedup_vs_gather_broadcast": raw.get("speedup_vs_gather_broadcast"),
           "time_vs_refit": raw.get("time_vs_refit")},
        trace=text if trace is True else None,
    )  # fmt: skip


def _checked_window(window: Any) -> Optional[int]:
    """The pair window (chunks granted ahead), None for the plan's own."""
    return optional_int(window, "window", 0, INT32_MAX)


def _checked_staging(staging_bytes: Any) -> Optional[int]:
    """The executors' staging per rank, None for theirs."""
    return optional_int(staging_bytes, "staging_bytes", _refit.MIN_STAGING_BYTES, INT64_MAX, " bytes")


def _trace_file(trace: Union[bool, FilePath]) -> Optional[_refit.OutputFile]:
    """The file a trace path names, opened before the prediction it will hold (None for a flag),
    as ``refit simulate --trace`` opens it: a path that cannot be written is refused before the
    work, not after it."""
    if isinstance(trace, bool):
        return None
    if not isinstance(trace, (str, bytes, os.PathLike)):
        raise TypeError(f"trace: True, False or a path, got {type(trace).__name__}")
    return output_file(trace, "trace")


def _checked_strategies(strategies: Any) -> Optional[list[str]]:
    """Strategy names to keep (None: all), each one refit has."""
    if strategies is None:
        return None
    return checked_names(strategies, "strategies", "strategy", [s.name for s in _all_strategies()])


def _refuse_planning(plan: Plan, strategy: str, chunk_bytes: int) -> None:
    """A plan is simulated as it was planned: arguments that would plan it otherwise are refused
    rather than ignored."""
    if strategy != plan.strategy and strategy != "refit":
        raise BadInput(f"strategy: a Plan is simulated as it was planned, with {plan.strategy!r}; "
                       f"{strategy!r} plans a Problem", "invalid argument")  # fmt: skip
    if chunk_bytes != DEFAULT_CHUNK_BYTES:
        raise BadInput("chunk_bytes: a Plan is simulated with the chunks it was planned with; "
                       "chunk_bytes plans a Problem", "invalid argument")  # fmt: skip


def simulate(
    problem: Union[Problem, Plan],
    cluster: Optional[Cluster] = None,
    strategy: str = "refit",
    *,
    deployment: Optional[str] = None,
    window: Optional[int] = None,
    trace: Union[bool, FilePath] = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    staging_bytes: Optional[int] = None,
) -> Simulation:
    """Predicts the refit time of one strategy (``refit simulate``), or of a plan made before, as a
    deployment runs it. What a deployment had to assume is in ``.notes`` (and a warning).

    Args:
        problem: the problem (planned here with ``strategy`` on ``cluster``), or a :class:`Plan`
            (simulated as it is, on ``cluster`` when given, whose links it must fit: the same
            shape of hardware with other speeds, say; else on its own).
        deployment: who runs the plan (:func:`deployments`): ``refit`` (refit's executors),
            ``nemo-rl`` (NeMo RL's refit paths), ``m2n-bench`` (nccl_m2n's model benchmark),
            ``m2n-bench-all`` (the same with ``--no-dedup``: every layer timed), ``refit-nccl``
            (refit's NCCL executor, step by step).
            Default: ``refit`` for refit's plans, ``nemo-rl`` for the baselines'. A deployed
            baseline runs the problem quantized at the receivers, as deployed today.
        window: chunks a receiver grants each sender ahead; a (sender, receiver) pair sends its
            transfers in plan order (0: every transfer at once). Default: the pair window of the
            plan's execution model (the UCX executor's grant window for refit and direct, 0 for the
            NCCL baselines).
        trace: True keeps the Chrome trace event JSON in ``.trace`` (for
            :func:`refit.figures.timeline`); a path writes it there (open it in Perfetto).
        staging_bytes: refit's executors' staging per rank (``refit run --staging``), which sets
            the chunks they cut messages into; the deployed baselines keep their own. Default: the
            executors' (``Executor``'s ``staging``).

    Example::

        refit.simulate(problem, cluster, strategy="refit").predicted_s
    """
    window, staging_bytes = _checked_window(window), _checked_staging(staging_bytes)
    chunk_bytes = checked_chunk_bytes(chunk_bytes)
    strategy, deployment = checked_text(strategy, "strategy"), optional_name(deployment, "deployment")
    if isinstance(problem, Plan):
        _refuse_planning(problem, strategy, chunk_bytes)
        if cluster is not None:
            expect(cluster, Cluster, "cluster (refit.Cluster.preset(...))")
        trace_file = _trace_file(trace)
        placed = (problem.cluster if cluster is None else cluster).placed(problem.problem)
        raw = problem._handle.simulate(problem.problem._handle, placed, window, trace is not False, deployment,
                                       staging_bytes)  # fmt: skip
        return replace(_simulation(raw, trace, trace_file), plan_seconds=problem.plan_seconds)
    expect(problem, Problem, "problem (a refit.Problem or refit.Plan)")
    if cluster is None:
        raise TypeError("simulate(problem, cluster): a cluster is needed to plan on")
    expect(cluster, Cluster, "cluster (refit.Cluster.preset(...))")
    trace_file = _trace_file(trace)
    raw = _refit.predict(problem._handle, cluster.placed(problem), strategy, chunk_bytes, window,
                         trace is not False, deployment, staging_bytes)  # fmt: skip
    return _simulation(raw, trace, trace_file)


def compare(
    problem: Problem,
    cluster: Cluster,
    *,
    strategies: Optional[Sequence[str]] = None,
    window: Optional[int] = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    staging_bytes: Optional[int] = None,
) -> list[Simulation]:
    """Plans and predicts every strategy (``refit simulate --compare``): one row per strategy as its
    default deployment runs it, and for direct and m2n-ring one more as refit's executors would run
    their plans; each with its speed-up over gather-broadcast and its time relative to refit.

    Args:
        strategies: the rows to keep, by strategy (default: all of them, :func:`refit.strategies`);
            the speed-ups are still relative to gather-broadcast and refit.
        staging_bytes: the executors' staging per rank, as for :func:`simulate`.
    """
    expect(problem, Problem, "problem")
    expect(cluster, Cluster, "cluster (refit.Cluster.preset(...))")
    window, staging_bytes = _checked_window(window), _checked_staging(staging_bytes)
    chunk_bytes = checked_chunk_bytes(chunk_bytes)
    kept = _checked_strategies(strategies)
    rows = [_simulation(raw, False) for raw in _refit.compare(problem._handle, cluster.placed(problem),
                                                               chunk_bytes, window, staging_bytes)]  # fmt: skip
    return [r for r in rows if kept is None or r.strategy in kept]


@dataclass(frozen=True)
class ElasticSimulation:
    """An elastic refit's prediction (``refit simulate --members/--join/--fail``,
    docs/guide/elastic-planning.md).

    ``simulation`` is the members' refit, the joining engine's fill, or (``fail``) the full refit;
    ``elastic`` is the command's ``elastic`` object: ``engines`` and, by question, ``members``,
    ``full_plan_s``, ``delta_plan_s``, ``resent_transfers``, ``resent_bytes``; ``join``, ``peers``,
    ``from``, ``peer_tensors``, ``tensors``, ``peer_bytes``, ``training_bytes``, ``fill_s``; ``fail``,
    ``timeout_s``, ``full_s``, ``relayed_bytes``, ``repair_s``, ``completion_s``, ``lost_s``."""

    simulation: Simulation
    elastic: dict[str, Any]


def simulate_elastic(
    problem: Problem,
    cluster: Cluster,
    *,
    members: Optional[Sequence[int]] = None,
    join: Optional[int] = None,
    peers: Optional[Sequence[int]] = None,
    source: str = "both",
    fail: Optional[int] = None,
    timeout_s: Optional[float] = None,
    strategy: str = "refit",
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> ElasticSimulation:
    """Predicts one elastic question about the engines of the problem's ``infer`` (``engines=N``),
    as ``refit simulate`` does: exactly one of ``members`` (a refit of these engines only, planned
    from the full plan), ``join`` (the time to fill that engine from ``peers``, default (None) every
    other engine, and/or the training ranks: ``source`` is ``training``, ``peers`` or ``both``) and
    ``fail`` (what that engine dying as the refit starts costs the others, with the executors'
    ``timeout_s``, finite and at most 10^6 s as the executors take it). Bad engine indices and
    timeouts, and an empty ``members`` or ``peers`` list (None is the default), raise
    :class:`refit.BadInput` naming the option.

    Example::

        refit.simulate_elastic(problem, cluster, join=1, source="peers").elastic["fill_s"]
    """
    expect(problem, Problem, "problem")
    expect(cluster, Cluster, "cluster (refit.Cluster.preset(...))")
    engines = optional_ints(members, "members", 0, INT32_MAX)
    peer_engines = optional_ints(peers, "peers", 0, INT32_MAX)
    source, strategy = checked_text(source, "source"), checked_text(strategy, "strategy")
    join, fail = optional_int(join, "join", 0, INT32_MAX), optional_int(fail, "fail", 0, INT32_MAX)
    if timeout_s is not None:
        timeout_s = checked_seconds(timeout_s, "timeout_s", _refit.MIN_TIMEOUT_S, _refit.MAX_TIMEOUT_S)
    raw, elastic = _refit.simulate_elastic(problem._handle, cluster.placed(problem), strategy,
                                           checked_chunk_bytes(chunk_bytes), engines, join, peer_engines, source,
                                           fail, timeout_s)  # fmt: skip
    return ElasticSimulation(simulation=_simulation(raw, False), elastic=elastic)
