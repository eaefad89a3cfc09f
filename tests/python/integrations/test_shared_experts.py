"""The shared experts each vLLM rank holds under expert parallelism, as vLLM decides it, against
refit's parameters: with EP, tp > 1 and dp > 1, ``ParallelConfig.use_sequence_parallel_moe``
(vLLM's own property, run here on each all2all backend) makes DeepseekV2MLP build them without
TP, so a rank holds gate_up_proj [2*I, H] whole; otherwise [2*I/tp, H]."""

from __future__ import annotations

import typing
from pathlib import Path
from types import SimpleNamespace

import pytest

import refit

parallel = pytest.importorskip("vllm.config.parallel")

MODELS = Path(__file__).resolve().parents[2] / "data" / "models"
# tiny-deepseek-v3: one shared expert of moe_intermediate 32, hidden 64.
WHOLE, SHARDED = (2 * 32, 64), (2 * 32 // 2, 64)


def vllm_sequence_parallel(backend: str) -> bool:
    """vLLM's decision for tp=2, dp=2 with EP; naive and pplx are taken as
    allgather_reducescatter (ParallelConfig.__post_init__)."""
    backend = "allgather_reducescatter" if backend in ("naive", "pplx") else backend
    engine = SimpleNamespace(all2all_backend=backend, enable_expert_parallel=True, tensor_parallel_size=2,
                             data_parallel_size=2)  # fmt: skip
    return parallel.ParallelConfig.use_sequence_parallel_moe.fget(engine)


@pytest.mark.parametrize("backend", typing.get_args(parallel.All2AllBackend))
def test_shared_experts_are_whole_exactly_when_vllm_runs_moe_sequence_parallel(backend: str) -> None:
    problem = refit.Problem.from_model(MODELS / "tiny-deepseek-v3.json", train="tp=2,ep=2,etp=1",
                                       infer=f"tp=2,dp=2,ep=on,all2all={backend}")  # fmt: skip
    held = {p.name: p.shape for p in problem.parameters(problem.source_ranks + 3)}
    expected = WHOLE if vllm_sequence_parallel(backend) else SHARDED
    assert held["model.layers.1.mlp.shared_experts.gate_up_proj.weight"] == expected
