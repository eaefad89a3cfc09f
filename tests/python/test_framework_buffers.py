"""Buffers keyed by framework-parameter name: ``Problem.parameters(rank)`` lists each rank's
Megatron-Core (training) or vLLM (inference) parameters with the regions of logical tensors they
hold, as ``refit models --storage --json`` does; ``Executor.prepare(..., storage="framework")``
moves a refit between those parameters. The expected bytes come from the numpy reference of the
frameworks' layouts (framework_reference.py), written apart from refit's C++ storage maps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import refit
from conftest import DATA, change_buffer, free_port, readonly_copy, run_ranks
from fp8_reference import finite_weights, megatron_fp8_params, vllm_fp8_params
from framework_reference import Megatron, Model, Vllm, hf_state_dict, megatron_params, vllm_params

MODELS = DATA / "models"
WORKER = Path(__file__).with_name("framework_worker.py")

# config, Megatron sizes, vLLM sizes
MOE_EP = ("tiny-qwen3-moe.json", "tp=2,ep=2,etp=1", "tp=1,dp=2,ep=1")  # TEGroupedMLP -> FusedMoE, vLLM EP
LLAMA_GQA = ("tiny-llama-vocab1023.json", "tp=2", "tp=4")  # qkv per group -> q|k|v, kv replicated, padded vocab
CASES = [MOE_EP, LLAMA_GQA, ("tiny-deepseek-v3.json", "tp=2,ep=2,etp=1", "tp=2")]  # MLA, fp32 router bias
Ranks = dict[int, dict[str, np.ndarray]]  # global rank -> parameter name -> array


def _problem(case: tuple[str, str, str], **options: Any) -> refit.Problem:
    config, train, infer = case
    return refit.Problem.from_model(MODELS / config, train=train, infer=infer, **options)


def _as_cli(parameters: list[refit.Parameter]) -> dict[str, Any]:
    """A rank's parameters as ``refit models --storage --json`` lists them (regions apart, each
    naming its parameter by index)."""
    regions = [
        {"tensor": r.tensor, "box": {"offset": list(r.box.offset), "extent": list(r.box.extent)},
         "parameter": i, "offset": r.offset, "strides": list(r.strides)}
        for i, p in enumerate(parameters) for r in p.regions
    ]  # fmt: skip
    return {"parameters": [{"name": p.name, "shape": list(p.shape), "dtype": p.dtype} for p in parameters],
            "regions": sorted(regions, key=json.dumps)}  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_parameters_are_what_refit_models_storage_lists(case: tuple[str, str, str], cli_json: Any) -> None:
    problem = _problem(case)
    config, train, infer = case
    listed = cli_json("models", str(MODELS / config), "--train", train, "--infer", infer, "--storage")["storage"]
    for side, framework, ranks in [("training", "megatron", range(problem.source_ranks)),
                                   ("inference", "vllm", range(problem.source_ranks, problem.world_size))]:  # fmt: skip
        assert listed[side]["framework"] == framework
        assert [r["rank"] for r in listed[side]["ranks"]] == list(ranks)
        for cli_rank in listed[side]["ranks"]:
            rank = cli_rank["rank"]
            assert problem.framework(rank) == framework
            expected = {"parameters": cli_rank["parameters"], "regions": sorted(cli_rank["regions"], key=json.dumps)}
            assert _as_cli(problem.parameters(rank)) == expected, f"rank {rank}"


def test_a_version_2_manifest_gives_the_same_parameters(tmp_path: Path, cli: Any) -> None:
    config, train, infer = LLAMA_GQA
    manifest = tmp_path / "manifest.json"
    done = cli("models", str(MODELS / config), "--train", train, "--infer", infer, "--storage",
               "--write-manifest", str(manifest))  # fmt: skip
    assert done.returncode == 0, done.stderr
    from_model, from_manifest = _problem(LLAMA_GQA), refit.Problem.from_manifest(manifest)
    for rank in range(from_model.world_size):
        assert from_manifest.parameters(rank) == from_model.parameters(rank)


def test_a_manifest_without_storage_maps_names_what_to_write(tmp_path: Path) -> None:
    problem = _problem(LLAMA_GQA)
    problem.save_manifest(tmp_path / "v1.json")
    with pytest.raises(refit.BadInput, match=r"--manifest: .*v1.json has no storage maps \(write a version 2"):
        refit.Problem.from_manifest(tmp_path / "v1.json").parameters(0)
    with pytest.raises(refit.BadInput, match="rank 6 is not in the problem's 6 ranks"):
        problem.parameters(6)


def _reference(case: tuple[str, str, str]) -> tuple[dict[str, np.ndarray], Ranks]:
    """The seed-7 checkpoint (HF names, experts apart) and every rank's parameters as its
    framework lays it out, by global rank."""
    config, train, infer = case
    model = Model.from_config(json.loads((MODELS / config).read_text()))
    state = hf_state_dict(model, np.random.default_rng(7))
    t = {k: int(v) for k, v in (kv.split("=") for kv in train.split(","))}
    i = dict(kv.split("=") for kv in infer.split(","))
    megatron = Megatron(**t)
    vllm = Vllm(tp=int(i.get("tp", 1)), dp=int(i.get("dp", 1)), expert_parallel=int(i.get("ep", 0)) > 0)
    return state, {**megatron_params(state, model, megatron), **vllm_params(state, model, vllm, megatron.world)}


@pytest.mark.parametrize("case", [MOE_EP, LLAMA_GQA], ids=["qwen3-moe-ep", "llama-gqa"])
def test_every_region_is_where_the_framework_puts_its_tensor(case: tuple[str, str, str]) -> None:
    """Each region's view of the reference parameter is the HF tensor's box (experts apart, as
    the checkpoint holds them); every parameter is the reference's in name, shape and bytes."""
    state, params = _reference(case)
    problem = _problem(case, per_expert=True)
    for rank, expected in params.items():
        listed = problem.parameters(rank)
        assert {p.name: p.shape for p in listed} == {n: a.shape for n, a in expected.items()}, f"rank {rank}"
        for p in listed:
            assert p.nbytes == expected[p.name].nbytes
            for r in p.regions:
                got = r.view(expected[p.name])
                np.testing.assert_array_equal(got, state[r.tensor][r.box.slices], err_msg=f"{p.name}: {r}")


@pytest.mark.processes
@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("case", [MOE_EP, LLAMA_GQA], ids=["qwen3-moe-ep", "llama-gqa"])
def test_megatron_parameters_arrive_as_vllm_parameters_between_processes(case: tuple[str, str, str],
                                                                         kind: str) -> None:  # fmt: skip
    """One process per rank (torch.distributed, gloo), each handing refit its framework's
    parameters; every inference process holds vLLM's layout of the checkpoint, byte for byte,
    after each of two steps (framework_worker.py)."""
    if kind == "torch":
        pytest.importorskip("torch")
    problem = _problem(case)
    env = dict(os.environ)
    env.setdefault("UCX_TLS", "self,sm,tcp")
    env.update(WORLD_SIZE=str(problem.world_size), INIT_METHOD=f"tcp://127.0.0.1:{free_port()}")
    config, train, infer = case
    workers = [
        subprocess.Popen([sys.executable, str(WORKER), str(MODELS / config), train, infer, kind],
                         env={**env, "RANK": str(r)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=WORKER.parent)
        for r in range(problem.world_size)
    ]  # fmt: skip
    try:
        outputs = [w.communicate(timeout=180) for w in workers]
    finally:
        for w in workers:
            w.kill()
    for rank, (w, (out, err)) in enumerate(zip(workers, outputs)):
        assert w.returncode == 0, f"rank {rank}: {err}"
        result = json.loads(out.strip().splitlines()[-1])
        assert result == {"rank": rank, "parameters": len(problem.parameters(rank)), "wrong": []}, result


# In-process refusals and padding: ranks as threads (conftest.run_ranks), llama TP2 -> TP4.
SENTINEL = 7


def _framework_buffers(problem: refit.Problem, rank: int, params: Ranks) -> dict[str, Any]:
    """Megatron's parameters on a training rank; SENTINEL everywhere on an inference rank."""
    out: dict[str, Any] = {}
    for p in problem.parameters(rank):
        dtype = refit.numpy_dtype(p.dtype)
        if problem.is_training(rank):
            out[p.name] = np.ascontiguousarray(params[rank][p.name]).view(dtype)
        else:
            out[p.name] = np.full(p.shape, SENTINEL, dtype)
    return out


def _refit(
    change: Callable[[int, dict[str, Any]], None] = lambda r, b: None,
) -> tuple[list[Any], list[dict[str, Any]], Ranks]:
    problem = _problem(LLAMA_GQA)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    _, params = _reference(LLAMA_GQA)
    buffers = [_framework_buffers(problem, r, params) for r in range(problem.world_size)]
    for r, b in enumerate(buffers):
        change(r, b)

    def body(rank: int, exchange: Any) -> Any:
        executor = refit.Executor("ucx", exchange, timeout=20)
        return executor.prepare(plan, buffers[rank], storage="framework").execute()

    return run_ranks(problem.world_size, body), buffers, params


def test_padding_is_left_as_the_caller_gave_it() -> None:
    """vLLM pads the 1023-row vocab to 1024: the last of TP4's 256-row shards has one padding
    row, which refit neither reads nor writes; every other element is the reference's."""
    results, buffers, params = _refit()
    assert not any(isinstance(r, BaseException) for r in results), results
    problem = _problem(LLAMA_GQA)
    for rank in range(problem.source_ranks, problem.world_size):
        for name, got in buffers[rank].items():
            want = params[rank][name].view(got.dtype)
            if name in ("model.embed_tokens.weight", "lm_head.weight") and rank == problem.world_size - 1:
                np.testing.assert_array_equal(got[:-1], want[:-1], err_msg=name)
                assert np.all(got[-1] == SENTINEL), name  # the padding row, not zeroed
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"rank {rank}: {name}")






QKV = "model.layers.0.self_attn.qkv_proj.weight"  # vLLM TP4: [q 16; k 16; v 16] rows of 64
FC1 = "decoder.layers.1.mlp.linear_fc1.weight"  # Megatron TP2: [gate 64; up 64] rows of 64
REFUSALS = [
    ("shape", change_buffer(3, QKV, lambda a: np.zeros((64, 48), np.uint16)),
     f"parameter '{QKV}' (rank 3): shape [64, 48] is not the parameter's [48, 64]"),
    ("size", change_buffer(4, QKV, lambda a: np.zeros(48 * 64 + 1, np.uint16)),
     f"parameter '{QKV}' (rank 4): shape [3073] is not the parameter's [48, 64]"),
    ("dtype", change_buffer(1, FC1, lambda a: a.astype(np.float32)),
     f"parameter '{FC1}' (rank 1): dtype float32 does not hold the parameter's bf16 (expected bfloat16 or uint16)"),
    ("strided", change_buffer(0, FC1, lambda a: np.zeros((64, 128), np.uint16).T),
     f"parameter '{FC1}' (rank 0): not contiguous in row-major order"),
    ("read-only destination", change_buffer(5, QKV, readonly_copy),
     f"parameter '{QKV}' (rank 5): read-only, but an inference rank's buffers receive the parameter"),
    ("missing", change_buffer(2, "lm_head.weight", None),
     "rank 2: no buffer for parameter 'lm_head.weight' (the vllm rank's [256, 64] bf16)"),
    ("a tensor name", change_buffer(0, "model.layers.0.mlp.up_proj.weight", lambda a: np.zeros((64, 64), np.uint16)),
     "parameter 'model.layers.0.mlp.up_proj.weight' (rank 0): the megatron rank has no parameter of that name "
     "(Problem.parameters(0) lists them)"),
]  # fmt: skip


@pytest.mark.parametrize("change,message", [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS])
def test_wrong_parameters_are_refused_on_every_rank_before_any_byte_moves(change: Any, message: str) -> None:
    results, buffers, _ = _refit(change)
    offender = int(message.split("rank ")[1].split(")")[0].split(":")[0])
    for rank, r in enumerate(results):
        assert isinstance(r, refit.BadInput), (rank, r)
        if rank == offender:
            assert str(r).startswith(message), str(r)
        else:
            assert str(r).startswith(f"refused because rank {offender} refused: "), str(r)
            assert message in str(r)
    for rank in range(2, 6):  # nothing moved: the inference ranks hold the sentinel (or zeros)
        for name, a in buffers[rank].items():
            assert np.all(a == SENTINEL) or np.all(a == 0), (rank, name)


def test_a_rank_without_storage_maps_makes_every_rank_refuse(tmp_path: Path) -> None:
    """Each rank chooses its storage: rank 0 asks for framework parameters of a version 1
    manifest, which has none; the others, with logical buffers, refuse with it."""
    manifest = tmp_path / "v1.json"
    _problem(LLAMA_GQA).save_manifest(manifest)
    problem = refit.Problem.from_manifest(manifest)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))

    def body(rank: int, exchange: Any) -> Any:
        executor = refit.Executor("ucx", exchange, timeout=20)
        buffers = {s.tensor: np.zeros(s.extent, refit.numpy_dtype(s.dtype)) for s in problem.shards(rank)}
        return executor.prepare(plan, buffers, storage="framework" if rank == 0 else "logical")

    message = f"--manifest: {manifest} has no storage maps"
    results = run_ranks(problem.world_size, body)
    assert isinstance(results[0], refit.BadInput) and str(results[0]).startswith(message), results[0]
    for r in results[1:]:
        assert isinstance(r, refit.BadInput) and str(r).startswith("refused because rank 0 refused: "), r
        assert message in str(r)


def test_storage_is_logical_or_framework() -> None:
    problem = _problem(LLAMA_GQA)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    executor = refit.Executor("ucx", refit.exchange.from_callable(lambda d: [d], rank=0, size=1))
    with pytest.raises(ValueError, match="storage: 'megatron' is neither 'logical' nor 'framework'"):
        executor.prepare(plan, {}, rank=0, storage="megatron")  # type: ignore[arg-type]


@dataclass
class Fp8Parameter:
    """What a training rank's ``named_parameters()`` gives for a weight trained in fp8 with
    Transformer Engine's fp8 parameters, as far as refit reads it: a ``Float8BlockwiseQTensor``'s
    ``_rowwise_data`` (uint8 values) and ``_rowwise_scale_inv`` (fp32 scales, inner dim padded to
    4). Transformer Engine needs a GPU; these are its two attributes, not its class."""

    _rowwise_data: np.ndarray
    _rowwise_scale_inv: np.ndarray


def _fp8_training() -> tuple[refit.Plan, list[dict[str, Any]], dict[int, dict[str, np.ndarray]], Ranks]:
    """FP8 training (quantize_at="training"), Megatron TP2 -> vLLM TP2: the plan, each training
    rank's named parameters (the fp8 ones as Transformer Engine objects), zeroed vLLM parameters
    by inference rank, and what vLLM makes of the same block-quantized checkpoint."""
    config, train, infer = "small-llama-gqa-blocks.json", "tp=2", "tp=2"
    problem = _problem((config, train, infer), quantize="fp8-block128", quantize_at="training")
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    model = Model.from_config(json.loads((MODELS / config).read_text()))
    state = finite_weights(hf_state_dict(model, np.random.default_rng(7)))
    megatron = megatron_fp8_params(state, model, Megatron(tp=2))
    expected = vllm_fp8_params(state, model, Vllm(tp=2), first_rank=2)
    scales = "._rowwise_scale_inv"  # docs/quantization.md, "Framework storage"
    fp32 = {np.dtype(np.uint32): np.float32}  # the reference keeps fp32 as its bits
    own = [{n: np.ascontiguousarray(a).view(fp32.get(a.dtype, a.dtype)) for n, a in megatron[r].items()}
           for r in range(2)]  # fmt: skip
    named = [{n: Fp8Parameter(a, own[r][n + scales]) if n + scales in own[r] else a
              for n, a in own[r].items() if not n.endswith(scales)} for r in range(2)]  # fmt: skip
    received = {r: {p.name: np.zeros(p.shape, refit.numpy_dtype(p.dtype)) for p in problem.parameters(r)}
                for r in (2, 3)}  # fmt: skip
    return plan, named, received, expected


def test_transformer_engine_fp8_parameters_are_handed_over_as_they_are() -> None:
    """Every training rank hands refit its named parameters, the fp8 ones as Transformer Engine
    objects; every vLLM parameter, scales included, is what vLLM makes of the same
    block-quantized checkpoint."""
    plan, named, received, expected = _fp8_training()
    assert sum(isinstance(a, Fp8Parameter) for a in named[0].values()) == 8  # 2 layers x qkv, proj, fc1, fc2

    def body(rank: int, exchange: Any) -> Any:
        executor = refit.Executor("ucx", exchange, timeout=20)
        return executor.prepare(plan, named[rank] if rank < 2 else received[rank], storage="framework").execute()

    results = run_ranks(plan.problem.world_size, body)
    assert not any(isinstance(r, BaseException) for r in results), results
    for rank, params in received.items():
        assert sorted(params) == sorted(expected[rank])
        for name, got in params.items():
            np.testing.assert_array_equal(got.view(np.uint8), expected[rank][name].view(np.uint8), err_msg=name)


def test_an_fp8_parameter_given_new_memory_after_prepare_is_refused_at_execute() -> None:
    """refit takes an fp8 parameter's values and scales out of it at prepare; when Transformer
    Engine later gives the parameter new ones (new memory), refit kept reading the old with no
    error. Execute reads both attributes again: rank 0's values and rank 1's scales moved."""
    plan, named, received, _ = _fp8_training()
    fp8 = sorted(n for n, a in named[0].items() if isinstance(a, Fp8Parameter))[0]
    attribute = ["_rowwise_data", "_rowwise_scale_inv"]

    def body(rank: int, exchange: Any) -> Any:
        executor = refit.Executor("ucx", exchange, timeout=2)
        prepared = executor.prepare(plan, named[rank] if rank < 2 else received[rank], storage="framework")
        if rank >= 2:  # the training ranks never send: the inference ranks time out
            with pytest.raises(refit.Failure):
                prepared.execute()
            return None
        parameter = named[rank][fp8]
        setattr(parameter, attribute[rank], getattr(parameter, attribute[rank]).copy())
        with pytest.raises(refit.BadInput) as refused:
            prepared.execute()
        return str(refused.value)

    results = run_ranks(plan.problem.world_size, body, timeout=60)
    assert results[0].startswith(f"rank 0: buffer '{fp8}': its memory moved since prepare()"), results[0]
    assert results[1].startswith(f"rank 1: buffer '{fp8}._rowwise_scale_inv': its memory moved"), results[1]
    assert results[2:] == [None, None], results
