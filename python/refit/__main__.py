"""``python -m refit``: predictions, sweeps and figures from the shell.

    python -m refit compare  PROBLEM CLUSTER [--window N] [--plot out.png] [--json]
    python -m refit sweep    PROBLEM CLUSTER --vary KEY=V1,V2,... [--vary ...] [--strategy S ...] [--jobs N]
                             [--x KEY] [--plot out.png] [--csv out.csv] [--json]
    python -m refit timeline PROBLEM CLUSTER [--strategy S] [--bins N] --plot out.png

    PROBLEM = --model NAME|config.json --train "pp=16,ep=16" --infer "tp=32,engines=8" | --manifest F
    CLUSTER = --cluster PRESET[:key=value,...] | --cluster-file F | --nccl-topo-xml F | --discover

Exit codes as the refit command's: 0 ok, 2 bad input, 1 failure; errors go to stderr as
``refit <command>: error: <message>``. Options are checked, and the files to write (--plot, --csv)
opened, before any prediction: a typo is refused at once rather than after a sweep.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import re
import sys
import time
from typing import Any, Callable, Optional, Sequence

from refit._bins import DEFAULT_BINS, MAX_BINS
from refit._checks import checked_names
from refit._cluster import Cluster
from refit._errors import BadInput, Error
from refit._paths import output_file
from refit._plan import strategies
from refit._problem import Problem
from refit._simulate import Simulation, compare
from refit.sweep import LAYOUT_KEYS


def _problem_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("problem")
    g.add_argument("--model", help="built-in model name, or a config.json (or its directory)")
    g.add_argument("--train", help='Megatron sizes, e.g. "pp=16,ep=16"')
    g.add_argument("--infer", help='vLLM sizes, e.g. "tp=32,engines=8"')
    g.add_argument("--dtype", help="overrides the config's torch_dtype")
    g.add_argument("--per-expert", action="store_true", help="one tensor per routed expert")
    g.add_argument("--mtp", action="store_true", help="include DeepSeek-V3's MTP layer")
    g.add_argument("--manifest", help="a manifest instead of --model, --train and --infer")
    c = p.add_argument_group("cluster").add_mutually_exclusive_group()
    c.add_argument("--cluster", help="preset, e.g. dgx-h100 or gb200-nvl72:gpus_per_domain=64")
    c.add_argument("--cluster-file", help="cluster file (the format of refit topo --json)")
    c.add_argument("--nccl-topo-xml", help="NCCL topology dump of one node")
    c.add_argument("--discover", action="store_true", help="this machine (NVML and sysfs)")


def _load(args: argparse.Namespace) -> tuple[Problem, Cluster]:
    if args.manifest:
        if args.model or args.train or args.infer:
            raise ValueError("--manifest: give either --manifest or --model with --train and --infer")
        problem = Problem.from_manifest(args.manifest)
    else:
        if not args.model:
            raise ValueError(
                "--model: missing (a built-in name or a config.json, with --train and --infer; "
                "or --manifest FILE)"
            )
        problem = Problem.from_model(args.model, train=args.train or "", infer=args.infer or "",
                                     dtype=args.dtype, per_expert=args.per_expert, mtp=args.mtp)  # fmt: skip
    if args.cluster_file:
        cluster = Cluster.from_file(args.cluster_file)
    elif args.nccl_topo_xml:
        cluster = Cluster.from_nccl_xml(args.nccl_topo_xml)
    elif args.discover:
        cluster = Cluster.discover()
        for note in cluster.notes:
            print(f"refit: discover: {note}", file=sys.stderr)
    else:
        cluster = Cluster.preset(args.cluster or "dgx-h100")
    return problem, cluster


def _vary(items: Sequence[str]) -> dict[str, list[str]]:
    """Each ``--vary KEY=V1,V2,...`` as its key and its values as typed: the library reads them,
    as it reads ``refit sweep``'s, so that what that command refuses (``nodes=1_0``, a digit of
    another script, ``copy_gbps= 5``) is refused here too, with the value as given."""
    vary: dict[str, list[str]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise ValueError(f"--vary: expected KEY=V1,V2,... (got '{item}')")
        if key in vary:
            raise BadInput(f"--vary {key}: given twice", "invalid argument")
        # Layouts hold commas themselves: their values are separated by ';'. An empty value is a
        # slip ("tp=2;;tp=4"), refused as refit sweep refuses it, not dropped.
        separator = ";" if key in LAYOUT_KEYS else ","
        vary[key] = values.split(separator)
        if not all(vary[key]):
            raise BadInput(f"--vary {key}: an empty value (expected {key}=V1{separator}V2{separator}...)",
                           "invalid argument")
    return vary


def _number(text: str) -> Any:
    """A value the library has read (so spelled as ``refit sweep`` takes it) as the number it
    stands for, for the rows, the table and the plot's axis; text that is none stays text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _read_back(rows: list[dict[str, Any]], vary: dict[str, list[str]]) -> None:
    """The varied values of each row, given as text, as the numbers they stand for (layouts stay
    text)."""
    numeric = [key for key in vary if key not in LAYOUT_KEYS]
    for row in rows:
        row.update({key: _number(row[key]) for key in numeric})


def _integer(text: str) -> int:
    """An integer option's text (``--window``, ``--jobs``, ``--bins``) as ``refit`` reads one:
    ASCII digits with an optional '-', where Python's ``int`` takes ``1_0``, `` 5`` and digits
    of other scripts too."""
    if re.fullmatch(r"-?[0-9]+", text) is None:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(text)


def _refuse_empty(args: argparse.Namespace) -> None:
    """BadInput naming the first option given as '' (``--csv ''``), as ``refit`` refuses
    ``--quantize ''``: an empty value would read as one not given, so that ``--csv ''`` wrote no
    table and ``--cluster-file ''`` predicted on the default preset."""
    for name, value in vars(args).items():
        if value == "":
            raise BadInput(f"--{name.replace('_', '-')}: is empty", "invalid argument")


def _open_figure(path: Optional[str]) -> Any:
    """The --plot file opened before the work, its format checked (None without --plot)."""
    if path is None:
        return None
    from refit import figures

    return figures.open_figure(path, "--plot")


def _save(fig: Any, plot: Any, path: str) -> None:
    plot.write(fig, dpi=100)
    print(f"refit: wrote {path}", file=sys.stderr)


def _print_table(rows: Sequence[Simulation]) -> None:
    print(f"lower bound {rows[0].lower_bound_s:.4f} s ({rows[0].lower_bound_binding})")
    print(f"{'strategy':<18} {'deployment':<10} {'predicted':>12} {'x bound':>9} {'vs gather-bc':>14}")
    for r in rows:
        speedup = "-" if r.speedup_vs_gather_broadcast is None else f"{r.speedup_vs_gather_broadcast:.2f}x"
        print(f"{r.strategy:<18} {r.deployment:<10} {r.predicted_s:>10.4f} s {r.ratio_to_lower_bound:>9.3f} {speedup:>14}")


def _simulation_json(rows: Sequence[Simulation]) -> dict[str, Any]:
    def row(r: Simulation) -> dict[str, Any]:
        d = dataclasses.asdict(r)
        for key in ("critical_path", "trace", "cluster", "lower_bound_binding"):
            d.pop(key)
        # The command's rows leave out what a prediction does not have (no comparison, no notes,
        # a deployment that moves every tensor).
        for key in ("speedup_vs_gather_broadcast", "time_vs_refit", "notes", "moved_bytes", "moved_lower_bound_s",
                    "ratio_to_moved_lower_bound"):  # fmt: skip
            if not d[key]:
                d.pop(key)
        return d

    return {"cluster": rows[0].cluster, "lower_bound_s": rows[0].lower_bound_s,
            "lower_bound_binding": rows[0].lower_bound_binding, "strategies": [row(r) for r in rows]}  # fmt: skip


def _compare(args: argparse.Namespace) -> None:
    problem, cluster = _load(args)
    plot = _open_figure(args.plot)
    rows = compare(problem, cluster, window=args.window)
    if args.json:
        print(json.dumps(_simulation_json(rows)))
    else:
        _print_table(rows)
    if args.plot:
        from refit import figures

        title = f"{problem.model or 'manifest'}: {problem.train} -> {problem.infer} on {rows[0].cluster}"
        _save(figures.compare(rows, title=title if problem.model else None), plot, args.plot)


def _progress_bar() -> Callable[[int, int], None]:
    """A bar on stderr, redrawn in place on a terminal, a line per point otherwise (logs, CI)."""
    terminal = sys.stderr.isatty()
    start = time.monotonic()

    def show(done: int, total: int) -> None:
        filled = 30 * done // total
        end = "" if terminal and done < total else "\n"
        print(f"{chr(13) if terminal else ''}refit sweep: [{'#' * filled}{' ' * (30 - filled)}] {done}/{total} points, "
              f"{time.monotonic() - start:.0f} s", end=end, file=sys.stderr, flush=True)  # fmt: skip

    return show


def _sweep(args: argparse.Namespace) -> None:
    from refit.sweep import sweep

    vary = _vary(args.vary)
    if args.x is not None and args.x not in vary:
        raise BadInput(f"--x: {args.x} is not a varied key ({', '.join(vary)})", "invalid argument")
    if args.strategy:
        checked_names(args.strategy, "--strategy", "strategy", [s.name for s in strategies()])
    problem, cluster = _load(args)
    # The figure's format is checked before the table is created, so that a refused --plot leaves
    # no empty (or emptied) --csv behind.
    plot = _open_figure(args.plot)
    table = output_file(args.csv, "--csv") if args.csv else None
    rows = sweep(problem, cluster, vary, strategies=args.strategy or None, window=args.window, jobs=args.jobs,
                 as_frame=False, progress=_progress_bar())  # fmt: skip
    _read_back(rows, vary)
    if args.json:
        print(json.dumps(rows))
    else:
        keys = list(vary)
        for r in rows:
            point = " ".join(f"{k}={r[k]}" for k in keys)
            print(f"{point:<40} {r['strategy']:<18} {r['predicted_s']:>10.4f} s  x{r['ratio_to_lower_bound']:.3f}")
    if table is not None:
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=list(rows[0]) if rows else list(vary))
        writer.writeheader()
        writer.writerows(rows)
        table.write(text.getvalue().encode())
    if plot is not None:
        from refit import figures

        x = args.x or next(iter(vary))
        # One line per strategy as each deployment runs it (direct and m2n-ring have two), and per
        # value of the other varied keys.
        series = ["strategy", "deployment", *(k for k in vary if k != x)]
        _save(figures.sweep(rows, x, series=series), plot, args.plot)


def _timeline(args: argparse.Namespace) -> None:
    from refit import figures
    from refit._simulate import simulate

    bins = figures.checked_bins(args.bins, "--bins")
    problem, cluster = _load(args)
    plot = _open_figure(args.plot)
    sim = simulate(problem, cluster, args.strategy, window=args.window, trace=True)
    print(f"{sim.strategy}: {sim.predicted_s:.4f} s predicted ({sim.ratio_to_lower_bound:.3f}x bound)")
    _save(figures.timeline(sim, bins=bins), plot, args.plot)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m refit", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    c = commands.add_parser("compare", help="predict every strategy (refit simulate --compare)")
    _problem_options(c)
    c.add_argument("--window", type=_integer, help="chunks in flight per (sender, receiver) pair")
    c.add_argument("--plot", help="write the strategies side by side to this image (PNG, SVG, PDF)")
    c.add_argument("--json", action="store_true", help="print refit simulate --json's object")
    c.set_defaults(run=_compare)
    s = commands.add_parser("sweep", help="predict over cluster parameters and layouts")
    _problem_options(s)
    s.add_argument("--vary", action="append", required=True, metavar="KEY=V1,V2,...",
                   help="a key and its values, e.g. nic_gbps=200,400,800 (layouts: "
                        "train=pp=16,ep=16;pp=8,ep=32); repeat for a grid")  # fmt: skip
    s.add_argument("--strategy", action="append", help="a strategy to predict (repeat; default all)")
    s.add_argument("--jobs", type=_integer, default=0, help="points predicted at once (default 0: one per core)")
    s.add_argument("--window", type=_integer, help="chunks in flight per (sender, receiver) pair")
    s.add_argument("--x", help="the varied key on the plot's horizontal axis (default the first)")
    s.add_argument("--plot", help="write the sweep as lines to this image")
    s.add_argument("--csv", help="write the rows to this CSV file")
    s.add_argument("--json", action="store_true", help="print the rows as one JSON list")
    s.set_defaults(run=_sweep)
    t = commands.add_parser("timeline", help="a per-NIC timeline of one strategy's predicted refit")
    _problem_options(t)
    t.add_argument("--strategy", default="refit")
    t.add_argument("--window", type=_integer, help="chunks in flight per (sender, receiver) pair")
    t.add_argument("--bins", type=_integer, default=DEFAULT_BINS,
                   help=f"time bins (default {DEFAULT_BINS}, at most {MAX_BINS})")  # fmt: skip
    t.add_argument("--plot", required=True, help="write the timeline to this image")
    t.set_defaults(run=_timeline)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs one command; returns its exit code."""
    args = _parser().parse_args(argv)
    try:
        _refuse_empty(args)
        args.run(args)
    except ValueError as e:  # bad input, refit.BadInput among it
        print(f"refit {args.command}: error: {e}", file=sys.stderr)
        return 2
    except Error as e:  # failures at run time
        print(f"refit {args.command}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # the system refused a file or a resource refit does not check first
        where = f"{e.filename}: " if e.filename is not None else ""
        print(f"refit {args.command}: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
