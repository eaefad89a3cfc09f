"""refit.integrations without a job: the names each side gives refit, the layouts read from
configs, and the refusals (a TransformerConfig that is not the checkpoint's, a vLLM pipeline, a
parameter that moved in memory during an update)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import refit
from refit.integrations import megatron, vllm

MODELS = Path(__file__).resolve().parents[2] / "data" / "models"


def te_names(local: list[str]) -> list[str]:
    """The names refit gets for one chunk whose named_parameters() are `local`."""
    return [megatron._te_name(n, set(local).__contains__) for n in local]


def test_a_dense_layer_gets_the_fused_norms_names() -> None:
    layer = ["decoder.layers.0.input_layernorm.weight", "decoder.layers.0.self_attention.linear_qkv.weight",
             "decoder.layers.0.pre_mlp_layernorm.weight", "decoder.layers.0.mlp.linear_fc1.weight"]  # fmt: skip
    assert te_names(layer) == [
        "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight", "decoder.layers.0.self_attention.linear_qkv.weight",
        "decoder.layers.0.mlp.linear_fc1.layer_norm_weight", "decoder.layers.0.mlp.linear_fc1.weight",
    ]  # fmt: skip


def test_moe_and_mla_layers_keep_their_norms_apart_and_stack_expert_names() -> None:
    p = "mtp.layers.0.transformer_layer."
    layer = [p + "input_layernorm.weight", p + "self_attention.linear_q_up_proj.weight",
             p + "self_attention.q_layernorm.weight", p + "self_attention.kv_layernorm.weight",
             p + "self_attention.linear_kv_up_proj.weight", p + "pre_mlp_layernorm.weight", p + "mlp.router.weight",
             p + "mlp.experts.local_experts.3.linear_fc2.weight"]  # fmt: skip
    q = "mtp.layers.0.mtp_model_layer."
    assert te_names(layer) == [q + "input_layernorm.weight", q + "self_attention.linear_q_up_proj.weight",
                               q + "self_attention.linear_q_up_proj.layer_norm_weight",
                               q + "self_attention.linear_kv_up_proj.layer_norm_weight",
                               q + "self_attention.linear_kv_up_proj.weight", q + "pre_mlp_layernorm.weight",
                               q + "mlp.router.weight", q + "mlp.experts.linear_fc2.weight3"]  # fmt: skip


def test_te_spec_names_pass_as_they_are() -> None:
    layer = ["embedding.word_embeddings.weight", "decoder.layers.1.self_attention.linear_qkv.layer_norm_weight",
             "decoder.layers.1.mlp.experts.linear_fc1.weight7", "output_layer.weight"]  # fmt: skip
    assert te_names(layer) == layer


def test_wrappers_are_unwrapped_and_virtual_stages_prefixed() -> None:
    class Wrapper(torch.nn.Module):
        def __init__(self, module: torch.nn.Module) -> None:
            super().__init__()
            self.module = module

    chunk = torch.nn.Module()
    chunk.register_parameter("w", torch.nn.Parameter(torch.zeros(2)))
    wrapped = [Wrapper(Wrapper(chunk)), Wrapper(torch.nn.Linear(2, 2, bias=False))]
    got = megatron.parameters(wrapped)
    assert sorted(got) == ["model0.w", "model1.weight"]
    assert got["model0.w"].data_ptr() == chunk.w.data_ptr()  # no copy


def test_a_parameter_given_new_memory_after_prepare_is_refused_at_execute(tmp_path: Path) -> None:
    # Both sides handed refit param.detach(): after `param.data = new` (new weights in new memory,
    # a CPU-offload round trip) refit kept reading and writing the old memory, which it holds,
    # with no error. They hand the parameters themselves, whose memory execute compares.
    import json

    from conftest import run_ranks

    side = {"mesh": [1], "placements": ["R"]}
    manifest = tmp_path / "w.json"
    manifest.write_text(json.dumps({"format": "refit-manifest", "version": 1, "source_ranks": 1,
                                    "destination_ranks": 1, "tensors": [{"name": "weight", "shape": [4, 6],
                                    "dtype": "fp32", "source": side, "destination": side}]}))  # fmt: skip
    plan = refit.plan(refit.Problem.from_manifest(manifest), refit.Cluster.preset("cpu-host"))
    trained, served = torch.nn.Linear(6, 4, bias=False), torch.nn.Linear(6, 4, bias=False)
    given = [megatron.parameters(trained), vllm.parameters(served)]
    assert given[0]["weight"] is trained.weight and given[1]["weight"] is served.weight

    def body(rank: int, exchange: Any) -> Any:
        prepared = refit.Executor("ucx", exchange, timeout=20).prepare(plan, given[rank])
        model = served if rank else trained
        model.weight.data = torch.full((4, 6), float(rank + 1))  # every rank: none waits for another
        with pytest.raises(refit.BadInput) as refused:
            prepared.execute()
        return str(refused.value)

    for rank, message in enumerate(run_ranks(2, body, timeout=30)):
        assert isinstance(message, str), message
        assert message.startswith(f"rank {rank}: buffer 'weight': its memory moved since prepare()"), message


def test_vllm_fused_moe_weights_lose_routed_experts() -> None:
    class Experts(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.routed_experts = torch.nn.Module()
            self.routed_experts.register_parameter("w13_weight", torch.nn.Parameter(torch.zeros(1)))

    model = torch.nn.Module()
    model.experts = Experts()
    assert list(vllm.parameters(model)) == ["experts.w13_weight"]


def test_shared_experts_fused_into_the_routed_ones_are_refused_naming_the_layer() -> None:
    # ROCm AITER: the shared experts become extra experts of the FusedMoE (w13/w2 rows after the
    # routed experts' ones), and no shared_experts parameter exists.
    model = torch.nn.Module()
    model.layers = torch.nn.ModuleList([torch.nn.Module(), torch.nn.Module()])
    model.layers[1].mlp = torch.nn.Linear(2, 2)
    model.layers[1].mlp.is_fused_shared_expert_enabled = False
    assert sorted(vllm.parameters(model)) == ["layers.1.mlp.bias", "layers.1.mlp.weight"]
    model.layers[1].mlp.is_fused_shared_expert_enabled = True
    with pytest.raises(refit.BadInput, match="layers.1.mlp: is_fused_shared_expert_enabled"):
        vllm.parameters(model)


def engine(tp: int = 2, dp: int = 2, pp: int = 1, ep: bool = True, placement: str = "round_robin",
           all2all: str = "deepep_low_latency", eplb: bool = False, redundant: int = 0) -> SimpleNamespace:  # fmt: skip
    return SimpleNamespace(parallel_config=SimpleNamespace(
        tensor_parallel_size=tp, data_parallel_size=dp, pipeline_parallel_size=pp, enable_expert_parallel=ep,
        expert_placement_strategy=placement, all2all_backend=all2all, enable_eplb=eplb,
        eplb_config=SimpleNamespace(num_redundant_experts=redundant)))  # fmt: skip


def test_the_inference_layout_is_the_engines() -> None:
    assert vllm.infer_layout(engine()) == "tp=2,dp=2,ep=on,placement=round_robin,all2all=deepep_low_latency"
    assert vllm.infer_layout(engine(ep=False), engines=3) == "tp=2,dp=2,engines=3"
    # The backend comes with EP whatever the placement: it decides the shared experts' TP too.
    assert vllm.infer_layout(engine(placement="linear", all2all="flashinfer_all2allv")) == (
        "tp=2,dp=2,ep=on,placement=linear,all2all=flashinfer_all2allv")  # fmt: skip
    with pytest.raises(refit.BadInput, match="pipeline_parallel_size=2: refit's inference layouts have no pipeline"):
        vllm.infer_layout(engine(pp=2))


def test_an_engine_with_expert_load_balancing_is_refused_naming_the_setting() -> None:
    # EPLB rearranges experts between slots at run time (even with no redundant expert), so
    # expert e no longer sits where the static linear placement puts it; redundant experts add
    # slots the model's experts do not fill.
    with pytest.raises(refit.BadInput, match="parallel_config.enable_eplb: expert load balancing moves experts"):
        vllm.infer_layout(engine(placement="linear", eplb=True))
    with pytest.raises(refit.BadInput, match="parallel_config.eplb_config.num_redundant_experts=16"):
        vllm.infer_layout(engine(placement="linear", redundant=16))


def test_a_latent_attention_model_served_without_mla_is_refused() -> None:
    # MLA off (VLLM_MLA_DISABLE): DeepseekV2Attention keeps q_a_proj and kv_a_proj_with_mqa as two
    # ReplicatedLinear parameters instead of fused_qkv_a_proj [q_a; kv_a].
    deepseek, llama = SimpleNamespace(kv_lora_rank=512), SimpleNamespace(num_key_value_heads=8)
    served = engine(placement="linear")
    served.model_config = SimpleNamespace(hf_text_config=deepseek, use_mla=False)
    with pytest.raises(refit.BadInput, match="model_config.use_mla is False for a multi-head latent attention model"):
        vllm.infer_layout(served)
    served.model_config.use_mla = True
    assert vllm.infer_layout(served).startswith("tp=2,dp=2,ep=on")
    served.model_config = SimpleNamespace(hf_text_config=llama, use_mla=False)
    assert vllm.infer_layout(served).startswith("tp=2,dp=2,ep=on")


def test_a_transformer_config_of_another_model_is_refused_naming_the_field() -> None:
    model = SimpleNamespace(config=SimpleNamespace(num_layers=3, hidden_size=64, num_attention_heads=4,
                                                   num_query_groups=2), vocab_size=1024)  # fmt: skip
    with pytest.raises(refit.BadInput, match=r"TransformerConfig.num_layers is 3 but .*tiny-llama.json has num_hidden_layers = 2"):
        megatron.problem(model, MODELS / "tiny-llama.json", infer="tp=1")
    model.config.num_layers, model.config.num_query_groups = 2, 4
    with pytest.raises(refit.BadInput, match="TransformerConfig.num_query_groups is 4 but .* num_key_value_heads = 2"):
        megatron.problem(model, MODELS / "tiny-llama-vocab1023.json", infer="tp=1")


def megatron_job(monkeypatch: pytest.MonkeyPatch, **config: Any) -> SimpleNamespace:
    """A model whose TransformerConfig has `config`, in a job of tp=1, dp=8, ep=8."""
    sizes = SimpleNamespace(get_tensor_model_parallel_world_size=lambda: 1, get_context_parallel_world_size=lambda: 1,
                            get_data_parallel_world_size=lambda: 8, get_pipeline_model_parallel_world_size=lambda: 1,
                            get_expert_model_parallel_world_size=lambda: 8,
                            get_expert_tensor_parallel_world_size=lambda: 1)  # fmt: skip
    monkeypatch.setattr(megatron, "_parallel_state", lambda: sizes)
    return SimpleNamespace(config=SimpleNamespace(pipeline_model_parallel_layout=None, **config), vocab_size=1024)


def test_latent_attention_of_the_local_spec_is_laid_out_as_spec_local(monkeypatch: pytest.MonkeyPatch) -> None:
    # The local spec keeps kv_layernorm apart and builds linear_q/kv_down_proj column-parallel;
    # refit's spec=local splits their rows over tp as Megatron does.
    model = megatron_job(monkeypatch)
    model.named_parameters = lambda: [("decoder.layers.0.self_attention.linear_kv_down_proj.weight", None)]
    assert megatron.train_layout(model).endswith(",vocab_divisible_by=1024")  # the TE spec
    model.named_parameters = lambda: [("decoder.layers.0.self_attention.kv_layernorm.weight", None)]
    assert megatron.train_layout(model).endswith(",vocab_divisible_by=1024,spec=local")


@pytest.mark.parametrize("field,says", [
    # one grouped parameter 'weight' instead of weight0..weight<E_local-1>
    ("moe_single_grouped_weight", "the local experts' weights as one grouped parameter 'weight'"),
    ("use_grouped_gemm_for_shared_expert", "the shared experts as a grouped linear"),
])  # fmt: skip
def test_expert_weights_refit_cannot_lay_out_are_refused_naming_the_field(monkeypatch: pytest.MonkeyPatch, field: str,
                                                                          says: str) -> None:  # fmt: skip
    layout = megatron.train_layout(megatron_job(monkeypatch, **{field: False}))  # Megatron's default
    assert layout == "tp=1,cp=1,dp=8,pp=1,ep=8,etp=1,vocab_divisible_by=1024"
    model = megatron_job(monkeypatch, **{field: True})
    with pytest.raises(refit.BadInput, match=f"TransformerConfig.{field} = True: {says}"):
        megatron.train_layout(model)
    with pytest.raises(refit.BadInput, match=f"TransformerConfig.{field} = True"):
        megatron.problem(model, MODELS / "tiny-qwen3-moe.json", infer="tp=1", train="ep=8")


def test_glu_interleaved_experts_are_laid_out_in_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    # moe_mlp_glu_interleave_size = 8: fc1 rows g[0:8], u[0:8], g[8:16], ... of the same shape as
    # [gate; up], so a layout that left it out would swap gate and up rows silently.
    model = megatron_job(monkeypatch, moe_mlp_glu_interleave_size=8)
    assert megatron.train_layout(model).endswith(",vocab_divisible_by=1024,glu_interleave=8")
    config = MODELS / "tiny-qwen3-moe.json"
    problem = megatron.problem(model, config, infer="tp=1", train="ep=8,glu_interleave=8")
    fc1 = next(p for p in problem.parameters(0) if p.name == "decoder.layers.0.mlp.experts.linear_fc1.weight0")
    assert [r.offset // 64 for r in fc1.regions if r.tensor.endswith("up_proj")] == [8, 24, 40, 56]
    with pytest.raises(refit.BadInput, match="moe_mlp_glu_interleave_size is 8, so the layout needs glu_interleave=8"):
        megatron.problem(model, config, infer="tp=1", train="ep=8")
    with pytest.raises(refit.BadInput, match="moe_mlp_glu_interleave_size is None, so the layout needs no"):
        megatron.problem(megatron_job(monkeypatch), config, infer="tp=1", train="ep=8,glu_interleave=8")


class Prepared:
    """A prepared plan that moves nothing (the update's own checks are under test)."""

    buffers: dict = {}

    def execute(self) -> refit.ExecutionReport:
        return refit.ExecutionReport(rank=2, bytes_sent=0, bytes_received=0, elapsed_s=0.0, messages=0,
                                     bytes_stored_directly=0)  # fmt: skip


def test_an_update_that_moves_a_parameter_fails_naming_it() -> None:
    """CUDA graphs hold parameters' addresses: a parameter rebound during an update (as vLLM's
    FP8 post-processing of 0.11 did) is named."""
    model = torch.nn.Linear(4, 4, bias=False)
    worker = vllm.RefitWorkerExtension()
    worker.model_runner = SimpleNamespace(model=model)
    worker._refit = vllm._Session(Prepared(), {"weight": model.weight.data_ptr()}, process_weights=False)
    assert worker.refit_update()["rank"] == 2
    model.weight.data = torch.zeros(4, 4)
    with pytest.raises(refit.Failure, match="parameters moved in memory during the update .*: weight"):
        worker.refit_update()
