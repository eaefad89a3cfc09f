"""The package as a user meets it: installed from the wheel, the issue's spellings as written,
plain dataclasses back, type stubs shipped."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

import refit
from conftest import TINY_MOE


def test_imported_from_the_installed_wheel_not_the_source_tree() -> None:
    here = Path(refit.__file__).resolve()
    assert Path(sys.prefix).resolve() in here.parents, here
    package = here.parent
    # The compiled module, its stubs and the typing marker travel in the wheel.
    assert list(package.glob("_refit*.so"))
    assert (package / "_refit.pyi").read_text().startswith('"""')
    assert (package / "py.typed").exists()


def test_the_issue_spellings_plan_and_predict_deepseek_v3() -> None:
    problem = refit.Problem.from_model("deepseek-v3", train="pp=16,ep=16", infer="tp=32,engines=8")
    cluster = refit.Cluster.preset("dgx-h100")
    plan = refit.plan(problem, cluster, strategy="refit")
    assert problem.source_ranks == 256 and problem.destination_ranks == 256
    assert len(problem.tensors) == 1025
    # Lower bound 896.44 ms on dgx-h100 (README, "Planning"): the destination domains' NICs.
    assert plan.stats.lower_bound_s == pytest.approx(0.89644, rel=1e-4)
    assert plan.stats.lower_bound_binding == "destination domain NIC receive"
    predicted = refit.simulate(plan).predicted_s
    assert plan.stats.lower_bound_s <= predicted < 1.2 * plan.stats.lower_bound_s


def test_compare_gives_each_strategy_as_deployed_against_gather_broadcast() -> None:
    problem = refit.Problem.from_model("qwen3-30b-a3b", train="ep=8,pp=2", infer="tp=8,engines=2")
    rows = refit.compare(problem, refit.Cluster.preset("gb200-nvl72:gpus_per_domain=64"))
    assert [(r.strategy, r.deployment) for r in rows] == [
        ("refit", "refit"), ("direct", "nemo-rl"), ("direct", "refit"), ("m2n-ring", "nemo-rl"),
        ("m2n-ring", "refit"), ("gather-broadcast", "nemo-rl")]  # fmt: skip
    by = {(r.strategy, r.deployment): r for r in rows}
    assert by["gather-broadcast", "nemo-rl"].speedup_vs_gather_broadcast == 1.0
    # speed-up = baseline time / strategy time, as refit simulate --compare reports it.
    base = by["gather-broadcast", "nemo-rl"].predicted_s
    assert by["refit", "refit"].speedup_vs_gather_broadcast == base / by["refit", "refit"].predicted_s
    assert by["m2n-ring", "nemo-rl"].time_vs_refit == by["m2n-ring", "nemo-rl"].predicted_s / by["refit", "refit"].predicted_s
    assert by["m2n-ring", "nemo-rl"].breakdown_s.fixed > 0 and by["m2n-ring", "nemo-rl"].contributors
    assert all(r.cluster == "gb200-nvl72:gpus_per_domain=64" for r in rows)
    assert all(dataclasses.is_dataclass(r) for r in rows)
    assert all(r.predicted_s >= r.lower_bound_s for r in rows)


def test_an_impossible_deployment_is_bad_input_naming_both() -> None:
    problem = refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2")
    cluster = refit.Cluster.preset("dgx-h100")
    assert [name for name, _ in refit.deployments()] == ["refit", "nemo-rl", "m2n-bench", "m2n-bench-all", "refit-nccl"]
    with pytest.raises(refit.BadInput, match="deployment 'nemo-rl' does not run strategy 'refit'"):
        refit.simulate(problem, cluster, "refit", deployment="nemo-rl")
    with pytest.raises(refit.BadInput, match="unknown deployment 'slurm'"):
        refit.simulate(problem, cluster, "m2n-ring", deployment="slurm")
    assert refit.simulate(problem, cluster, "m2n-ring", deployment="m2n-bench").deployment == "m2n-bench"


def test_manifest_problems_and_their_shards(tmp_path: Path) -> None:
    source = refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2")
    source.save_manifest(tmp_path / "tiny.json")
    problem = refit.Problem.from_manifest(tmp_path / "tiny.json")
    assert problem.tensors == source.tensors
    assert (problem.source_ranks, problem.destination_ranks, problem.world_size) == (2, 2, 4)
    # Each inference rank (TP2) needs half of every TP-split tensor: the shards of a rank cover
    # their boxes, and the two ranks' bytes add up to every tensor's for the split ones.
    shards = {r: {s.tensor: s for s in problem.shards(r)} for r in (2, 3)}
    q = "model.layers.0.self_attn.q_proj.weight"
    assert shards[2][q].offset == (0, 0) and shards[3][q].offset == (32, 0)
    assert shards[2][q].extent == (32, 64) and shards[2][q].slices == (slice(0, 32), slice(0, 64))
    assert problem.is_training(1) and not problem.is_training(2)
    # The plan is the same whichever way the problem came in.
    cluster = refit.Cluster.preset("cpu-host")
    assert refit.plan(problem, cluster).hash == refit.plan(source, cluster).hash


def test_clusters_from_presets_files_and_nccl_dumps() -> None:
    problem = refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2")
    gb = refit.Cluster.preset("gb200-nvl72", gpus_per_domain=64)
    assert gb.spec == "gb200-nvl72:gpus_per_domain=64"
    assert gb.with_overrides(nic_gbps=800).spec == "gb200-nvl72:gpus_per_domain=64,nic_gbps=800"
    described = refit.Cluster.preset("dgx-h100").describe(problem)
    assert len(described["gpus"]) == 8 and described["placement"]["rank_to_gpu"] == [0, 1, 2, 3]
    from conftest import DATA

    assert refit.Cluster.from_file(DATA / "topology" / "cluster_small.json").describe()["gpus"]
    xml = refit.Cluster.from_nccl_xml(DATA / "topology" / "h100_8gpu_8nic.xml")
    assert refit.plan(problem, xml).stats.tensors == len(problem.tensors)


def test_a_cluster_says_what_it_assumed() -> None:
    # refit's kernels ran on an H100 SXM5: its preset assumes nothing; an H200's copy rate is the
    # H100's scaled by HBM line rate (1122 x 4.8 / 3.35 = 1608 GB/s), which the cluster says.
    assert refit.Cluster.preset("dgx-h100").assumptions == []
    (assumed,) = refit.Cluster.preset("dgx-h200").assumptions
    assert assumed.startswith("pack/unpack on the H200 is charged at 1608 GB/s")
    assert refit.Cluster.preset("dgx-h200", copy_gbps=1500).assumptions == []


def test_measuring_a_machine_without_a_gpu_says_there_is_nothing_to_time() -> None:
    # No NVML: the machine is modelled as cpu-host, whose processes have no GPU to time.
    with pytest.raises(refit.BadInput, match="--measure: GPU 0 has no PCI bus id: no NVIDIA GPU was found"):
        refit.Cluster.discover(nvml_library="/nonexistent/libnvidia-ml.so.1", measure=True)


def test_plans_save_load_and_explain(tmp_path: Path) -> None:
    problem = refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2")
    cluster = refit.Cluster.preset("cpu-host:gpus_per_domain=2")
    plan = refit.plan(problem, cluster, "refit")
    plan.save(tmp_path / "plan.json")
    loaded = refit.Plan.load(tmp_path / "plan.json", problem, cluster)
    assert loaded.hash == plan.hash and loaded.strategy == "refit"
    assert loaded.stats.transfers == plan.stats.transfers
    explained = plan.explain(2).explain
    assert explained is not None and explained.rank == 2
    assert explained.receives.bytes == sum(s.nbytes for s in problem.shards(2))
    assert "rank 2" in explained.text
    other = refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=1,dp=2")
    with pytest.raises(refit.BadInput, match="does not fit the problem"):
        refit.Plan.load(tmp_path / "plan.json", other, cluster)


def test_simulation_trace_and_resources() -> None:
    problem = refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2")
    sim = refit.simulate(problem, refit.Cluster.preset("cpu-host:gpus_per_domain=2"), trace=True)
    assert sim.trace is not None and '"traceEvents"' in sim.trace
    assert sim.resources and all(0 <= r.utilisation <= 1 + 1e-9 for r in sim.resources)
    busy = [r.utilisation for r in sim.resources]
    assert busy == sorted(busy, reverse=True)  # busiest first, as refit simulate --json lists them
    parts = dataclasses.astuple(sim.breakdown_s)
    assert sum(parts) == pytest.approx(sim.predicted_s, rel=1e-9)  # the breakdown adds up
    assert set(sim.row()) >= {"strategy", "predicted_s", "breakdown_network_s"}


def test_lists_of_what_this_build_knows() -> None:
    assert "deepseek-v3" in refit.models()
    assert "gb200-nvl72" in refit.presets()
    assert "nic_gbps" in refit.preset_keys()
    assert refit.executors()[0] == "ucx"
    assert refit.strategies()[0].name == "refit"


def test_fp8_in_flight_halves_the_linear_weights_and_charges_the_quantization() -> None:
    # The llama of tests/data/models/small-llama-blocks.json: every linear weight is whole
    # 128x128 blocks at tp=2, so the senders quantize (README, "FP8 in flight").
    model = Path(__file__).resolve().parents[1] / "data" / "models" / "small-llama-blocks.json"
    cluster = refit.Cluster.preset("dgx-h100:gpus_per_node=2")
    bf16 = refit.Problem.from_model(model, train="tp=2", infer="tp=2,engines=2")
    fp8 = refit.Problem.from_model(model, train="tp=2", infer="tp=2,engines=2", quantize="fp8-block128")
    assert len(fp8.tensors) == len(bf16.tensors) + 14  # 2 layers x 7 linear weights' scales
    stats = refit.plan(fp8, cluster).stats
    assert stats.network_bytes_unquantized == refit.plan(bf16, cluster).stats.network_bytes
    assert 0.5 * stats.network_bytes_unquantized < stats.network_bytes < 0.7 * stats.network_bytes_unquantized
    assert refit.simulate(fp8, cluster, strategy="refit").breakdown_s.quantize > 0
    # A training rank hands over its bf16 box of a quantized weight and none of its scales.
    held = {s.tensor: s.dtype for s in fp8.shards(0)}
    assert held["model.layers.0.self_attn.q_proj.weight"] == "bf16"
    assert "model.layers.0.self_attn.q_proj.weight_scale_inv" not in held
    needed = {s.tensor: s.dtype for s in fp8.shards(fp8.source_ranks)}
    assert needed["model.layers.0.self_attn.q_proj.weight"] == "fp8_e4m3"
    assert needed["model.layers.0.self_attn.q_proj.weight_scale_inv"] == "fp32"


def test_weights_trained_in_fp8_are_held_and_moved_as_fp8_with_their_scales() -> None:
    # quantize_at="training": the training ranks hold the linear weights in fp8 with their scales
    # (Transformer Engine's fp8 parameters), nobody quantizes, and every baseline moves the same
    # problem, so there is no receiver-quantized twin to compare with.
    model = Path(__file__).resolve().parents[1] / "data" / "models" / "small-llama-blocks.json"
    cluster = refit.Cluster.preset("dgx-h100:gpus_per_node=2")
    sender = refit.Problem.from_model(model, train="tp=2", infer="tp=2,engines=2", quantize="fp8-block128")
    trained = refit.Problem.from_model(model, train="tp=2", infer="tp=2,engines=2", quantize="fp8-block128",
                                       quantize_at="training")  # fmt: skip
    held = {s.tensor: s.dtype for s in trained.shards(0)}
    assert held["model.layers.0.self_attn.q_proj.weight"] == "fp8_e4m3"
    assert held["model.layers.0.self_attn.q_proj.weight_scale_inv"] == "fp32"
    assert held["model.layers.0.input_layernorm.weight"] == "bf16"
    assert refit.plan(trained, cluster).stats.network_bytes == refit.plan(sender, cluster).stats.network_bytes
    assert refit.simulate(trained, cluster, strategy="refit").breakdown_s.quantize == 0
    # NeMo RL's row moves bf16 quantized at the receivers where the weights are quantized before
    # the engines, and the fp8 as it is where they were trained in it.
    deployed = "quantized at the receiver, bf16 on the network, as deployed today"
    assert deployed in refit.simulate(sender, cluster, strategy="direct").notes
    assert deployed not in refit.simulate(trained, cluster, strategy="direct").notes


def test_an_executor_in_a_reference_cycle_is_collected() -> None:
    # The exchange a bound method of the object holding the executor: the cycle went through the
    # compiled executor, which the garbage collector could not see into, and every such executor
    # (one per failure, as a job makes a new one) leaked.
    import gc
    import weakref

    class Owner:
        def __init__(self) -> None:
            self.executor = refit.Executor("ucx", refit.exchange.from_callable(self.allgather, rank=0, size=1))

        def allgather(self, data: bytes) -> list[bytes]:
            return [data]

    owners = [Owner() for _ in range(3)]
    alive = [weakref.ref(o) for o in owners]
    del owners
    gc.collect()
    assert [r() for r in alive] == [None, None, None]
