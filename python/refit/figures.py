"""Figures of predictions, drawn with matplotlib (no pyplot state: each function returns a
``matplotlib.figure.Figure``; ``fig.savefig("out.png")`` writes it with the Agg renderer).

- :func:`compare`: every strategy side by side for one problem, against the lower bound;
- :func:`sweep`: a what-if study as lines, one per strategy;
- :func:`timeline`: how busy each NIC is over a predicted refit.
"""

from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass
from typing import Any, IO, Mapping, Optional, Sequence, Union

import numpy as np
from matplotlib import rcParams
from matplotlib.figure import Figure

from refit import _refit
from refit._bins import DEFAULT_BINS, MAX_BINS, checked_bins
from refit._checks import checked_list, checked_real
from refit._errors import BadInput
from refit._paths import FilePath, output_file, path_text
from refit._plan import expect
from refit._simulate import Simulation, row_records

__all__ = [
    "DEFAULT_BINS", "MAX_BINS", "MAX_DPI", "FigureFile", "checked_bins", "checked_dpi", "compare",
    "nic_timeline", "open_figure", "save", "sweep", "timeline",
]

#: The most dots per inch a figure is written at: a figure 8 inches wide is then 19,200 pixels
#: wide, about 1 GB of canvas, where 100,000 dpi asked for 14 GB and the memory ran out.
MAX_DPI = 2400


def checked_dpi(dpi: Any, what: str = "dpi") -> float:
    """A figure's dots per inch, a finite number in (0, :data:`MAX_DPI`], or BadInput naming
    ``what``: matplotlib refuses 0 and nan only once the file is open, leaving it empty."""
    return checked_real(dpi, what, MAX_DPI, "a number of dots per inch")

_NIC_TRACK = re.compile(r"^nic (\d+)(?: #\d+)?$")


def _axes(ax: Any, size: tuple[float, float]) -> tuple[Figure, Any]:
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.add_subplot()


def _seconds_label(seconds: float) -> str:
    return f"{seconds * 1e3:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def compare(
    rows: Sequence[Simulation], *, title: Optional[str] = None, ax: Any = None
) -> Figure:
    """Strategies side by side: each one's predicted time as a bar, the lower bound as a line,
    and each bar labelled with its time and its ratio to the bound.

    Args:
        rows: :func:`refit.compare`'s result (or any predictions of one problem on one cluster).
    """
    if not rows:
        raise ValueError("compare: no predictions to draw")
    for i, row in enumerate(rows):
        expect(row, Simulation, f"rows[{i}] (refit.compare's)")
    fig, ax = _axes(ax, (8, 0.6 * len(rows) + 1.6))
    names = [f"{r.strategy} ({r.deployment})" for r in rows]
    times = [r.predicted_s for r in rows]
    y = np.arange(len(rows))[::-1]
    ours = [r.strategy == "refit" and r.deployment == "refit" for r in rows]
    bars = ax.barh(y, times, color=["#2a7ab9" if o else "#9aa5b1" for o in ours])
    ax.set_yticks(y, names)
    bound = rows[0].lower_bound_s
    ax.axvline(bound, color="black", linestyle="--", linewidth=1)
    for bar, r in zip(bars, rows):
        ax.annotate(f"{_seconds_label(r.predicted_s)} ({r.ratio_to_lower_bound:.2f}x bound)",
                    (bar.get_width(), bar.get_y() + bar.get_height() / 2), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=8)  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlim(min(times + [bound]) / 1.5, max(times) * 4)
    ax.set_ylim(y[-1] - 0.7, y[0] + 0.5)
    ax.set_xlabel(f"predicted refit time (s, log scale); dashed: the lower bound, {_seconds_label(bound)}")
    ax.set_title(title or f"refit time by strategy on {rows[0].cluster}")
    return fig


def _column(records: list[Mapping[str, Any]], name: Any, what: str) -> str:
    """``name``, a column of the rows, or BadInput naming ``what`` and the columns there are."""
    if name not in records[0]:
        raise BadInput(f"{what}: no column {name!r} in the rows (columns: {', '.join(map(str, records[0]))})",
                       "not found")  # fmt: skip
    return name


def sweep(
    rows: Any,
    x: str,
    *,
    y: str = "predicted_s",
    series: Sequence[str] = ("strategy", "deployment"),
    title: Optional[str] = None,
    logy: bool = True,
    ax: Any = None,
) -> Figure:
    """A sweep (:func:`refit.sweep`) as lines: ``y`` against the varied key ``x``, one line per
    value of the ``series`` columns, with the lower bound dashed.

    Args:
        rows: the sweep's DataFrame or list of rows.
        x: the varied key on the horizontal axis, e.g. ``"nic_gbps"``.
        y: the column on the vertical axis (default: the predicted time).
        series: columns whose values tell the lines apart (strategy, other varied keys).

    Raises:
        refit.BadInput: ``x``, ``y`` or a ``series`` column the rows do not have, or ``series``
            given as one string (a list of column names, one per line label).
    """
    records = row_records(rows)
    if not records:
        raise ValueError("sweep: no rows to draw")
    x, y = _column(records, x, "x"), _column(records, y, "y")
    columns = checked_list(series, "series", "columns")
    series = [_column(records, s, f"series[{i}]") for i, s in enumerate(columns)]
    fig, ax = _axes(ax, (8, 4.5))
    numeric = all(isinstance(r[x], (int, float)) for r in records)
    positions = {v: i for i, v in enumerate(dict.fromkeys(r[x] for r in records))}

    def at(value: Any) -> Any:
        return value if numeric else positions[value]

    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for r in records:
        groups.setdefault(tuple(r[s] for s in series), []).append(r)
    for key, group in groups.items():
        group = sorted(group, key=lambda r: at(r[x]))
        label = ", ".join(str(k) for k in key)
        ax.plot([at(r[x]) for r in group], [r[y] for r in group], marker="o", label=label)
    if y == "predicted_s" and "lower_bound_s" in records[0]:
        bound = {at(r[x]): r["lower_bound_s"] for r in records}
        xs = sorted(bound)
        ax.plot(xs, [bound[v] for v in xs], color="black", linestyle="--", label="lower bound")
    if not numeric:
        ax.set_xticks(list(positions.values()), [str(v) for v in positions])
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel("predicted refit time (s)" if y == "predicted_s" else y)
    ax.set_title(title or f"refit time against {x}")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return fig


def nic_timeline(
    simulation: Simulation, bins: int = DEFAULT_BINS
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Each NIC's send rate over a predicted refit, from the simulation's trace.

    Every network transfer is a task on its sender's NIC track; its bytes are spread evenly over
    the time its data flowed (a rate that in the simulation rose and fell as flows came and went
    is drawn flat).

    Returns:
        (bin edges in seconds, NIC names, send rates in bytes per second with one row per NIC and
        one column per bin).
    """
    expect(simulation, Simulation, "simulation")
    bins = checked_bins(bins)
    if simulation.trace is None:
        raise ValueError("nic_timeline: simulate with trace=True to get a simulation's timeline")
    events = json.loads(simulation.trace)["traceEvents"]
    nic_of_tid: dict[int, int] = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            m = _NIC_TRACK.match(e["args"]["name"])
            if m:
                nic_of_tid[e["tid"]] = int(m.group(1))
    nics = sorted(set(nic_of_tid.values()))
    row_of = {n: i for i, n in enumerate(nics)}
    end = max(simulation.predicted_s, 1e-12)
    edges = np.linspace(0.0, end, bins + 1)
    rates = np.zeros((len(nics), bins))
    width = end / bins
    for e in events:
        if e.get("ph") != "X" or e.get("tid") not in nic_of_tid:
            continue
        start = e["args"]["flow_start_us"] * 1e-6
        stop = (e["ts"] + e["dur"]) * 1e-6
        nbytes = e["args"]["bytes"]
        if nbytes <= 0 or stop <= start:
            continue
        row = rates[row_of[nic_of_tid[e["tid"]]]]
        first, last = int(start / width), min(int(stop / width), bins - 1)
        for b in range(first, last + 1):
            overlap = min(stop, edges[b + 1]) - max(start, edges[b])
            if overlap > 0:
                row[b] += nbytes * overlap / (stop - start)
    return edges, [f"nic {n}" for n in nics], rates / width


def timeline(
    simulation: Simulation,
    *,
    bins: int = DEFAULT_BINS,
    title: Optional[str] = None,
    ax: Any = None,
) -> Figure:
    """A per-NIC timeline of a predicted refit: each NIC's send rate (GB/s) over time, one row
    per NIC. Needs a simulation made with ``trace=True``."""
    edges, names, rates = nic_timeline(simulation, bins)
    if not names:
        raise ValueError("timeline: the plan sends nothing over the network")
    fig, ax = _axes(ax, (8, min(2 + 0.12 * len(names), 9)))
    image = ax.imshow(rates / 1e9, aspect="auto", interpolation="nearest", cmap="viridis",
                      extent=(edges[0], edges[-1], len(names) - 0.5, -0.5))  # fmt: skip
    step = max(1, len(names) // 16)
    ax.set_yticks(range(0, len(names), step), names[::step], fontsize=7)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("sending NIC")
    fig.colorbar(image, ax=ax, label="send rate (GB/s)")
    ax.set_title(title or f"{simulation.strategy} on {simulation.cluster}: "
                          f"{_seconds_label(simulation.predicted_s)} predicted")  # fmt: skip
    return fig


@dataclass
class FigureFile:
    """A file a figure will be written to, opened before the figure is drawn (:func:`open_figure`)."""

    file: _refit.OutputFile
    format: str

    def write(self, fig: Figure, dpi: float = 100) -> None:
        """Writes the figure in the file's format (at ``dpi``, :func:`checked_dpi`) and closes
        the file."""
        expect(fig, Figure, "fig")
        image = io.BytesIO()
        fig.savefig(image, format=self.format, dpi=checked_dpi(dpi))
        self.file.write(image.getvalue())


def open_figure(path: FilePath, what: str = "path") -> FigureFile:
    """The file a figure will be written to, in the format its suffix names (PNG without one):
    a format matplotlib does not write, or a path that cannot be written (a folder, a folder that
    does not exist, a FIFO no process reads) is refused now, naming ``what``, before the work the
    figure draws."""
    text = path_text(path, what)
    fmt = os.path.splitext(text)[1][1:].lower() or str(rcParams["savefig.format"])
    formats = Figure().canvas.get_supported_filetypes()
    if fmt not in formats:
        raise BadInput(f"{what}: {text}: matplotlib writes no '.{fmt}' files (it writes {', '.join(sorted(formats))})",
                       "unsupported")  # fmt: skip
    return FigureFile(output_file(text, what), fmt)


def save(fig: Figure, path: Union[FilePath, IO[bytes]], dpi: float = 100) -> None:
    """Writes a figure (PNG, SVG or PDF by the file's suffix) with the Agg renderer: to a path,
    checked as :func:`open_figure` checks it, or to a binary file object as ``savefig`` does.
    The figure and ``dpi`` (:func:`checked_dpi`) are checked before the file is opened, so that
    a refused one leaves no empty file behind."""
    expect(fig, Figure, "fig")
    dpi = checked_dpi(dpi)
    if hasattr(path, "write"):
        fig.savefig(path, dpi=dpi)
        return
    open_figure(path).write(fig, dpi)
