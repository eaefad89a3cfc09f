#!/usr/bin/env python3
"""The calibration matrix: how far refit's predictions for this host are from what refit does here.

Calibrates once per process count of the matrix (``mpirun -np P refit calibrate``, launched as the
jobs it predicts: on a host with fewer cores than processes, what P processes reach together is
part of the hardware), then for each row of the matrix predicts the refit with the cluster file
calibrated at its process count (``refit simulate --cluster-file ... --deployment refit
--json``: refit's own executors running the plan) and measures it (``mpirun -np P refit run
--cluster-file ... --iterations N --json``: the median iteration). Both plan with the same cluster
file, so they run the same plan. Prints predicted/measured per row and the median of the ratios,
and writes them as a Markdown table. Nothing is fitted to the rows: every constant of the
prediction is the calibration's. Each row is also predicted on the same file without its cache
(``caches``: the in-cache line, which applies to refits whose shards fit), to show what the
second line changes.

Run by hand (not by ./test), on a quiet machine:

    bench/calibration_matrix.py [--build build/release] [--iterations 9] [--within-cores] [--calibrate-per-row]
                                [--rounds 1] [--out matrix.md]

``--within-cores`` leaves out the jobs of more processes than this host has cores: the goal is
judged on the jobs within the cores, and the jobs beyond them are measured to show what the
model of oversubscription misses (docs/guide/predicting.md).

``--calibrate-per-row`` calibrates again right before each row instead of once per process count.
On a shared host what one pair reaches varies by a quarter within minutes (9.1-11.6 GB/s over
25 calibrations in 4 minutes here, bench/RESULTS.md), which moves every prediction made from one
calibration alike; calibrating per row measures the model against the machine as it is when the
row runs.

``--rounds R`` passes over the whole matrix R times, so that a row's rounds are minutes apart, and
gives each row the median of its rounds' predicted/measured (with ``--calibrate-per-row`` each
round's prediction comes from a calibration made right before it; without, every round uses the
one calibration per process count). One pass judges the model and one draw of the host together;
the median of paired rounds is the model against the host as it usually is. The table's
predicted and measured milliseconds are each the median of the rounds' own, so their quotient
need not be the ratio column, which is the median of the rounds' ratios. The verdicts also judge
the first round alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "bench" / "calibration_models"
TESTS = ROOT / "tests" / "data" / "models"
STRATEGIES = ("refit", "direct", "m2n-ring", "gather-broadcast")


@dataclass(frozen=True)
class Row:
    """One refit of the matrix: a model, its two layouts and a strategy."""

    model: Path
    train: str
    infer: str
    processes: int
    strategy: str
    quantize: str = ""  # an FP8 format in flight, or bf16 throughout

    def problem_args(self) -> list[str]:
        """The PROBLEM options every command of this row takes."""
        fp8 = ["--quantize", self.quantize] if self.quantize else []
        return ["--model", str(self.model), "--train", self.train, "--infer", self.infer, *fp8]


def matrix() -> list[Row]:
    """Every strategy on several layouts (2 to 8 processes) and sizes (about 0.4 MB to 1 GB): first
    jobs of 2 processes, within a 2-core host's cores (every strategy on dense, MoE and MLA models),
    then jobs of 4 to 8, beyond them; last, FP8 in flight (the training ranks quantize on their
    CPUs)."""
    layouts = [
        (TESTS / "tiny-deepseek-v3.json", "tp=1", "tp=1", 2, ("refit",)),
        (TESTS / "small-llama-blocks.json", "tp=1", "tp=1", 2, STRATEGIES),
        (TESTS / "small-qwen3-moe-blocks.json", "tp=1", "tp=1", 2, ("refit", "direct")),
        (MODELS / "medium-llama.json", "tp=1", "tp=1", 2, STRATEGIES),
        (MODELS / "medium-qwen3-moe.json", "tp=1", "tp=1", 2, STRATEGIES),
        (MODELS / "large-llama.json", "tp=1", "tp=1", 2, STRATEGIES),
        (TESTS / "mid-qwen3.json", "tp=1", "tp=1", 2, ("refit", "m2n-ring")),
        (MODELS / "medium-llama.json", "tp=2", "tp=2", 4, STRATEGIES),
        (MODELS / "medium-llama.json", "pp=2", "tp=2", 4, STRATEGIES),
        (MODELS / "medium-llama.json", "tp=2,pp=2", "tp=4", 8, STRATEGIES),
        (TESTS / "small-llama-blocks.json", "tp=2", "tp=4", 6, STRATEGIES),
        (MODELS / "large-llama.json", "tp=2", "tp=2", 4, ("refit", "gather-broadcast")),
        (MODELS / "large-llama.json", "tp=4", "tp=2,engines=2", 8, ("refit", "direct")),
        (MODELS / "medium-qwen3-moe.json", "tp=2,ep=2,etp=1", "tp=2,dp=2", 6, ("refit", "m2n-ring")),
    ]
    fp8 = [Row(MODELS / "medium-llama.json", "tp=1", "tp=1", 2, "refit", "fp8-block128"),
           Row(MODELS / "medium-llama.json", "tp=1", "tp=1", 2, "gather-broadcast", "mxfp8"),
           Row(MODELS / "medium-qwen3-moe.json", "tp=1", "tp=1", 2, "direct", "mxfp8"),
           Row(TESTS / "small-qwen3-moe-blocks.json", "tp=1", "tp=1", 2, "m2n-ring", "fp8-block128"),
           Row(MODELS / "medium-llama.json", "tp=2", "tp=2", 4, "refit", "fp8-block128")]
    return [Row(m, t, i, p, s) for (m, t, i, p, strategies) in layouts for s in strategies] + fp8


def run_json(command: list[str]) -> dict:
    """Runs a refit command that prints one JSON object; exits naming it when it fails."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr}")
    return json.loads(done.stdout)


def mpirun(processes: int) -> list[str]:
    """mpirun with more processes than cores allowed, and every job placed alike: Open MPI binds the
    ranks of a job of at most 2 processes to cores and leaves larger ones to the scheduler, which
    on 2 busy cores made one pair up to 2x slower bound than free, calibration and rows alike."""
    return ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(processes)]


def calibrate(refit: str, cluster: Path, processes: int) -> dict:
    """One calibration of this host by `processes` processes, written to `cluster`."""
    return run_json([*mpirun(processes), refit, "calibrate", "--out", str(cluster), "--overwrite",
                     "--repetitions", "9", "--json"])  # fmt: skip


def predicted(refit: str, cluster: Path, row: Row) -> dict:
    """The row's prediction as refit's executors run its plan."""
    out = run_json([refit, "simulate", *row.problem_args(), "--cluster-file", str(cluster),
                    "--strategy", row.strategy, "--deployment", "refit", "--json"])
    return out["strategies"][0]


def measured(refit: str, cluster: Path, row: Row, iterations: int) -> dict:
    """The row performed: the median of `iterations` executions of one prepared plan."""
    return run_json([*mpirun(row.processes), refit, "run", *row.problem_args(), "--cluster-file", str(cluster),
                     "--strategy", row.strategy, "--iterations", str(iterations), "--json"])


def without_cache(cluster: Path) -> Path:
    """A copy of a calibrated cluster file without its cache: every refit at the streaming figures."""
    spec = json.loads(cluster.read_text())
    spec.pop("caches", None)
    out = cluster.with_suffix(".streaming.json")
    out.write_text(json.dumps(spec))
    return out


def summary(cal: dict) -> str:
    """The calibration in one line."""
    cache = cal.get("cache")
    in_cache = (f"; in cache {cache['latency_s'] * 1e6:.1f} us, {cache['chunk_overhead_s'] * 1e6:.1f} us per chunk, "
                f"{cache['transfer_overhead_s'] * 1e6:.1f} us per transfer, "
                f"{cache['pair_gbps']:.2f} GB/s, memcpy {cache['memcpy_gbps']:.2f} GB/s" if cache else "")
    return (f"calibration: latency {cal['latency_s'] * 1e6:.1f} us, {cal['chunk_overhead_s'] * 1e6:.1f} us per "
            f"chunk, {cal['transfer_overhead_s'] * 1e6:.1f} us per transfer, pair {cal['pair_gbps']:.2f} GB/s (worst point "
            f"{cal['fit_worst_relative_residual'] * 100:.1f} % off the fit), host {cal['host_gbps']:.2f} GB/s, "
            f"memcpy {cal['memcpy_gbps']:.2f} GB/s{in_cache}; {cal['processes']} processes on {cal['cores']} cores")


def summary_range(cals: list[dict]) -> str:
    """Several calibrations of one process count in one line: the range of each constant."""
    def span(key: str, scale: float, unit: str) -> str:
        values = [c[key] * scale for c in cals]
        return f"{min(values):.1f}-{max(values):.1f} {unit}"

    return (f"{len(cals)} calibrations of {cals[0]['processes']} processes: latency {span('latency_s', 1e6, 'us')}, "
            f"{span('chunk_overhead_s', 1e6, 'us')} per chunk, {span('transfer_overhead_s', 1e6, 'us')} per transfer, "
            f"pair {span('pair_gbps', 1, 'GB/s')}, "
            f"memcpy {span('memcpy_gbps', 1, 'GB/s')}")


@dataclass
class RowResult:
    """One row of the matrix over its rounds: each round's prediction and measurement."""

    row: Row
    predictions: list[dict]
    measurements: list[dict]

    def ratios(self, key: str = "predicted_s") -> list[float]:
        """predicted / measured, round by round, of the prediction under `key`."""
        return [p[key] / m["seconds"] for p, m in zip(self.predictions, self.measurements)]

    def ratio(self, key: str = "predicted_s") -> float:
        """The row's figure: the median over its rounds of predicted / measured."""
        return statistics.median(self.ratios(key))

    def first_round(self) -> RowResult:
        """The row as one pass of the matrix measured it."""
        return RowResult(self.row, self.predictions[:1], self.measurements[:1])


def table(results: list[RowResult]) -> list[str]:
    """Markdown: one line per row, predicted against measured (medians over the rounds)."""
    lines = ["| model | train -> infer | processes | strategy | MB moved | predicted ms | measured ms | "
             "rounds' ratios | predicted / measured | streaming line only |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        row, ratios = r.row, r.ratios()
        lines.append(f"| {row.model.stem}{' ' + row.quantize if row.quantize else ''} | {row.train} -> {row.infer} | "
                     f"{row.processes} | {row.strategy} | {r.measurements[0]['bytes'] / 1e6:.1f} | "
                     f"{statistics.median(p['predicted_s'] for p in r.predictions) * 1e3:.2f} | "
                     f"{statistics.median(m['seconds'] for m in r.measurements) * 1e3:.2f} | "
                     f"{min(ratios):.3f}-{max(ratios):.3f} | {r.ratio():.3f} | {r.ratio('streaming_s'):.3f} |")
    return lines


def verdict(name: str, results: list[RowResult], key: str = "predicted_s") -> str:
    """How many of `results` are within +-15 % and the median ratio, of the prediction under `key`."""
    ratios = [r.ratio(key) for r in results]
    if not ratios:
        return f"{name}: no rows"
    within = sum(1 for x in ratios if abs(x - 1) <= 0.15)
    return f"{name}: {len(results)} rows; within +-15 %: {within}; median predicted/measured: " \
           f"{statistics.median(ratios):.3f}"


def verdicts(results: list[RowResult], cores: int) -> list[str]:
    """The goal judged on every row, on the jobs within this host's cores and on those beyond, and,
    where there were several rounds, on the first round alone."""
    within = [r for r in results if r.row.processes <= cores]
    lines = [verdict("all", results),
             verdict(f"within the {cores} cores", within),
             verdict(f"beyond the {cores} cores", [r for r in results if r.row.processes > cores]),
             verdict(f"within the {cores} cores, the streaming line only", within, "streaming_s")]
    if results and len(results[0].predictions) > 1:
        lines.append(verdict(f"within the {cores} cores, the first round alone", [r.first_round() for r in within]))
    return lines


def run_rows(refit: str, chosen: list[Row], iterations: int, per_row: bool, rounds: int,
             work: Path) -> tuple[list[RowResult], dict[int, list[dict]]]:
    """Calibrates (once per process count, or before each row), then predicts and measures every
    row, the whole matrix `rounds` times over (so that each row's rounds are minutes apart, as the
    host drifts); returns the rows and the calibrations by process count."""
    calibrations: dict[int, list[dict]] = {}

    def calibrated(processes: int) -> None:
        calibrations.setdefault(processes, []).append(calibrate(refit, work / f"host-{processes}.json", processes))
        print(summary(calibrations[processes][-1]), file=sys.stderr)

    if not per_row:
        for processes in sorted({row.processes for row in chosen}):
            calibrated(processes)
    results = [RowResult(row, [], []) for row in chosen]
    for round_ in range(rounds):
        for result in results:
            row = result.row
            if per_row:
                calibrated(row.processes)
            cluster = work / f"host-{row.processes}.json"
            p, m = predicted(refit, cluster, row), measured(refit, cluster, row, iterations)
            p["streaming_s"] = predicted(refit, without_cache(cluster), row)["predicted_s"]
            result.predictions.append(p)
            result.measurements.append(m)
            print(f"round {round_ + 1} of {rounds}: {row.model.stem} {row.train} -> {row.infer} {row.strategy}: "
                  f"predicted {p['predicted_s'] * 1e3:.2f} ms, measured {m['seconds'] * 1e3:.2f} ms", file=sys.stderr)
    return results, calibrations


def main() -> None:
    """Calibrates, predicts and measures every row, prints the table and the summary."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=str(ROOT / "build" / "release"))
    parser.add_argument("--iterations", type=int, default=9)
    parser.add_argument("--within-cores", action="store_true",
                        help="only the jobs of at most as many processes as this host has cores")
    parser.add_argument("--calibrate-per-row", action="store_true",
                        help="calibrate right before each row instead of once per process count")
    parser.add_argument("--rounds", type=int, default=1,
                        help="passes over the whole matrix; each row's figure is the median of its rounds")
    parser.add_argument("--out", help="also write the table (Markdown) here")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds: must be >= 1, got {args.rounds}")
    cores = len(os.sched_getaffinity(0))
    chosen = [row for row in matrix() if row.processes <= cores or not args.within_cores]
    refit = str(Path(args.build) / "cli" / "refit")
    if os.geteuid() == 0:
        os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    with tempfile.TemporaryDirectory() as work:
        results, calibrations = run_rows(refit, chosen, args.iterations, args.calibrate_per_row, args.rounds,
                                         Path(work))
    lines = [*table(results), "",
             *(summary(c[0]) if len(c) == 1 else summary_range(c) for _, c in sorted(calibrations.items())), "",
             *verdicts(results, cores),
             f"load average at the end: {os.getloadavg()}"]
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
