"""Issue 28, item 1: the experts each vLLM rank holds, as vLLM itself places them, against the
experts refit writes into that rank's ``w13_weight``. vLLM's decision is its own code run here:
``determine_expert_placement_strategy`` (round_robin only with expert groups, and with DP > 1
under EP only on an all2all backend that routes round-robin), ExpertMapManager's second check
(EP of one rank places linearly), then ``determine_expert_map`` (global expert -> local slot).
vLLM's EP rank is dp_rank * tp + tp_rank (FusedMoEParallelConfig.make). refit is asked through
its public API with the inference layout's ``all2all=`` key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import refit

vllm_moe = pytest.importorskip("vllm.model_executor.layers.fused_moe.expert_map_manager")
from vllm.model_executor.layers.fused_moe.config import FusedMoEParallelConfig  # noqa: E402

MODELS = Path(__file__).resolve().parents[2] / "data" / "models"

# (model, vLLM tp, dp, requested placement, all2all backend)
CASES = [
    ("tiny-deepseek-v3-groups.json", 2, 1, "round_robin", "allgather_reducescatter"),  # kept: no all2all kernels
    ("tiny-deepseek-v3-groups.json", 1, 2, "round_robin", "allgather_reducescatter"),  # dp > 1: linear
    ("tiny-deepseek-v3-groups.json", 2, 2, "round_robin", "deepep_low_latency"),  # dp > 1 on DeepEP-LL: kept
    ("tiny-deepseek-v3-groups.json", 1, 2, "round_robin", "nixl_ep"),  # kept
    ("tiny-deepseek-v3.json", 2, 1, "round_robin", "allgather_reducescatter"),  # no expert groups: linear
    ("tiny-qwen3-moe.json", 2, 2, "round_robin", "deepep_low_latency"),  # no expert groups: linear
    ("tiny-qwen3-moe.json", 2, 2, "linear", "deepep_low_latency"),
]


def vllm_experts(config: dict, tp: int, dp: int, placement: str, all2all: str) -> list[list[int]]:
    """The global experts of each EP rank, by local slot, as vLLM places them."""
    experts = config.get("n_routed_experts", config.get("num_experts"))
    ep = tp * dp
    out = []
    for ep_rank in range(ep):
        parallel = FusedMoEParallelConfig(tp_size=1, pcp_size=1, dp_size=dp, ep_size=ep, tp_rank=0, pcp_rank=0,
                                          dp_rank=ep_rank // tp, ep_rank=ep_rank, sp_size=1, use_ep=True,
                                          all2all_backend=all2all, enable_eplb=False)  # fmt: skip
        strategy = vllm_moe.determine_expert_placement_strategy(placement, parallel, config.get("n_group"), 0, False)
        strategy = "linear" if ep == 1 else strategy  # ExpertMapManager._determine_placement_strategy
        if parallel.use_all2all_kernels and not parallel.needs_round_robin_routing_tables:
            strategy = "linear"
        _, expert_map, _ = vllm_moe.determine_expert_map(ep, ep_rank, experts, strategy)
        local = {int(slot): e for e, slot in enumerate(expert_map.tolist()) if slot >= 0}
        out.append([local[i] for i in range(len(local))])
    return out


def refit_experts(problem: refit.Problem, rank: int) -> list[int]:
    """The global experts whose gate rows refit writes into the rank's first MoE w13_weight, by
    local slot (the region's offset over one expert's elements)."""
    w13 = next(p for p in problem.parameters(rank) if p.name.endswith("mlp.experts.w13_weight"))
    per_expert = w13.shape[1] * w13.shape[2]
    slots = {r.offset // per_expert: int(r.tensor.split(".experts.")[1].split(".")[0])
             for r in w13.regions if r.tensor.endswith("gate_proj.weight")}  # fmt: skip
    return [slots[i] for i in range(len(slots))]


@pytest.mark.parametrize("model,tp,dp,placement,all2all", CASES)
def test_refit_places_experts_as_vllm_does(model: str, tp: int, dp: int, placement: str, all2all: str) -> None:
    config = json.loads((MODELS / model).read_text())
    infer = f"tp={tp},dp={dp},ep=on,placement={placement},all2all={all2all}"
    problem = refit.Problem.from_model(MODELS / model, train="ep=2", infer=infer, per_expert=True)
    expected = vllm_experts(config, tp, dp, placement, all2all)
    got = [refit_experts(problem, problem.source_ranks + r) for r in range(tp * dp)]
    assert got == expected
