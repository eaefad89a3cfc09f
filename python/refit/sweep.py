"""What-if studies for people sizing a cluster: predictions over a grid of cluster parameters
and layouts, the points predicted in parallel on this machine's cores or on any
:class:`concurrent.futures.Executor` (processes, Ray, Dask).

The grid and each point's prediction are the library's (the facade's sweep, as ``refit sweep``
runs it); this module binds them and turns the rows into dataclasses or a pandas DataFrame."""

from __future__ import annotations

import itertools
from concurrent.futures import Executor, as_completed
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from refit import _refit
from refit._checks import INT32_MAX, checked_int, optional_callable
from refit._cluster import Cluster
from refit._errors import BadInput
from refit._plan import DEFAULT_CHUNK_BYTES, checked_chunk_bytes, expect
from refit._problem import Problem
from refit._simulate import Simulation, _checked_strategies, _checked_window, _simulation, row_records

__all__ = ["predict_point", "sweep", "sweep_keys", "to_frame"]

#: The keys whose values are layouts (``pp=16,ep=16``), with commas of their own; the others'
#: values are numbers, which join the preset's overrides.
LAYOUT_KEYS = ("train", "infer")

#: progress(done, total): called after each point.
Progress = Callable[[int, int], None]


def sweep_keys() -> list[str]:
    """Everything :func:`sweep` can vary: the preset keys (nic_gbps, nics_per_node,
    gpus_per_domain, oversubscription, ...), nics_per_domain, and the layouts (train, infer)."""
    return [key for key, _ in _refit.sweep_keys()]


def to_frame(rows: Sequence[Union[Simulation, Mapping[str, Any]]]) -> Any:
    """A pandas DataFrame of predictions (:func:`refit.compare`) or sweep rows.

    Raises:
        TypeError: a row that is neither a prediction nor a mapping, named (``rows[1]``).
        refit.BadInput: ``rows`` that are no list (None, one string).
    """
    import pandas as pd

    return pd.DataFrame([dict(r) for r in row_records(rows)])


def predict_point(point: Mapping[str, Any], chunk_bytes: int, window: Optional[int]) -> list[dict[str, Any]]:
    """Predicts one point of a sweep where it runs (a worker process, a Ray task, a Dask worker):
    every strategy, as ``refit simulate --compare --json`` rows. A point is plain data (its
    problem's and cluster's sources), so executors can send it anywhere refit is installed.

    Raises:
        refit.BadInput: a point that is not one (a field missing or of the wrong type, named), or
            one refit cannot predict.
    """
    if not isinstance(point, Mapping):
        raise BadInput(f"point: expected a mapping (a sweep's point), got {type(point).__name__}", "invalid argument")
    return list(_refit.predict_point(dict(point), checked_chunk_bytes(chunk_bytes), _checked_window(window)))


def _source(problem: Problem) -> dict[str, Any]:
    """What each point loads the problem from: its model and layouts, or its manifest file."""
    source = dict(problem._source)
    if source.get("manifest", "").startswith("("):
        raise ValueError("sweep: the problem must come from a model or a manifest file, which each point loads")
    return source


def _on_executor(
    executor: Executor, points: list[dict[str, Any]], chunk_bytes: int, window: Optional[int],
    progress: Optional[Progress],
) -> list[list[dict[str, Any]]]:  # fmt: skip
    """Each point's rows, predicted on the executor's workers, in the points' order."""
    futures = [executor.submit(predict_point, p, chunk_bytes, window) for p in points]
    position = {future: i for i, future in enumerate(futures)}
    results: list[list[dict[str, Any]]] = [[] for _ in points]
    for done, future in enumerate(as_completed(futures), start=1):
        results[position[future]] = future.result()
        if progress is not None:
            progress(done, len(points))
    return results


def _axes(vary: Any) -> list[tuple[str, list[str]]]:
    """The grid's axes, key and values as text, from ``vary`` (a mapping of keys to lists)."""
    if not isinstance(vary, Mapping):
        raise BadInput(f"vary: a mapping of keys to lists of values, got {type(vary).__name__}", "invalid argument")
    for key in vary:
        if isinstance(vary[key], (str, bytes)):
            raise ValueError(f"vary: {key} needs a list of values, not one string")
    return [(k, [_value_text(k, v) for v in vary[k]]) for k in vary]


def _value_text(key: str, value: Any) -> str:
    """A varied value as the text the library reads. A ',' in a hardware value is refused: the
    value joins the preset's overrides, where ``"5,nic_gbps=1"`` for copy_gbps once set nic_gbps
    too, silently (``refit sweep`` splits its values there, so that none holds one)."""
    text = str(value)
    if "," in text and key not in LAYOUT_KEYS:
        raise BadInput(f"vary: {key}: {text!r} holds a ',' (give each value as an item of the list)",
                       "invalid argument")  # fmt: skip
    return text


def _frame_by_default(as_frame: Optional[bool]) -> bool:
    """``as_frame``, or whether pandas is installed when it is None."""
    if as_frame is not None:
        return as_frame
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def sweep(
    problem: Problem,
    cluster: Cluster,
    vary: Mapping[str, Sequence[Any]],
    *,
    strategies: Optional[Sequence[str]] = None,
    window: Optional[int] = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    jobs: int = 0,
    executor: Optional[Executor] = None,
    as_frame: Optional[bool] = None,
    progress: Optional[Progress] = None,
) -> Any:
    """Predicts every combination of the values in ``vary`` for each strategy.

    Args:
        problem: the problem (from a model or a manifest file); layouts vary with keys ``train``
            and ``infer`` (model problems).
        cluster: a preset; keys such as ``nic_gbps`` (NIC line rate, Gb/s), ``nics_per_node``,
            ``nics_per_domain``, ``gpus_per_domain`` and ``oversubscription`` vary it
            (:func:`sweep_keys` lists them all).
        vary: key -> values, e.g. ``{"nic_gbps": [200, 400, 800], "oversubscription": [1, 2]}``.
        strategies: the strategies to keep (default: all); an unknown name is refused before any
            point is predicted.
        window: the pair window for every strategy (default: each one's own).
        jobs: points predicted at once on refit's own threads (default 0: one per core).
        executor: a :class:`concurrent.futures.Executor` that predicts each point instead
            (:func:`predict_point`): a ``ProcessPoolExecutor``, Dask's ``client.get_executor()``,
            or Ray's tasks (docs/guide/predicting.md); ``jobs`` is then the executor's business.
        as_frame: a pandas DataFrame (default when pandas is installed) or a list of dicts.
        progress: called with (points done, points in all) after each point.

    Returns:
        One row per (point, strategy) in the grid's order (the last key varying fastest): the
        varied keys, then the fields of :meth:`Simulation.row` (strategy, predicted_s,
        lower_bound_s, ratio_to_lower_bound, ...).

    Raises:
        refit.BadInput: a key refit cannot vary, or a point it cannot predict (the message
            names it).
    """
    expect(problem, Problem, "problem")
    expect(cluster, Cluster, "cluster (refit.Cluster.preset(...))")
    axes = _axes(vary)
    keys = [k for k, _ in axes]
    kept = _checked_strategies(strategies)
    window, chunk_bytes = _checked_window(window), checked_chunk_bytes(chunk_bytes)
    jobs = checked_int(jobs, "jobs", 0, INT32_MAX)
    optional_callable(progress, "progress", "(done, total)")
    points = list(_refit.sweep_points(_source(problem), dict(cluster._source), axes))
    if executor is None:
        raw = _refit.sweep(points, chunk_bytes, window, jobs, progress)
    else:
        raw = _on_executor(executor, points, chunk_bytes, window, progress)
    rows: list[dict[str, Any]] = []
    for values, point_rows in zip(itertools.product(*(vary[k] for k in keys)), raw):
        for sim in (_simulation(r, False) for r in point_rows):
            if kept is None or sim.strategy in kept:
                rows.append({**dict(zip(keys, values)), **sim.row()})
    return to_frame(rows) if _frame_by_default(as_frame) else rows
