#!/usr/bin/env python3
"""How far refit's plans are from their bound, on a draw of realistic problems.

Draws problems by seed (a built-in model, a Megatron training layout, a number of vLLM engines of
some TP, a cluster preset, colocated or apart), runs ``refit simulate --compare --json`` on each with
one or two builds of refit, and prints per build: the median predicted / lower bound of refit's own
plan as its executors run it, how many rows are within 1.05x, 1.5x and 2x of the bound (of the
second build's bound when two are given, so that both are judged alike), and in how many rows a
baseline's plan run by refit's executors (direct, m2n-ring) is faster. With two builds it also
prints every row whose prediction moved by more than 0.1 %, and the geometric mean of the ratios.

Run by hand (not by ./test); each problem takes from 0.1 to 40 s:

    bench/plan_quality_scan.py --refit build/release/cli/refit [--vs OTHER/refit] [--seeds 0:60]
                               [--out rows.jsonl]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
from dataclasses import dataclass

MODELS = {"qwen3-8b": False, "llama-3.1-8b": False, "qwen3-30b-a3b": True, "qwen3-235b-a22b": True,
          "llama-3.1-405b": False}  # name -> mixture of experts
CLUSTERS = ["dgx-h100", "dgx-h200", "gb200-nvl72", "dgx-h100:infer_offset=0"]


@dataclass(frozen=True)
class Row:
    """One problem as one build predicts it, in seconds."""

    args: str
    bound_s: float
    refit_s: float
    best_baseline_s: float | None


def problem_args(seed: int) -> list[str]:
    """The ``refit simulate`` problem and cluster of draw ``seed``."""
    r = random.Random(seed)
    model = r.choice(list(MODELS))
    tp, pp = r.choice([1, 2, 4, 8]), r.choice([1, 2, 4])
    if MODELS[model]:
        ep = r.choice([4, 8, 16])
        train = f"tp={tp},pp={pp},ep={ep},etp=1,dp={max(1, ep // tp) * r.choice([1, 2])}"
    else:
        train = f"tp={tp},pp={pp},dp={r.choice([1, 2, 4])}"
    infer = f"tp={r.choice([1, 2, 4, 8])},engines={r.choice([2, 4, 8, 16])}"
    return ["--model", model, "--train", train, "--infer", infer, "--cluster", r.choice(CLUSTERS)]


def predict(refit: str, args: list[str]) -> Row | None:
    """refit's plan and the baselines' as refit's executors run them; None where refit refuses it."""
    done = subprocess.run([refit, "simulate", *args, "--compare", "--json", "--jobs", "1"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return None
    rows = json.loads(done.stdout)["strategies"]
    mine = next(s for s in rows if s["strategy"] == "refit" and s["deployment"] == "refit")
    others = [s["predicted_s"] for s in rows if s["deployment"] == "refit" and s["strategy"] != "refit"]
    return Row(" ".join(args), mine["lower_bound_s"], mine["predicted_s"], min(others, default=None))


def summary(name: str, rows: dict[int, Row], bounds: dict[int, Row]) -> None:
    """Prints how far `rows` are from the bounds of `bounds` (the same seeds)."""
    ratios = [rows[k].refit_s / bounds[k].bound_s for k in rows if bounds[k].bound_s > 0]
    beaten = sum(1 for r in rows.values() if r.best_baseline_s and r.refit_s > r.best_baseline_s * 1.0001)
    within = ", ".join(f"{sum(x <= t for x in ratios)} within {t}x" for t in (1.05, 1.5, 2.0))
    print(f"{name}: {len(rows)} problems, median {statistics.median(ratios):.4f}x the bound, {within}; "
          f"a baseline faster in {beaten}")


def compare(rows: dict[int, Row], base: dict[int, Row]) -> None:
    """Prints every problem whose prediction moved by more than 0.1 %, and the geometric mean."""
    ratios = {k: rows[k].refit_s / base[k].refit_s for k in rows}
    for k, r in sorted(ratios.items(), key=lambda kv: kv[1]):
        if abs(r - 1) > 1e-3:
            print(f"  seed {k}: {r:.3f} ({base[k].refit_s * 1e3:.2f} -> {rows[k].refit_s * 1e3:.2f} ms) {rows[k].args}")
    print(f"geometric mean of the ratios: {statistics.geometric_mean(ratios.values()):.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refit", required=True, help="the refit binary to judge")
    parser.add_argument("--vs", help="a second refit binary, the baseline")
    parser.add_argument("--seeds", default="0:60", help="FIRST:END of the draws (default 0:60)")
    parser.add_argument("--out", help="also write each row as a JSON line here")
    a = parser.parse_args()
    first, end = (int(x) for x in a.seeds.split(":"))
    builds = {"refit": a.refit, **({"vs": a.vs} if a.vs else {})}
    rows: dict[str, dict[int, Row]] = {name: {} for name in builds}
    for seed in range(first, end):
        args = problem_args(seed)
        got = {name: predict(binary, args) for name, binary in builds.items()}
        if any(r is None for r in got.values()):
            continue
        for name, r in got.items():
            rows[name][seed] = r
        if a.out:
            with open(a.out, "a", encoding="utf-8") as f:
                f.write(json.dumps({"seed": seed, **{n: vars(r) for n, r in got.items()}}) + "\n")
    for name in builds:
        summary(name, rows[name], rows["refit"])
    if a.vs:
        compare(rows["refit"], rows["vs"])


if __name__ == "__main__":
    main()
