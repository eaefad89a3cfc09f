"""Planning and prediction from Python give what the refit command's --json gives on the same
inputs: every field, with the same values (timings aside, which are measured each run)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import refit
from conftest import DATA, TINY_MOE

TIMINGS = {"plan_seconds", "simulate_seconds"}
QWEN = ("qwen3-30b-a3b", "ep=8,pp=2", "tp=8,engines=2")


def _untimed(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in TIMINGS}


def _problem_args(model: str, train: str, infer: str) -> list[str]:
    return ["--model", model, "--train", train, "--infer", infer]


@pytest.mark.parametrize("strategy", [s.name for s in refit.strategies()])
def test_plan_json_fields_and_values(cli_json: Any, strategy: str) -> None:
    expected = cli_json("plan", *_problem_args(*QWEN), "--cluster", "dgx-h100", "--strategy", strategy)
    problem = refit.Problem.from_model(QWEN[0], train=QWEN[1], infer=QWEN[2])
    stats = dataclasses.asdict(refit.plan(problem, refit.Cluster.preset("dgx-h100"), strategy).stats)
    assert set(expected) <= set(stats)  # every field the command has
    assert _untimed(expected) == {k: stats[k] for k in _untimed(expected)}
    assert stats["plan_seconds"] > 0


def test_plan_explain_json(cli_json: Any) -> None:
    expected = cli_json("plan", *_problem_args(*QWEN), "--cluster", "dgx-h100", "--explain", "20")
    problem = refit.Problem.from_model(QWEN[0], train=QWEN[1], infer=QWEN[2])
    stats = refit.plan(problem, refit.Cluster.preset("dgx-h100")).explain(20)
    explain = dataclasses.asdict(stats.explain)
    text = explain.pop("text")
    assert explain == expected["explain"]
    assert "rank 20" in text


def _compare_rows(expected: dict[str, Any], rows: list[refit.Simulation]) -> None:
    assert [r["strategy"] for r in expected["strategies"]] == [r.strategy for r in rows]
    for want, got in zip(expected["strategies"], rows):
        d = dataclasses.asdict(got)
        assert set(want) <= set(d), set(want) - set(d)
        assert _untimed(want) == {k: d[k] for k in _untimed(want)}
        assert (d["cluster"], d["lower_bound_s"], d["lower_bound_binding"]) == (
            expected["cluster"], expected["lower_bound_s"], expected["lower_bound_binding"])  # fmt: skip


def test_simulate_compare_json(cli_json: Any) -> None:
    cluster = "gb200-nvl72:gpus_per_domain=64"
    expected = cli_json("simulate", "--compare", *_problem_args(*QWEN), "--cluster", cluster)
    problem = refit.Problem.from_model(QWEN[0], train=QWEN[1], infer=QWEN[2])
    _compare_rows(expected, refit.compare(problem, refit.Cluster.preset(cluster)))


def test_simulate_one_strategy_with_a_window_on_a_manifest(cli_json: Any, tmp_path: Path) -> None:
    source = refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2")
    source.save_manifest(tmp_path / "tiny.json")
    args = ["--manifest", str(tmp_path / "tiny.json"), "--cluster", "cpu-host:gpus_per_domain=2"]
    problem = refit.Problem.from_manifest(tmp_path / "tiny.json")
    cluster = refit.Cluster.preset("cpu-host:gpus_per_domain=2")
    for strategy, window in (("direct", "0"), ("gather-broadcast", "4")):
        expected = cli_json("simulate", *args, "--strategy", strategy, "--window", window)
        _compare_rows(expected, [refit.simulate(problem, cluster, strategy, window=int(window))])


def test_simulate_a_baseline_with_fp8_runs_as_deployed_in_both(cli_json: Any) -> None:
    # One prediction use case: a deployed baseline runs the problem quantized at the receivers in
    # Python as in the command (Python used to predict the landing plan as NeMo RL runs it).
    blocks = str(DATA / "models" / "small-llama-blocks.json")
    args = [*_problem_args(blocks, "tp=2", "tp=2,dp=2"), "--cluster", "dgx-h100:gpus_per_node=2", "--quantize",
            "fp8-block128", "--strategy", "direct"]  # fmt: skip
    expected = cli_json("simulate", *args)
    problem = refit.Problem.from_model(blocks, train="tp=2", infer="tp=2,dp=2", quantize="fp8-block128")
    got = refit.simulate(problem, refit.Cluster.preset("dgx-h100:gpus_per_node=2"), "direct")
    assert "quantized at the receiver, bf16 on the network, as deployed today" in got.notes
    _compare_rows(expected, [got])


def test_a_deployment_that_moves_part_of_the_model_says_so_in_both(cli_json: Any) -> None:
    # m2n-bench times one representative per layer pattern and stage: its row reports the bytes it
    # moves and their bound, in Python as in the command.
    args = [*_problem_args(str(TINY_MOE), "tp=2,ep=2,etp=1", "tp=2"), "--cluster", "dgx-h100",
            "--strategy", "m2n-ring", "--deployment", "m2n-bench"]  # fmt: skip
    expected = cli_json("simulate", *args)
    problem = refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2")
    with pytest.warns(UserWarning, match="m2n-bench times one representative"):
        got = refit.simulate(problem, refit.Cluster.preset("dgx-h100"), "m2n-ring", deployment="m2n-bench")
    assert got.moved_bytes is not None and got.moved_bytes < problem.total_bytes
    assert got.predicted_s >= got.moved_lower_bound_s
    _compare_rows(expected, [got])


def test_simulate_a_saved_plan_on_a_cluster_file(cli_json: Any, tmp_path: Path) -> None:
    problem = refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2")
    cluster = refit.Cluster.from_file(DATA / "topology" / "cluster_small.json")
    plan = refit.plan(problem, cluster, "m2n-ring")
    plan.save(tmp_path / "plan.json")
    expected = cli_json("simulate", *_problem_args(str(TINY_MOE), "tp=2,ep=2,etp=1", "tp=2"),
                        "--cluster-file", str(DATA / "topology" / "cluster_small.json"),
                        "--plan", str(tmp_path / "plan.json"))  # fmt: skip
    _compare_rows(expected, [refit.simulate(refit.Plan.load(tmp_path / "plan.json", problem, cluster))])


def test_cluster_description_is_refit_topo_json(cli_json: Any) -> None:
    import json

    problem = refit.Problem.from_model(QWEN[0], train=QWEN[1], infer=QWEN[2])
    expected = cli_json("topo", "--cluster", "gb200-nvl72:gpus_per_domain=64",
                        "--train-ranks", str(problem.source_ranks),
                        "--infer-ranks", str(problem.destination_ranks))  # fmt: skip
    got = refit.Cluster.preset("gb200-nvl72:gpus_per_domain=64").describe(problem)
    assert json.loads(json.dumps(got)) == expected


def test_discovery_without_gpus_models_the_host_as_the_command_does(cli: Any) -> None:
    import json

    problem = refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2")
    options = ["--nvml-library", "libnvidia-ml-absent.so", "--sysfs-root", "/nonexistent"]
    done = cli("topo", "--discover", *options, "--train-ranks", "2", "--infer-ranks", "2", "--json")
    assert done.returncode == 0, done.stderr
    cluster = refit.Cluster.discover(nvml_library="libnvidia-ml-absent.so", sysfs_root="/nonexistent")
    assert cluster.describe(problem) == json.loads(done.stdout)
    notes = [line.removeprefix("refit: discover: ") for line in done.stderr.splitlines()]
    assert cluster.placed(problem).notes == notes
    assert any("no NVIDIA GPU" in n for n in cluster.notes)
    assert refit.simulate(problem, cluster).predicted_s > 0


def test_simulate_at_a_staging_size_as_the_command(cli_json: Any) -> None:
    # The executors cut messages into chunks by their staging (refit run --staging); the prediction
    # follows it in Python as in the command, and a smaller staging changes it.
    blocks = str(DATA / "models" / "small-llama-blocks.json")
    args = [*_problem_args(blocks, "tp=2", "tp=4"), "--cluster", "dgx-h100:gpus_per_node=2"]
    expected = cli_json("simulate", *args, "--staging", "65536")
    problem = refit.Problem.from_model(blocks, train="tp=2", infer="tp=4")
    cluster = refit.Cluster.preset("dgx-h100:gpus_per_node=2")
    small = refit.simulate(problem, cluster, staging_bytes=65536)
    _compare_rows(expected, [small])
    assert small.predicted_s != refit.simulate(problem, cluster).predicted_s
    assert [r.predicted_s for r in refit.compare(problem, cluster, strategies=["refit"], staging_bytes=65536)] == [
        small.predicted_s]  # fmt: skip
    # The least staging holds one 16-byte chunk in each half, as the command and the executors take it.
    for too_small in (0, 31):
        with pytest.raises(ValueError, match=f"staging_bytes: {too_small} bytes is less than 32"):
            refit.simulate(problem, cluster, staging_bytes=too_small)
    assert refit.simulate(problem, cluster, staging_bytes=32).predicted_s > 0
