"""What-if studies and figures: sweeps over cluster parameters and layouts, figures written as
PNG with the Agg renderer, and python -m refit from the shell."""

from __future__ import annotations

import io
import math
import re
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import refit
from conftest import TINY_MOE
from refit import figures

QWEN = refit.Problem.from_model("qwen3-30b-a3b", train="ep=8,pp=2", infer="tp=8,engines=2")
PNG = b"\x89PNG\r\n\x1a\n"


def _png(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG), path
    assert 5_000 < len(data) < 200_000, len(data)  # a real picture, small enough to commit


def test_sweep_over_nic_bandwidth_gives_a_frame_one_row_per_point_and_strategy() -> None:
    pd = pytest.importorskip("pandas")
    frame = refit.sweep(QWEN, refit.Cluster.preset("dgx-h100"), vary={"nic_gbps": [200, 400, 800]},
                        strategies=["refit", "gather-broadcast"])  # fmt: skip
    assert isinstance(frame, pd.DataFrame)
    assert len(frame) == 3 * 2  # refit, and gather-broadcast as NeMo RL runs it
    assert {"nic_gbps", "strategy", "predicted_s", "lower_bound_s", "ratio_to_lower_bound",
            "speedup_vs_gather_broadcast", "breakdown_network_s"} <= set(frame.columns)  # fmt: skip
    refit_rows = frame[frame.strategy == "refit"].sort_values("nic_gbps")
    # Twice the NIC bandwidth: the bound (destination NICs) halves, and so about does the time.
    bounds = refit_rows.lower_bound_s.tolist()
    assert bounds[0] == pytest.approx(2 * bounds[1], rel=1e-9) and bounds[1] == pytest.approx(2 * bounds[2], rel=1e-9)
    assert refit_rows.predicted_s.is_monotonic_decreasing
    # Each point is what simulate gives for that preset.
    single = refit.simulate(QWEN, refit.Cluster.preset("dgx-h100:nic_gbps=800"))
    assert refit_rows.predicted_s.iloc[-1] == single.predicted_s


def test_sweep_over_nics_per_domain_oversubscription_and_layouts_as_rows() -> None:
    rows = refit.sweep(QWEN, refit.Cluster.preset("dgx-h100"),
                       vary={"nics_per_domain": [4, 8], "oversubscription": [1, 2]},
                       strategies=["refit"], as_frame=False)  # fmt: skip
    assert [(r["nics_per_domain"], r["oversubscription"]) for r in rows] == [(4, 1), (4, 2), (8, 1), (8, 2)]
    by = {(r["nics_per_domain"], r["oversubscription"]): r["predicted_s"] for r in rows}
    assert by[(4, 1)] > by[(8, 1)]  # fewer NICs per domain: slower
    layouts = refit.sweep(QWEN, refit.Cluster.preset("dgx-h100"),
                          vary={"infer": ["tp=8,engines=2", "tp=4,engines=4"]}, strategies=["refit"], as_frame=False)  # fmt: skip
    assert [r["infer"] for r in layouts] == ["tp=8,engines=2", "tp=4,engines=4"]
    assert layouts[0]["predicted_s"] != layouts[1]["predicted_s"]
    with pytest.raises(ValueError, match="nics_per_domain=3 does not split"):
        refit.sweep(QWEN, refit.Cluster.preset("gb200-nvl72"), vary={"nics_per_domain": [3]}, strategies=["refit"])


def test_sweep_on_threads_and_on_an_executor_gives_the_rows_of_one_point_at_a_time() -> None:
    vary = {"nic_gbps": [200, 400], "infer": ["tp=8,engines=2", "tp=4,engines=4"]}
    cluster = refit.Cluster.preset("dgx-h100")
    reported: list[tuple[int, int]] = []
    threads = refit.sweep(QWEN, cluster, vary, strategies=["refit"], jobs=2, as_frame=False,
                          progress=lambda done, total: reported.append((done, total)))  # fmt: skip
    with ProcessPoolExecutor(max_workers=2) as pool:
        pooled = refit.sweep(QWEN, cluster, vary, strategies=["refit"], executor=pool, as_frame=False)

    def points(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(r["nic_gbps"], r["infer"], r["predicted_s"]) for r in rows]

    # The grid's order (the last key fastest) and, the simulator being deterministic, each point's
    # prediction bit for bit as simulate gives it alone.
    assert [p[:2] for p in points(threads)] == [(200, "tp=8,engines=2"), (200, "tp=4,engines=4"),
                                                (400, "tp=8,engines=2"), (400, "tp=4,engines=4")]  # fmt: skip
    assert points(threads) == points(pooled)
    alone = refit.simulate(QWEN.with_layouts(infer="tp=4,engines=4"), refit.Cluster.preset("dgx-h100:nic_gbps=400"))
    assert threads[-1]["predicted_s"] == alone.predicted_s
    assert reported == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_compare_figure(tmp_path: Path) -> None:
    rows = refit.compare(QWEN, refit.Cluster.preset("dgx-h100"))
    fig = figures.compare(rows)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [f"{r.strategy} ({r.deployment})" for r in rows]
    figures.save(fig, tmp_path / "compare.png")
    _png(tmp_path / "compare.png")
    # A binary file object is written as savefig writes it, in savefig's default format (PNG).
    image = io.BytesIO()
    figures.save(fig, image)
    assert image.getvalue().startswith(PNG)


def test_sweep_figure_draws_a_line_per_strategy_and_the_bound(tmp_path: Path) -> None:
    rows = refit.sweep(QWEN, refit.Cluster.preset("dgx-h100"), vary={"nic_gbps": [200, 400]},
                       strategies=["refit", "m2n-ring"])  # fmt: skip
    fig = figures.sweep(rows, "nic_gbps")
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    # m2n-ring as NeMo RL runs it, and its plan as refit's executors would.
    assert labels == ["refit, refit", "m2n-ring, nemo-rl", "m2n-ring, refit", "lower bound"]
    fig.savefig(tmp_path / "sweep.png", dpi=100)
    _png(tmp_path / "sweep.png")


def test_nic_timeline_accounts_for_every_network_byte(tmp_path: Path) -> None:
    sim = refit.simulate(QWEN, refit.Cluster.preset("dgx-h100"), trace=True)
    edges, names, rates = figures.nic_timeline(sim, bins=50)
    assert len(edges) == 51 and rates.shape == (len(names), 50)
    # Each NIC track holds the transfers its GPUs send: rate x bin width adds up to the bytes
    # the plan sends over the network.
    assert (rates * (edges[1] - edges[0])).sum() == pytest.approx(sim.network_bytes, rel=1e-6)
    fig = figures.timeline(sim)
    fig.savefig(tmp_path / "timeline.png", dpi=100)
    _png(tmp_path / "timeline.png")
    with pytest.raises(ValueError, match="trace=True"):
        figures.nic_timeline(refit.simulate(QWEN, refit.Cluster.preset("dgx-h100")))


def _python_m_refit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "refit", *args], capture_output=True, text=True, timeout=600)


def test_python_m_refit_sweep_plots_from_the_shell(tmp_path: Path) -> None:
    out = tmp_path / "sweep.png"
    done = _python_m_refit("sweep", "--model", "qwen3-30b-a3b", "--train", "ep=8,pp=2", "--infer", "tp=8,engines=2",
                           "--cluster", "dgx-h100", "--vary", "nic_gbps=200,400,800", "--strategy", "refit",
                           "--strategy", "gather-broadcast", "--plot", str(out), "--csv", str(tmp_path / "s.csv"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    _png(out)
    assert len((tmp_path / "s.csv").read_text().splitlines()) == 1 + 3 * 2
    assert "nic_gbps=800" in done.stdout


def test_python_m_refit_sweep_draws_one_line_per_strategy_and_deployment(tmp_path: Path, monkeypatch: Any) -> None:
    # direct and m2n-ring are predicted as NeMo RL and as refit's executors run them: 2 + 2 + 1 + 1
    # series over 2 x 2 points, so each line has one point per nic_gbps value (none doubles back).
    from refit.__main__ import main

    drawn: dict[str, Any] = {}
    draw = figures.sweep
    monkeypatch.setattr(figures, "sweep", lambda rows, x, **kw: drawn.update(rows=rows, x=x, **kw) or draw(rows, x, **kw))
    assert main(["sweep", "--model", "qwen3-30b-a3b", "--train", "ep=8,pp=2", "--infer", "tp=8,engines=2",
                 "--cluster", "dgx-h100", "--vary", "nic_gbps=200,400", "--vary", "oversubscription=1,2",
                 "--plot", str(tmp_path / "sweep.png")]) == 0  # fmt: skip
    lines = {tuple(r[s] for s in drawn["series"]) for r in drawn["rows"]}
    assert len(lines) == 6 * 2
    for line in lines:
        points = [r["nic_gbps"] for r in drawn["rows"] if tuple(r[s] for s in drawn["series"]) == line]
        assert sorted(points) == [200, 400], (line, points)


def test_python_m_refit_compare_json_and_timeline(tmp_path: Path, cli_json: Any) -> None:
    args = ["--model", "qwen3-30b-a3b", "--train", "ep=8,pp=2", "--infer", "tp=8,engines=2", "--cluster", "dgx-h100"]
    done = _python_m_refit("compare", *args, "--json", "--plot", str(tmp_path / "c.png"))
    assert done.returncode == 0, done.stderr
    import json

    got, want = json.loads(done.stdout), cli_json("simulate", "--compare", *args)
    untimed = [{k: v for k, v in r.items() if not k.endswith("seconds")} for r in want["strategies"]]
    assert [{k: v for k, v in r.items() if not k.endswith("seconds")} for r in got["strategies"]] == untimed
    _png(tmp_path / "c.png")
    done = _python_m_refit("timeline", *args, "--plot", str(tmp_path / "t.png"))
    assert done.returncode == 0, done.stderr
    _png(tmp_path / "t.png")


def test_python_m_refit_bad_input_exits_2_with_the_message() -> None:
    done = _python_m_refit("sweep", "--model", "qwen3-30b-a3b", "--train", "ep=8,pp=2", "--infer", "tp=8,engines=2",
                           "--cluster", "dgx-h100", "--vary", "nic_speed=1")  # fmt: skip
    assert done.returncode == 2
    # The library's message, as refit sweep prints it.
    assert done.stderr.strip().startswith("refit sweep: error: --vary nic_speed: unknown key (expected one of: ")
    done = _python_m_refit("compare", "--model", "nope", "--train", "tp=1", "--infer", "tp=1")
    assert done.returncode == 2
    assert "refit compare: error: --model: unknown model 'nope'" in done.stderr


def test_python_m_refit_checks_its_options_and_files_before_any_work(tmp_path: Path, capsys: Any) -> None:
    # Each once ended in a traceback (exit 1) after the work: IsADirectoryError, IndexError (no
    # rows to take the CSV's columns from), ZeroDivisionError, numpy's MemoryError,
    # FileNotFoundError; --bins -4 said "Number of samples, -3" without naming --bins.
    from refit.__main__ import main

    problem = ["--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2", "--cluster", "cpu-host"]
    sweep = ["sweep", *problem, "--vary", "copy_gbps=100,200"]
    timeline = ["timeline", *problem, "--plot", str(tmp_path / "t.png")]
    cases = [
        ([*sweep, "--csv", str(tmp_path)], f"refit sweep: error: --csv: {tmp_path}: is a directory, not a file"),
        ([*sweep, "--strategy", "bogus", "--csv", str(tmp_path / "f.csv")],
         "refit sweep: error: --strategy: unknown strategy 'bogus' (expected refit, direct, m2n-ring, "
         "gather-broadcast)"),
        ([*sweep, "--x", "nic_gbps"], "refit sweep: error: --x: nic_gbps is not a varied key (copy_gbps)"),
        (["sweep", *problem, "--vary", "copy_gbps=,"], "refit sweep: error: --vary copy_gbps: an empty value"),
        ([*timeline, "--bins", "0"], "refit timeline: error: --bins: 0 is not positive"),
        ([*timeline, "--bins", "-4"], "refit timeline: error: --bins: -4 is not positive"),
        ([*timeline, "--bins", "100000000"], "refit timeline: error: --bins: 100000000 is more than 10000"),
        (["compare", *problem, "--plot", "/nonexistent/x.png"],
         "refit compare: error: --plot: /nonexistent/x.png: cannot be created: No such file or directory"),
        (["compare", *problem, "--plot", str(tmp_path / "x.bogus")],
         f"refit compare: error: --plot: {tmp_path / 'x.bogus'}: matplotlib writes no '.bogus' files"),
        # A refused figure leaves no table behind: the CSV is created only once the figure is accepted.
        ([*sweep, "--csv", str(tmp_path / "s.csv"), "--plot", str(tmp_path / "s.bogus")],
         f"refit sweep: error: --plot: {tmp_path / 's.bogus'}: matplotlib writes no '.bogus' files"),
    ]  # fmt: skip
    for args, message in cases:
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert err.startswith(message), (args, err)
        assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written, nothing left empty
    assert main([*timeline, "--bins", "50"]) == 0
    assert (tmp_path / "t.png").read_bytes().startswith(PNG)


def test_python_m_refit_sweep_reads_values_as_refit_sweep_does(cli: Any, capsys: Any) -> None:
    # Python's int() and float() once read them: nodes=١ (an Arabic-Indic digit) as 1, 1_0 as 10,
    # " 5" as 5, and 1e-400 as 0.0, refused as "copy_gbps=0.0", a value never typed. The library
    # now reads the text as given, as it reads refit sweep's, and refuses it with its message.
    from refit.__main__ import main

    problem = ["--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2", "--cluster", "cpu-host"]
    cases = [
        (["--vary", "nodes=\u0661"], "--vary nodes: cpu-host: nodes=\u0661: expected an integer"),
        (["--vary", "nodes=1_0"], "--vary nodes: cpu-host: nodes=1_0: expected an integer"),
        (["--vary", "copy_gbps= 5"], "--vary copy_gbps: cpu-host: copy_gbps= 5: expected a number"),
        (["--vary", "copy_gbps=1e-400"], "--vary copy_gbps: cpu-host: copy_gbps=1e-400: expected a number"),
        (["--vary", "copy_gbps=1", "--vary", "copy_gbps=2"], "--vary copy_gbps: given twice"),
    ]
    for vary, message in cases:
        assert main(["sweep", *problem, *vary]) == 2, vary
        assert capsys.readouterr().err == f"refit sweep: error: {message}\n", vary
        done = cli("sweep", *problem, *vary)
        assert (done.returncode, done.stderr) == (2, f"refit sweep: error: {message}\n"), vary


def test_python_m_refit_integer_options_are_ascii_digits(capsys: Any) -> None:
    # argparse's type=int took " 5", "1_0" and digits of other scripts, which refit refuses.
    from refit.__main__ import main

    problem = ["--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2", "--cluster", "cpu-host"]
    sweep = ["sweep", *problem, "--vary", "copy_gbps=100"]
    cases = [([*sweep, "--window", " 5"], "--window", " 5"), ([*sweep, "--jobs", "1_0"], "--jobs", "1_0"),
             (["compare", *problem, "--window", "\u0662"], "--window", "\u0662"),
             (["timeline", *problem, "--plot", "t.png", "--bins", "5.0"], "--bins", "5.0")]  # fmt: skip
    for args, option, text in cases:
        with pytest.raises(SystemExit) as stopped:
            main(args)
        assert stopped.value.code == 2, args
        assert f"error: argument {option}: expected an integer, got {text!r}" in capsys.readouterr().err


def test_python_m_refit_refuses_an_option_given_empty(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    # Each read as not given: --csv '' wrote no table, --cluster-file '' and --cluster '' predicted
    # on dgx-h100, --manifest '' asked for --model. refit refuses --quantize '' so.
    from refit.__main__ import main

    monkeypatch.chdir(tmp_path)
    model = ["--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2"]
    sweep = ["sweep", *model, "--cluster", "cpu-host", "--vary", "copy_gbps=100"]
    cases = [
        ([*sweep, "--csv", ""], "refit sweep: error: --csv: is empty"),
        ([*sweep, "--csv", "s.csv", "--x", ""], "refit sweep: error: --x: is empty"),
        (["compare", *model, "--cluster-file", ""], "refit compare: error: --cluster-file: is empty"),
        (["compare", *model, "--nccl-topo-xml", ""], "refit compare: error: --nccl-topo-xml: is empty"),
        (["compare", *model, "--cluster", ""], "refit compare: error: --cluster: is empty"),
        (["compare", "--manifest", "", "--cluster", "cpu-host"], "refit compare: error: --manifest: is empty"),
        (["compare", *model, "--cluster", "cpu-host", "--dtype", ""], "refit compare: error: --dtype: is empty"),
        (["timeline", *model, "--plot", ""], "refit timeline: error: --plot: is empty"),
    ]
    for args, message in cases:
        assert main(args) == 2, args
        assert capsys.readouterr().err == message + "\n", args
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_sweep_value_is_one_value_not_more_overrides() -> None:
    # "5,nic_gbps=1" for copy_gbps joined the preset's overrides as two, and set nic_gbps too.
    for vary in ({"copy_gbps": ["5,nic_gbps=1"]}, {"nodes": [1, "2,gpus_per_domain=4"]}):
        key, values = next(iter(vary.items()))
        message = f"vary: {key}: {values[-1]!r} holds a ','"
        with pytest.raises(refit.BadInput, match=re.escape(message)):
            refit.sweep(QWEN, refit.Cluster.preset("dgx-h100"), vary)
    # A layout holds commas of its own.
    rows = refit.sweep(QWEN, refit.Cluster.preset("dgx-h100"), {"train": ["ep=8,pp=2"]}, strategies=["refit"],
                       as_frame=False)  # fmt: skip
    assert [r["train"] for r in rows] == ["ep=8,pp=2"]


def test_timeline_bins_are_checked_naming_them() -> None:
    sim = refit.simulate(QWEN, refit.Cluster.preset("dgx-h100"), trace=True)
    for bins, message in [(0, "bins: 0 is not positive"), (figures.MAX_BINS + 1, "bins: 10001 is more than 10000"),
                          (2.5, "bins: expected an integer, got 2.5")]:  # fmt: skip
        with pytest.raises(refit.BadInput, match=re.escape(message)):
            figures.nic_timeline(sim, bins=bins)


def test_figures_name_an_argument_of_the_wrong_kind() -> None:
    # Each was an AttributeError or a KeyError from inside; series="strategy" was read letter by
    # letter (KeyError 's').
    rows = refit.sweep(QWEN, refit.Cluster.preset("dgx-h100"), vary={"nic_gbps": [200, 400]},
                       strategies=["refit"], as_frame=False)  # fmt: skip
    none: Any = None
    cases: list[tuple[Any, type, str]] = [
        (lambda: figures.timeline(none), TypeError, "simulation: expected a Simulation, got NoneType"),
        (lambda: figures.nic_timeline(none), TypeError, "simulation: expected a Simulation, got NoneType"),
        (lambda: figures.compare([{"strategy": "x"}]), TypeError, "rows[0] (refit.compare's): expected a Simul"),
        (lambda: figures.save(none, io.BytesIO()), TypeError, "fig: expected a Figure, got NoneType"),
        (lambda: figures.sweep(rows, "nodes"), refit.BadInput, "x: no column 'nodes' in the rows (columns: nic_gbps"),
        (lambda: figures.sweep(rows, "nic_gbps", y="bogus"), refit.BadInput, "y: no column 'bogus' in the rows"),
        (lambda: figures.sweep(rows, "nic_gbps", series="strategy"), refit.BadInput,
         "series: a list of columns, not one string 'strategy'"),
        (lambda: figures.sweep(rows, "nic_gbps", series=["strategy", "bogus"]), refit.BadInput,
         "series[1]: no column 'bogus' in the rows"),
        (lambda: figures.sweep([5], "nic_gbps"), TypeError, "rows[0] (a sweep's row or a refit.Simulation): "
                                                            "expected a Mapping, got int"),
    ]  # fmt: skip
    for call, kind, message in cases:
        with pytest.raises(kind, match=re.escape(message)):
            call()
    drawn = figures.sweep(rows, "nic_gbps", y="lower_bound_s", series=["strategy"])
    assert drawn.axes[0].get_ylabel() == "lower_bound_s"


def test_dpi_is_checked_before_the_file_is_opened(tmp_path: Path) -> None:
    # 0 and nan were matplotlib's errors after the file was opened, leaving it empty; 100000 dpi
    # asked for a canvas of 14 GB.
    fig = figures.compare(refit.compare(QWEN, refit.Cluster.preset("dgx-h100"), strategies=["refit"]))
    for dpi, message in [(0, "dpi: 0.0 is not in (0, 2400]"), (-1, "dpi: -1.0 is not in (0, 2400]"),
                         (math.nan, "dpi: nan is not in (0, 2400]"), (math.inf, "dpi: inf is not in (0, 2400]"),
                         (100_000, "dpi: 100000.0 is not in (0, 2400]"), ("300", "dpi: expected a number of dots "
                                                                                 "per inch, got '300'"),
                         (True, "dpi: expected a number of dots per inch, got True")]:  # fmt: skip
        for path in (tmp_path / "f.png", io.BytesIO()):
            with pytest.raises(refit.BadInput, match=re.escape(message)):
                figures.save(fig, path, dpi=dpi)
    assert list(tmp_path.iterdir()) == []  # nothing opened, nothing left empty
    figures.save(fig, tmp_path / "f.png", dpi=72.5)
    _png(tmp_path / "f.png")
