"""The training side of the integration tests: Megatron-Core's own GPTModel, built on CPU under
its parallel_state (gloo groups) with the local (Transformer-Engine-free) layer spec, wrapped in
Float16Module as Megatron's training loop wraps it, its parameters made views into one flat bf16
buffer as the distributed optimizer's _ParamAndGradBuffer makes them (DDP itself allocates that
buffer on CUDA), and loaded from the HF checkpoint.

Loading: framework_reference.py lays the checkpoint out as Megatron's TE spec names it (written
from Megatron's and Megatron-Bridge's code, independently of refit's C++); LOCAL_NAMES below
says, parameter by parameter, where the local spec keeps each of those tensors, and the
reference's spec="local" splits MLA's down projections over TP as the local spec's
ColumnParallelLinear does (the TE spec replicates them). It is written apart from
refit.integrations.megatron's renaming rules, which the test holds to it.

Four shims for megatron-core 0.16.1 on a machine without CUDA, none touching a weight's layout:
MLA's rotary embedding asks torch.cuda for a device despite use_cpu_initialization, the local
spec's core attention for MLA needs Transformer Engine (DotProductAttention takes no k_channels;
it has no parameters, so a weightless module stands in), multi_latent_attention.py tests TE's
classes with isinstance while they are mocks (HAVE_TE is True without TE installed), and with
pp > 1 the embedding copy of the last stage (tied output layer, MTP) is all-reduced with the
first stage's once at construction after moving it to CUDA (LanguageModule.
setup_embeddings_and_output_layer): that start value is skipped, as loading overwrites it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch

from checkpoint import as_torch, model_of
from framework_reference import Megatron, _megatron_rank

# TE spec name suffix -> local spec name suffix, for the tensors the two specs place apart.
LOCAL_NAMES = {
    "self_attention.linear_qkv.layer_norm_weight": "input_layernorm.weight",
    "mlp.linear_fc1.layer_norm_weight": "pre_mlp_layernorm.weight",
    "self_attention.linear_q_up_proj.layer_norm_weight": "self_attention.q_layernorm.weight",
    "self_attention.linear_kv_up_proj.layer_norm_weight": "self_attention.kv_layernorm.weight",
}


def local_name(te: str) -> str:
    """Where the local spec of megatron-core 0.16.1 keeps the TE spec's parameter `te`."""
    name = te.replace(".mtp_model_layer.", ".transformer_layer.")
    for suffix, local in LOCAL_NAMES.items():
        if name.endswith(suffix):
            return name[: -len(suffix)] + local
    if ".mlp.experts.linear_fc" in name:  # TEGroupedMLP weight<i> -> SequentialMLP local_experts.<i>
        head, fc, index = name.rpartition(".mlp.experts.")[0], name.split(".mlp.experts.")[1][:10], name.rsplit("weight", 1)[1]
        return f"{head}.mlp.experts.local_experts.{index}.{fc}.weight"
    return name


class WeightlessAttention(torch.nn.Module):
    """Stands in for the core attention of an MLA layer (no parameters; never run here)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()


def _shims() -> None:
    import megatron.core.transformer.multi_latent_attention as mla

    torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment]
    mla.HAVE_TE = False


def transformer_config(config: dict, sizes: Megatron) -> Any:
    """Megatron's TransformerConfig for the HF config, as Megatron-Bridge's providers set it."""
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    m = model_of(config)
    kw: dict[str, Any] = dict(
        num_layers=m.layers, hidden_size=m.hidden, num_attention_heads=m.heads, ffn_hidden_size=m.intermediate,
        normalization="RMSNorm", gated_linear_unit=True, add_bias_linear=False, activation_func=torch.nn.functional.silu,
        use_cpu_initialization=True, params_dtype=torch.float32, bf16=True, pipeline_dtype=torch.bfloat16,
        tensor_model_parallel_size=sizes.tp, pipeline_model_parallel_size=sizes.pp,
        virtual_pipeline_model_parallel_size=sizes.vp if sizes.vp > 1 else None,
        expert_model_parallel_size=sizes.ep, expert_tensor_parallel_size=sizes.expert_tp,
        qk_layernorm=m.qk_norm or m.latent, sequence_parallel=False,
    )  # fmt: skip
    if m.experts:
        kw.update(num_moe_experts=m.experts, moe_ffn_hidden_size=m.moe_intermediate, moe_router_topk=2,
                  moe_grouped_gemm=False, moe_layer_freq=[int(i >= m.first_dense) for i in range(m.layers)])  # fmt: skip
    if m.shared:
        kw["moe_shared_expert_intermediate_size"] = m.shared
    if m.o_bias or m.mlp_bias:  # Llama's attention_bias and mlp_bias: Megatron has one switch for both
        if m.o_bias != m.mlp_bias:
            raise ValueError("add_bias_linear gives o_proj and the MLP biases together: attention_bias and "
                             "mlp_bias must agree")  # fmt: skip
        kw["add_bias_linear"] = True
    if m.qkv_bias:
        kw["add_qkv_bias"] = True
    if m.mtp:
        kw["mtp_num_layers"] = m.mtp
    if not m.latent:
        return TransformerConfig(num_query_groups=m.kv_heads, kv_channels=m.head_dim, **kw)
    _shims()
    return MLATransformerConfig(multi_latent_attention=True, q_lora_rank=m.q_lora or None, kv_lora_rank=m.kv_lora,
                                qk_head_dim=m.nope, qk_pos_emb_head_dim=m.rope, v_head_dim=m.v_head, rope_type="rope",
                                moe_router_enable_expert_bias=True, moe_router_score_function="sigmoid", **kw)  # fmt: skip


def build(config: dict, sizes: Megatron) -> list[Any]:
    """This rank's GPTModel chunks (one per virtual pipeline stage), each wrapped in
    Float16Module (bf16); parallel_state must be initialised with `sizes`."""
    from megatron.core import parallel_state as ps
    from megatron.core.models.common.language_module.language_module import LanguageModule
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec, get_gpt_mtp_block_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.module import Float16Module

    tc = transformer_config(config, sizes)
    pp_rank = ps.get_pipeline_model_parallel_rank()
    multiple = sizes.vocab_multiple  # make_vocab_size_divisible_by (128) * tp
    LanguageModule._is_in_embd_group = lambda self: False  # type: ignore[method-assign]
    chunks = []
    for v in range(sizes.vp):
        stage = {"vp_stage": v} if sizes.vp > 1 else {}
        spec = get_gpt_decoder_block_spec(tc, use_transformer_engine=False, normalization="RMSNorm", pp_rank=pp_rank,
                                          **stage)  # fmt: skip
        if tc.multi_latent_attention:
            for layer in spec.layer_specs:
                layer.submodules.self_attention.submodules.core_attention = WeightlessAttention
        mtp = (get_gpt_mtp_block_spec(tc, spec, use_transformer_engine=False, pp_rank=pp_rank, **stage)
               if tc.mtp_num_layers else None)  # fmt: skip
        model = GPTModel(config=tc, transformer_layer_spec=spec,
                         vocab_size=math.ceil(config["vocab_size"] / multiple) * multiple, max_sequence_length=64,
                         pre_process=ps.is_pipeline_first_stage(ignore_virtual=sizes.vp == 1, **stage),
                         post_process=ps.is_pipeline_last_stage(ignore_virtual=sizes.vp == 1, **stage),
                         share_embeddings_and_output_weights=config.get("tie_word_embeddings", False),
                         mtp_block_spec=mtp, position_embedding_type="rope", **stage)  # fmt: skip
        chunks.append(Float16Module(tc, model))
    return chunks


def flatten(model: torch.nn.Module) -> torch.Tensor:
    """Makes every parameter a view into one flat buffer, in reverse order of named_parameters,
    each start rounded up to 64 elements, as _ParamAndGradBuffer lays its param_data out under
    the distributed optimizer; returns the buffer."""
    params = [p for _, p in model.named_parameters()][::-1]
    starts, at = [], 0
    for p in params:
        starts.append(at)
        at = (at + p.numel() + 63) // 64 * 64
    flat = torch.zeros(at, dtype=params[0].dtype)
    for p, start in zip(params, starts):
        view = flat[start : start + p.numel()].view_as(p)
        view.copy_(p.data)
        p.data = view
    return flat


def load(chunks: list[torch.nn.Module], state: dict[str, np.ndarray], config: dict, sizes: Megatron) -> list[str]:
    """Copies the checkpoint into the rank's parameters (and routers' fp32 expert biases), by the
    reference's layout (chunk v's names after "model<v>." when there are several) and
    LOCAL_NAMES; returns the names of parameters nothing was loaded into."""
    from megatron.core import parallel_state as ps

    local = dataclasses.replace(sizes, spec="local")  # MLA's down projections column-parallel
    expected = _megatron_rank(state, model_of(config), local, ps.get_tensor_model_parallel_rank(),
                              ps.get_pipeline_model_parallel_rank(), ps.get_expert_tensor_parallel_rank(),
                              ps.get_expert_model_parallel_rank())  # fmt: skip
    own: dict[str, torch.Tensor] = {}
    for v, chunk in enumerate(chunks):
        bare, prefix = chunk.module, f"model{v}." if len(chunks) > 1 else ""
        for module in bare.modules():  # Megatron keeps expert_bias fp32 (_maintain_float32_expert_bias)
            if hasattr(module, "_maintain_float32_expert_bias"):
                module._maintain_float32_expert_bias()
        own |= {prefix + n: t for n, t in bare.named_parameters()}
        own |= {prefix + n: b for n, b in bare.named_buffers() if n.endswith("expert_bias")}
    for te, array in expected.items():
        if local_name(te) not in own:
            raise KeyError(f"the checkpoint's {te} has no parameter {local_name(te)} in the model: {sorted(own)}")
        param = own.pop(local_name(te))
        if tuple(param.shape) != array.shape:  # copy_ would broadcast some mismatches
            raise ValueError(f"{local_name(te)}: the model's shape {tuple(param.shape)}, the checkpoint's {array.shape}")
        with torch.no_grad():
            param.copy_(as_torch(array))
    return sorted(own)
