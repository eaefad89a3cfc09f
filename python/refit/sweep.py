"""What-if studies for people sizing a cluster: predictions over a grid of cluster parameters
and layouts."""

from __future__ import annotations

import itertools
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from refit._cluster import Cluster, preset_keys
from refit._problem import Problem
from refit._simulate import Simulation, compare

__all__ = ["LAYOUT_KEYS", "NICS_PER_DOMAIN", "sweep", "sweep_keys", "to_frame"]

#: Keys that vary the problem's layouts: Megatron training sizes, vLLM inference sizes.
LAYOUT_KEYS = ("train", "infer")
#: NICs per NVLink domain: turned into the preset's nics_per_node for its nodes per domain.
NICS_PER_DOMAIN = "nics_per_domain"


def sweep_keys() -> list[str]:
    """Everything :func:`sweep` can vary: the preset keys (nic_gbps, nics_per_node,
    gpus_per_domain, oversubscription, ...), nics_per_domain, and the layouts (train, infer)."""
    return [*preset_keys(), NICS_PER_DOMAIN, *LAYOUT_KEYS]


def to_frame(rows: Sequence[Union[Simulation, Mapping[str, Any]]]) -> Any:
    """A pandas DataFrame of predictions (:func:`refit.compare`) or sweep rows."""
    import pandas as pd

    return pd.DataFrame([r.row() if isinstance(r, Simulation) else dict(r) for r in rows])


def _check(vary: Mapping[str, Sequence[Any]], cluster: Cluster, problem: Problem) -> None:
    known = sweep_keys()
    for key, values in vary.items():
        if key not in known:
            raise ValueError(f"vary: unknown key '{key}' (expected one of: {', '.join(known)})")
        if isinstance(values, (str, bytes)) or len(values) == 0:
            raise ValueError(f"vary: {key} needs a non-empty list of values")
        if key in LAYOUT_KEYS and problem.model is None:
            raise ValueError(f"vary: {key} needs a problem made from a model (Problem.from_model)")
        if key not in LAYOUT_KEYS and not cluster.is_preset:
            raise ValueError(f"vary: {key} needs a preset cluster, not {cluster.spec}")


def _nodes_per_domain(cluster: Cluster, problem: Problem) -> int:
    described = cluster.describe(problem)
    node_of = {g["id"] if "id" in g else i: g["node"] for i, g in enumerate(described["gpus"])}
    return len({node_of[g] for g in described["domains"][0]["gpus"]})


def _cluster_at(cluster: Cluster, problem: Problem, point: Mapping[str, Any]) -> Cluster:
    overrides = {k: v for k, v in point.items() if k not in LAYOUT_KEYS and k != NICS_PER_DOMAIN}
    at = cluster.with_overrides(**overrides) if overrides else cluster
    if NICS_PER_DOMAIN in point:
        nodes = _nodes_per_domain(at, problem)
        nics = int(point[NICS_PER_DOMAIN])
        if nics % nodes:
            raise ValueError(f"vary: nics_per_domain={nics} does not split over the domain's {nodes} nodes")
        at = at.with_overrides(nics_per_node=nics // nodes)
    return at


def sweep(
    problem: Problem,
    cluster: Cluster,
    vary: Mapping[str, Sequence[Any]],
    *,
    strategies: Optional[Sequence[str]] = None,
    window: Optional[int] = None,
    as_frame: Optional[bool] = None,
    progress: Optional[Callable[[dict[str, Any]], None]] = None,
) -> Any:
    """Predicts every combination of the values in ``vary`` for each strategy.

    Args:
        problem: the problem; layouts vary with keys ``train`` and ``infer`` (model problems).
        cluster: a preset; keys such as ``nic_gbps`` (NIC line rate, Gb/s), ``nics_per_node``,
            ``nics_per_domain``, ``gpus_per_domain`` and ``oversubscription`` vary it
            (:func:`sweep_keys` lists them all).
        vary: key -> values, e.g. ``{"nic_gbps": [200, 400, 800], "oversubscription": [1, 2]}``.
        strategies: the strategies to predict (default: all).
        window: the pair window for every strategy (default: each one's own).
        as_frame: a pandas DataFrame (default when pandas is installed) or a list of dicts.
        progress: called with each point of the grid before it is predicted.

    Returns:
        One row per (point, strategy): the varied keys, then the fields of
        :meth:`Simulation.row` (strategy, predicted_s, lower_bound_s, ratio_to_lower_bound, ...).
    """
    _check(vary, cluster, problem)
    keys = list(vary)
    rows: list[dict[str, Any]] = []
    for values in itertools.product(*(vary[k] for k in keys)):
        point = dict(zip(keys, values))
        if progress is not None:
            progress(point)
        at_problem = problem
        if any(k in point for k in LAYOUT_KEYS):
            at_problem = problem.with_layouts(train=point.get("train"), infer=point.get("infer"))
        at_cluster = _cluster_at(cluster, at_problem, point)
        for sim in compare(at_problem, at_cluster, strategies=strategies, window=window):
            rows.append({**point, **sim.row()})
    if as_frame is None:
        try:
            import pandas  # noqa: F401

            as_frame = True
        except ImportError:
            as_frame = False
    return to_frame(rows) if as_frame else rows
