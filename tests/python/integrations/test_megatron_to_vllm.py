"""refit between the frameworks themselves: Megatron-Core models built on CPU under Megatron's
parallel_state (gloo) as the training side, vLLM's own model classes under vLLM's parallel state
as the inference side, one torchrun job running every layout pair in turn
(worker.py). The expected bytes are vLLM's own loading of the checkpoint the training side holds:
after the refit every vLLM parameter (padding included) equals what vLLM's loader then writes
into it, and sits where it sat.

Each pair is (name, Megatron sizes, vLLM sizes). Pairs whose vLLM layout asks for round_robin
expert placement need the inference layout's all2all= key (issue 28, item 1); until refit reads
it they are expected to fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")
pytest.importorskip("megatron.core")

from checkpoint import write  # noqa: E402
from conftest import free_port  # noqa: E402

HERE = Path(__file__).resolve().parent
MODELS = HERE.parents[1] / "data" / "models"


def infer(tp: int = 1, dp: int = 1, ep: bool = False, placement: str = "linear",
          all2all: str = "allgather_reducescatter") -> dict[str, Any]:  # fmt: skip
    return {"tp": tp, "dp": dp, "ep": ep, "placement": placement, "all2all": all2all}


# model -> [(pair, Megatron sizes, vLLM sizes)]
JOBS: dict[str, list[tuple[str, dict[str, int], dict[str, Any]]]] = {
    "tiny-llama-vocab1023.json": [  # 2 kv heads; vocab 1023: Megatron pads to 128*tp rows, vLLM to 64
        ("llama-tp2-to-tp4", {"tp": 2}, infer(tp=4)),  # vLLM tp beyond the kv heads: each replicated
        ("llama-tp4-to-tp2", {"tp": 4}, infer(tp=2)),  # Megatron tp beyond the query groups
        ("llama-pp2-to-tp2", {"pp": 2}, infer(tp=2)),  # pp -> tp
        ("llama-tp2pp2-to-dp2", {"tp": 2, "pp": 2}, infer(dp=2)),
    ],
    "tiny-llama-8-layers.json": [
        ("llama8-pp2vp2-to-tp2", {"pp": 2, "vp": 2}, infer(tp=2)),  # virtual pipeline chunks (model<v>.)
    ],
    "tiny-qwen2.json": [  # tied embeddings (no output layer, no lm_head), q/k/v biases
        ("qwen2-tied-tp2-to-tp1", {"tp": 2}, infer(tp=1)),
        ("qwen2-tied-pp2-to-tp2", {"pp": 2}, infer(tp=2)),  # the last stage's copy of the embedding
    ],
    "tiny-qwen3-moe.json": [  # 8 experts, no expert groups
        ("qwen3moe-ep2-to-ep2", {"ep": 2, "etp": 1, "dp": 2}, infer(tp=2, ep=True)),  # EP -> EP
        ("qwen3moe-tp2ep2-to-tp2", {"tp": 2, "ep": 2, "etp": 1}, infer(tp=2)),  # EP -> no EP (MoE TP)
        ("qwen3moe-ep2-to-dp2ep", {"ep": 2, "etp": 1, "dp": 2}, infer(dp=2, ep=True)),  # dp > 1 with EP
        ("qwen3moe-etp2-to-dp2ep", {"tp": 2, "etp": 2}, infer(dp=2, ep=True)),  # experts TP-split -> EP
        # round_robin asked, no expert groups: vLLM places linearly (item 1)
        ("qwen3moe-ep2-to-tp2-round-robin", {"ep": 2, "etp": 1, "dp": 2}, infer(tp=2, ep=True, placement="round_robin")),
    ],
    "tiny-deepseek-v3.json": [  # MLA, a dense layer then MoE with a shared expert, MTP
        ("dsv3-ep2-to-tp2", {"ep": 2, "etp": 1, "dp": 2}, infer(tp=2)),  # EP -> no EP, MTP
        ("dsv3-ep2-to-dp2ep", {"ep": 2, "etp": 1, "dp": 2}, infer(dp=2, ep=True)),  # dp > 1 with EP, MTP
        ("dsv3-pp3-to-tp2ep", {"pp": 3}, infer(tp=2, ep=True)),  # pp -> tp, MTP on the last stage
        # Megatron tp > 1: the local spec's column-parallel linear_q_down_proj and linear_kv_down_proj
        # (spec=local) gathered into vLLM's fused_qkv_a_proj
        ("dsv3-tp2ep2-to-tp1", {"tp": 2, "ep": 2, "etp": 1}, infer(tp=1)),
    ],
    "tiny-moonlight.json": [  # MLA without q LoRA: q_proj column-parallel on both sides, MTP
        ("moonlight-tp2ep2-to-tp4", {"tp": 2, "ep": 2, "etp": 1}, infer(tp=4)),  # experts whole -> MoE TP 4
    ],
    "tiny-llama-bias.json": [  # Llama's attention_bias and mlp_bias: Megatron's add_bias_linear
        # Megatron tp beyond the 2 query groups cuts linear_qkv.bias inside a group; fc1's bias [gate; up] per rank
        ("llamabias-tp4-to-tp2", {"tp": 4}, infer(tp=2)),
    ],
    "tiny-deepseek-v3-groups.json": [  # 4 expert groups: round_robin is kept where vLLM keeps it
        ("dsv3groups-ep2-to-tp2-round-robin", {"ep": 2, "etp": 1, "dp": 2}, infer(tp=2, ep=True, placement="round_robin")),
        # dp > 1 with EP on allgather_reducescatter: vLLM falls back to linear (item 1)
        ("dsv3groups-ep2-to-dp2-round-robin", {"ep": 2, "etp": 1, "dp": 2}, infer(dp=2, ep=True, placement="round_robin")),
    ],
}  # fmt: skip
def _world(pair: tuple[str, dict[str, int], dict[str, Any]]) -> int:
    _, train, i = pair
    megatron = train.get("tp", 1) * train.get("pp", 1) * train.get("dp", 1)
    return megatron + i["tp"] * i["dp"]


def _selected(request: pytest.FixtureRequest) -> set[str]:
    """The pairs whose tests this session runs (all, or those pytest's -k or node ids picked)."""
    return {item.callspec.params["name"] for item in request.session.items
            if item.module is request.module and hasattr(item, "callspec")}  # fmt: skip


@pytest.fixture(scope="module")
def results(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:  # fmt: skip
    """Runs every selected pair of every model in one torchrun job (each process imports the
    frameworks once): each pair's JSON lines, by pair name."""
    selected = _selected(request)
    root = tmp_path_factory.mktemp("frameworks")
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "UCX_TLS": os.environ.get("UCX_TLS", "self,sm,tcp"),
           "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "VLLM_LOGGING_LEVEL": "WARNING"}  # fmt: skip
    job: list[dict[str, Any]] = []
    for model, every in JOBS.items():
        pairs = [p for p in every if p[0] in selected]
        if not pairs:
            continue
        a = write(MODELS / model, root / model / "a", seed=1)
        b = write(MODELS / model, root / model / "b", seed=2)
        mtp = bool(json.loads((MODELS / model).read_text()).get("num_nextn_predict_layers", 0))
        job += [{"name": name, "train": train, "infer": i, "mtp": mtp, "checkpoint_a": str(a), "checkpoint_b": str(b),
                 "megatron_init": f"tcp://127.0.0.1:{free_port()}", "vllm_init": f"tcp://127.0.0.1:{free_port()}"}
                for name, train, i in pairs]  # fmt: skip
    (root / "results").mkdir()
    (root / "job.json").write_text(json.dumps({"pairs": job, "results": str(root / "results")}))
    world = max(_world(p) for p in PAIRS if p[0] in selected)
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={world}", f"--master-port={free_port()}",
         str(HERE / "worker.py"), str(root / "job.json")],
        env=env, capture_output=True, text=True, timeout=600, cwd=HERE,
    )  # fmt: skip
    lines = [json.loads(f.read_text()) for f in sorted((root / "results").iterdir())]
    return {name: [x for x in lines if x["pair"] == name] or [{"error": done.stderr[-4000:]}] for name in selected}


PAIRS = [(name, train, i) for pairs in JOBS.values() for name, train, i in pairs]


@pytest.mark.parametrize("name,train,i", PAIRS, ids=[p[0] for p in PAIRS])
def test_every_vllm_parameter_is_vllms_own_loading(results: dict[str, list[dict[str, Any]]], name: str,
                                                   train: dict[str, int], i: dict[str, Any]) -> None:  # fmt: skip
    lines = results[name]
    for x in lines:
        assert "error" not in x, x["error"]
    megatron = [x for x in lines if x["side"] == "megatron"]
    vllm = [x for x in lines if x["side"] == "vllm"]
    assert len(megatron) + len(vllm) == _world((name, train, i)), lines
    for x in megatron:  # all loaded; handed over where they lie in the flat buffer (expert biases are buffers)
        assert x["unloaded"] == [] and all(n.endswith(".mlp.router.expert_bias") for n in x["outside_flat_buffer"]), x
    for x in vllm:
        assert x["parameters"] > 0 and x["wrong"] == [] and x["moved"] == [], x
