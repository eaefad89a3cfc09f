"""`refit run --storage framework` against the frameworks' own layouts: a random HF checkpoint is
laid out as Megatron holds it on every training rank (framework_reference.py, written from the
frameworks' code), refit moves those parameters under mpirun (UCX, this machine's loopback) into
vLLM's parameters on every inference rank, and every byte must equal vLLM's own layout of the
same checkpoint, vocab padding rows zero included. ctest runs it as python_storage_reference with
the project venv (numpy, pytest), apart from the wheel's suite."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA, cli_path, mpirun_env
from fp8_reference import finite_weights, megatron_fp8_params, vllm_fp8_params
from framework_reference import Megatron, Model, Vllm, hf_state_dict, megatron_params, vllm_params

MODELS = DATA / "models"


def _sizes(text: str) -> dict[str, str]:
    return dict(kv.split("=") for kv in text.split(","))


def _write(params: dict[int, dict[str, np.ndarray]], root: Path) -> None:
    for rank, named in params.items():
        (root / f"rank{rank}").mkdir(parents=True)
        for name, array in named.items():
            np.ascontiguousarray(array).tofile(root / f"rank{rank}" / name)


def _cases() -> list[tuple[str, str, str, list[str]]]:
    """The storage cases every executor runs (tests/data/storage_cases.json says what each shows)."""
    cases = json.loads((DATA / "storage_cases.json").read_text())["cases"]
    return [(c["config"], c["train"], c["infer"], c["options"]) for c in cases]


CASES = _cases()


def _refit(tmp_path: Path, config: str, train: str, infer: str, problem: list[str], reference=vllm_params,
           finite: bool = False, training=megatron_params) -> None:  # fmt: skip
    """Lays a random checkpoint (of finite weights: `finite`) out as Megatron does (`training`),
    runs refit on it with the PROBLEM options `problem`, and checks every inference rank's
    parameters against vLLM's layout (`reference`)."""
    cli = cli_path()
    if cli is None:
        pytest.skip("the refit command is not built (REFIT_CLI)")
    model = Model.from_config(json.loads((MODELS / config).read_text()))
    if "--mtp" in problem:
        model = dataclasses.replace(model, mtp=json.loads((MODELS / config).read_text())["num_nextn_predict_layers"])
    state = hf_state_dict(model, np.random.default_rng(7))
    state = finite_weights(state) if finite else state
    t, i = _sizes(train), _sizes(infer)
    megatron = Megatron(**{k: v if k in ("layout", "spec") else int(v) for k, v in t.items()})
    vllm = Vllm(tp=int(i.get("tp", 1)), dp=int(i.get("dp", 1)), expert_parallel=int(i.get("ep", 0)) > 0,
                placement=i.get("placement", "linear"), engines=int(i.get("engines", 1)),
                all2all=i.get("all2all", "allgather_reducescatter"))  # fmt: skip
    _write(training(state, model, megatron), tmp_path / "megatron")
    done = subprocess.run(
        ["mpirun", "--oversubscribe", "-np", str(megatron.world + vllm.world), cli, "run", *problem,
         "--storage", "framework", "--load-sources", str(tmp_path / "megatron"),
         "--save-destinations", str(tmp_path / "vllm"), "--timeout", "60"],
        capture_output=True, text=True, timeout=300, env=mpirun_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    expected = reference(state, model, vllm, first_rank=megatron.world)
    for rank, named in expected.items():
        written = sorted(p.name for p in (tmp_path / "vllm" / f"rank{rank}").iterdir())
        assert written == sorted(named), f"rank {rank}"
        for name, array in named.items():
            got = np.fromfile(tmp_path / "vllm" / f"rank{rank}" / name, dtype=array.dtype)
            assert np.array_equal(got, np.ascontiguousarray(array).ravel()), f"rank {rank}: {name}"


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
@pytest.mark.parametrize("config,train,infer,options", CASES)
def test_megatron_parameters_arrive_as_vllm_parameters_byte_for_byte(tmp_path: Path, config: str, train: str,
                                                                     infer: str, options: list[str]) -> None:  # fmt: skip
    """Trained in fp8 (``--quantize-at training``), Transformer Engine's fp8 values and padded
    rowwise scales move as they are, the padding never read: vLLM's parameters are then what it
    makes of the block-quantized checkpoint."""
    trained = "training" in options
    _refit(tmp_path, config, train, infer,
           ["--model", str(MODELS / config), "--train", train, "--infer", infer, *options],
           reference=vllm_fp8_params if trained else vllm_params, finite=trained,
           training=megatron_fp8_params if trained else megatron_params)  # fmt: skip


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_a_version_2_manifest_carries_the_storage_maps_to_refit_run(tmp_path: Path) -> None:
    """`refit models --storage --write-manifest` writes both sides' parameters and regions; a run
    from that manifest alone moves the same bytes as one from the model."""
    config, train, infer, _ = CASES[2]
    cli = cli_path()
    if cli is None:
        pytest.skip("the refit command is not built (REFIT_CLI)")
    manifest = tmp_path / "manifest.json"
    done = subprocess.run([cli, "models", str(MODELS / config), "--train", train, "--infer", infer, "--storage",
                           "--write-manifest", str(manifest)], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(manifest.read_text())["version"] == 2
    _refit(tmp_path, config, train, infer, ["--manifest", str(manifest)])


FP8_CASES = [
    # config, Megatron sizes, vLLM sizes: every shard whole 128x128 blocks
    ("small-llama-gqa-blocks.json", "tp=2", "tp=4"),  # one query group a rank; kv heads replicated in vLLM
    ("small-llama-gqa-blocks.json", "tp=1,pp=2", "tp=2"),  # two query groups: q in two regions of linear_qkv
    # tp beyond the 2 query groups: 384 rows (3 heads, 3 blocks) a rank, rank 1 holding q3, k0 and v0
    ("small-llama-gqa-blocks.json", "tp=4", "tp=2"),
    ("small-qwen3-moe-blocks.json", "tp=2,ep=2,etp=1", "tp=1,dp=2,ep=1"),  # TEGroupedMLP to w13/w2 with EP
    ("small-qwen3-moe-blocks.json", "tp=2,ep=2,etp=1", "tp=2"),  # MoE TP: w13 [gate; up] scales in blocks
]


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
@pytest.mark.parametrize("config,train,infer", FP8_CASES)
def test_megatron_bf16_arrives_as_vllm_block_fp8_parameters_byte_for_byte(tmp_path: Path, config: str, train: str,
                                                                          infer: str) -> None:  # fmt: skip
    """The training ranks quantize their bf16 boxes in place (through Megatron's parameters) and
    send fp8 values and scales; every vLLM parameter, scales included, is what vLLM makes of the
    block-quantized checkpoint (fp8_reference.py)."""
    _refit(tmp_path, config, train, infer,
           ["--model", str(MODELS / config), "--train", train, "--infer", infer, "--quantize", "fp8-block128"],
           reference=vllm_fp8_params, finite=True)  # fmt: skip


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_weights_quantized_at_the_receiver_arrive_as_vllm_bf16_parameters(tmp_path: Path) -> None:
    """With --quantize-at receiver bf16 moves: the engine quantizes after loading, so the
    parameters refit writes are the bf16 ones."""
    config, train, infer = FP8_CASES[0]
    _refit(tmp_path, config, train, infer,
           ["--model", str(MODELS / config), "--train", train, "--infer", infer, "--quantize", "fp8-block128",
            "--quantize-at", "receiver"])  # fmt: skip
