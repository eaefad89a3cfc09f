"""How Megatron-Core and vLLM lay a Hugging Face checkpoint out on their ranks, in numpy, written
from the frameworks' own code and independently of refit's C++ storage maps: the reference that
tests/python/test_storage.py holds `refit run --storage framework` to, byte for byte.

Each builder takes a full HF-named state dict (name -> array; routed experts per expert,
``model.layers.L.mlp.experts.E.gate_proj.weight``) and returns, per global rank, the rank's
parameters by the name the framework's ``named_parameters()`` gives them. Sources, by function:

Megatron-Core (TE layer spec; names as Megatron-Bridge maps them):
  * ranks: ``parallel_state.initialize_model_parallel`` order "tp-cp-ep-dp-pp", a dense rank is
    tp + TP*(dp + DP*pp), an expert rank etp + ETP*(ep + EP*(edp + EDP*pp)) (``RankGenerator``).
  * layers split evenly over pipeline stages, numbered locally per stage
    (``transformer_block.get_num_layers_to_build``, ``TransformerBlock._build_layers``).
  * virtual pipeline stages: pp*vp model chunks, chunk (vp_stage v, pp_rank s) starting at layer
    v*layers/vp + s*layers/(pp*vp) (``get_transformer_layer_offset``); a layout string unrolled by
    ``PipelineParallelLayerLayout.parse_str_to_list``, its stage i being (vp_stage i // pp,
    pp_rank i % pp) (``PipelineParallelLayerLayout.__init__``). Embedding on (0, 0), output layer
    on (pp-1, vp-1) (``training.get_model``: pre_process, post_process), MTP on the chunk the layout
    gives it (``mtp_on_this_rank``) with a copy of the embedding (``GPTModel.__init__``), the final
    norm with the last decoder layer when there is MTP (``has_final_layernorm_in_this_stage``).
    A rank's chunks are its state dict's ``model<v>`` entries when vp > 1
    (``checkpointing.generate_state_dict``).
  * vocab padded to make_vocab_size_divisible_by (128, or as given; 0: unpadded, as
    Megatron-Bridge without should_pad_vocab) * TP, zero rows, split evenly
    (``_vocab_size_with_padding``, ``VocabUtility.vocab_range_from_global_vocab_size``).
  * ``linear_qkv``: per query group [its q heads; k head; v head] (``SelfAttention.
    get_query_key_value_tensors``: [sq, b, ng * (np/ng + 2) * hn]), rows split evenly over TP
    (the column-parallel linear's ``divide(output_size, tp_size)``); with TP beyond the query groups
    a rank's slice is part of one group and may mix q with k/v or cut a head ("we split 'q1 q2 k1
    v1' over multiple ranks").
  * ``linear_fc1``: [gate shard; up shard] (``GatedMLPMapping`` in Megatron-Bridge
    ``param_mapping.py``), ``linear_proj``/``linear_fc2`` split along columns.
  * routed experts: ``TEGroupedMLP`` keeps ``linear_fc1.weight<i>`` / ``linear_fc2.weight<i>`` per
    local expert i, experts ep_rank*E/EP onwards (``BaseMoELayer.__init__``), sharded over ETP;
    with ``moe_mlp_glu_interleave_size`` s, fc1's rows on a rank as blocks of s gate and s up rows
    taking turns (``TEGroupedMLP._remove_glu_interleaving`` undoes it on the output).
  * MLA (DeepSeek-V3): ``linear_q_down_proj``/``linear_kv_down_proj`` replicated (TELinear
    'duplicated'; column-parallel in the local layer spec, ``get_gpt_layer_local_spec``), ``linear_q_up_proj``/``linear_kv_up_proj`` column-parallel with the q/kv
    LoRA norms fused in, the input norm separate (Megatron-Bridge ``deepseek/common.py``);
    without a q LoRA rank ``linear_q_proj`` column-parallel (``MLASelfAttention.__init__``); the
    router bias ``expert_bias`` fp32 (``TopKRouter``).
  * Qwen2's q/k/v biases: ``linear_qkv.bias`` interleaved per group like the weight's rows
    (``QKVMapping``); Llama's (``add_bias_linear``) too, with ``linear_proj.bias`` and
    ``linear_fc2.bias`` whole and ``linear_fc1.bias`` [gate shard; up shard]; tied embeddings: the output layer's stage keeps a copy of the embedding as
    ``output_layer.weight`` (``shared_embedding_or_output_weight``), nothing on a single stage.
  * Mixtral: ``block_sparse_moe.gate`` is ``mlp.router``, experts' w1/w3/w2 the TEGroupedMLP's
    [w1; w3] and w2 (Megatron-Bridge ``mixtral_bridge.py``, ``GatedMLPMapping``).

vLLM:
  * ranks: tp + TP*dp (``parallel_state.initialize_model_parallel``).
  * vocab padded to a multiple of 64, zero rows, split evenly over TP
    (``VocabParallelEmbedding.__init__``, ``pad_vocab_size``, ``vocab_range_from_global_vocab_size``).
  * ``qkv_proj``: [q shard; k shard; v shard], a kv head replicated on TP/kv ranks when TP exceeds
    the kv heads (``QKVParallelLinear.__init__`` and ``weight_loader``).
  * ``gate_up_proj``: [gate shard; up shard] (``MergedColumnParallelLinear``); ``o_proj``/
    ``down_proj`` split along columns (``RowParallelLinear``).
  * MLA: ``fused_qkv_a_proj`` [q_a_proj; kv_a_proj_with_mqa] replicated, ``q_b_proj``/``kv_b_proj``
    column-parallel (``DeepseekV2MLAAttention.__init__``); without a q LoRA rank ``q_proj``
    column-parallel and ``kv_a_proj_with_mqa`` replicated, apart; the router bias fp32
    (``DeepseekV2MoE``).
  * ``FusedMoE``: ``w13_weight`` [E_local, 2*I/tp, H] gate rows then up rows (``_load_w13``),
    ``w2_weight`` [E_local, H, I/tp]; without EP the MoE TP is flattened over DP*TP
    (``FusedMoEParallelConfig.make``); with EP experts are placed ``linear`` or ``round_robin``
    (``determine_expert_map``) over EP = DP*TP, ep_rank = dp_rank*TP + tp_rank; Mixtral's under
    ``block_sparse_moe.experts`` from w1/w3/w2 (``MixtralMoE``, ``make_expert_params_mapping``),
    its router ``block_sparse_moe.gate.weight`` replicated.
  * ``qkv_proj.bias`` [q; k; v] like the weight; Llama's ``gate_up_proj.bias`` [gate shard; up
    shard], ``o_proj.bias`` and ``down_proj.bias`` whole (``LlamaMLP``, ``LlamaAttention``); tied embeddings: no ``lm_head`` parameter.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

Params = dict[str, np.ndarray]


@dataclass(frozen=True)
class Model:
    """The HF config.json fields the layouts need."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    intermediate: int
    experts: int = 0
    expert_groups: int = 1  # n_group: vLLM's num_expert_group
    moe_intermediate: int = 0
    qk_norm: bool = False
    qkv_bias: bool = False  # Qwen2, Llama's attention_bias: q/k/v biases
    o_bias: bool = False  # Llama's attention_bias: o_proj bias
    mlp_bias: bool = False  # Llama's mlp_bias: the dense MLP's gate/up/down biases
    tied: bool = False  # tie_word_embeddings: no lm_head of its own
    # The MoE module and its experts' gate/up/down names: Mixtral's block_sparse_moe, w1/w3/w2
    moe_module: str = "mlp"
    expert_names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj")
    # DeepSeek-V3 (MLA): LoRA ranks and head dims, dense layers first, shared experts' intermediate
    q_lora: int = 0
    kv_lora: int = 0
    nope: int = 0
    rope: int = 0
    v_head: int = 0
    first_dense: int = 0
    shared: int = 0
    mtp: int = 0  # MTP layers included (refit's --mtp), after the decoder layers
    # DeepseekV2MoE: the router's e_score_correction_bias, only for topk_method "noaux_tc"
    router_bias: bool = False

    @property
    def latent(self) -> bool:
        return self.kv_lora > 0

    @staticmethod
    def from_config(c: dict) -> "Model":
        mixtral, llama = c["model_type"] == "mixtral", c["model_type"] == "llama"
        # LlamaDecoderLayer: attention_bias or bias for q/k/v and o, a qkv_bias key for q/k/v alone
        attention_bias = llama and bool(c.get("attention_bias") or c.get("bias"))
        qkv_bias = bool(c["qkv_bias"]) if llama and "qkv_bias" in c else attention_bias
        experts = c.get("num_experts", c.get("n_routed_experts", c.get("num_local_experts", 0)))
        return Model(hidden=c["hidden_size"], layers=c["num_hidden_layers"], heads=c["num_attention_heads"],
                     kv_heads=c["num_key_value_heads"],
                     head_dim=c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"],
                     vocab=c["vocab_size"], intermediate=c["intermediate_size"],
                     experts=experts, expert_groups=c.get("n_group") or 1,
                     moe_intermediate=c["intermediate_size"] if mixtral else c.get("moe_intermediate_size", 0),
                     qk_norm=c["model_type"].startswith("qwen3"), qkv_bias=c["model_type"] == "qwen2" or qkv_bias,
                     o_bias=attention_bias, mlp_bias=llama and bool(c.get("mlp_bias")),
                     tied=c.get("tie_word_embeddings", False),
                     moe_module="block_sparse_moe" if mixtral else "mlp",
                     expert_names=("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj"),
                     q_lora=c.get("q_lora_rank") or 0,
                     kv_lora=c.get("kv_lora_rank", 0), nope=c.get("qk_nope_head_dim", 0),
                     rope=c.get("qk_rope_head_dim", 0), v_head=c.get("v_head_dim", 0),
                     first_dense=c.get("first_k_dense_replace", 0),
                     shared=c.get("n_shared_experts", 0) * c.get("moe_intermediate_size", 0),
                     router_bias=c.get("topk_method") == "noaux_tc")  # fmt: skip


def _attention_shapes(m: Model, p: str) -> dict[str, tuple[int, ...]]:
    if not m.latent:
        out = {p + "self_attn.q_proj.weight": (m.heads * m.head_dim, m.hidden),
               p + "self_attn.k_proj.weight": (m.kv_heads * m.head_dim, m.hidden),
               p + "self_attn.v_proj.weight": (m.kv_heads * m.head_dim, m.hidden),
               p + "self_attn.o_proj.weight": (m.hidden, m.heads * m.head_dim)}  # fmt: skip
        if m.qk_norm:
            out[p + "self_attn.q_norm.weight"] = (m.head_dim,)
            out[p + "self_attn.k_norm.weight"] = (m.head_dim,)
        if m.qkv_bias:
            out[p + "self_attn.q_proj.bias"] = (m.heads * m.head_dim,)
            out[p + "self_attn.k_proj.bias"] = (m.kv_heads * m.head_dim,)
            out[p + "self_attn.v_proj.bias"] = (m.kv_heads * m.head_dim,)
        if m.o_bias:
            out[p + "self_attn.o_proj.bias"] = (m.hidden,)
        return out
    q_rows = m.heads * (m.nope + m.rope)
    q = ({p + "self_attn.q_a_proj.weight": (m.q_lora, m.hidden), p + "self_attn.q_a_layernorm.weight": (m.q_lora,),
          p + "self_attn.q_b_proj.weight": (q_rows, m.q_lora)} if m.q_lora
         else {p + "self_attn.q_proj.weight": (q_rows, m.hidden)})  # fmt: skip
    return q | {p + "self_attn.kv_a_proj_with_mqa.weight": (m.kv_lora + m.rope, m.hidden),
            p + "self_attn.kv_a_layernorm.weight": (m.kv_lora,),
            p + "self_attn.kv_b_proj.weight": (m.heads * (m.nope + m.v_head), m.kv_lora),
            p + "self_attn.o_proj.weight": (m.hidden, m.heads * m.v_head)}  # fmt: skip


def _mlp_shapes(p: str, inter: int, hidden: int,
                names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj")) -> dict[str, tuple[int, ...]]:  # fmt: skip
    gate, up, down = names
    return {p + f"{gate}.weight": (inter, hidden), p + f"{up}.weight": (inter, hidden),
            p + f"{down}.weight": (hidden, inter)}  # fmt: skip


def _moe(m: Model, layer: int) -> bool:
    return m.experts > 0 and layer >= m.first_dense


def hf_state_dict(m: Model, rng: np.random.Generator) -> Params:
    """Random bf16 weights (as uint16 bit patterns) under their HF names; DeepSeek's router bias
    fp32 (uint32)."""
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (m.vocab, m.hidden),
        "model.norm.weight": (m.hidden,),
    }
    if not m.tied:
        shapes["lm_head.weight"] = (m.vocab, m.hidden)
    fp32: dict[str, tuple[int, ...]] = {}
    for L in range(m.layers + m.mtp):
        p = f"model.layers.{L}."
        if L >= m.layers:  # the MTP layer's own weights; its embedding and head are the main model's
            shapes.update({p + "enorm.weight": (m.hidden,), p + "hnorm.weight": (m.hidden,),
                           p + "eh_proj.weight": (m.hidden, 2 * m.hidden), p + "shared_head.norm.weight": (m.hidden,)})  # fmt: skip
        shapes[p + "input_layernorm.weight"] = (m.hidden,)
        shapes[p + "post_attention_layernorm.weight"] = (m.hidden,)
        shapes.update(_attention_shapes(m, p))
        if not _moe(m, L):
            shapes.update(_mlp_shapes(p + "mlp.", m.intermediate, m.hidden))
            if m.mlp_bias:
                shapes.update({p + "mlp.gate_proj.bias": (m.intermediate,), p + "mlp.up_proj.bias": (m.intermediate,),
                               p + "mlp.down_proj.bias": (m.hidden,)})  # fmt: skip
            continue
        shapes[p + f"{m.moe_module}.gate.weight"] = (m.experts, m.hidden)
        if m.router_bias:
            fp32[p + "mlp.gate.e_score_correction_bias"] = (m.experts,)
        for e in range(m.experts):
            shapes.update(_mlp_shapes(p + f"{m.moe_module}.experts.{e}.", m.moe_intermediate, m.hidden,
                                      m.expert_names))  # fmt: skip
        if m.shared:
            shapes.update(_mlp_shapes(p + "mlp.shared_experts.", m.shared, m.hidden))
    out = {n: rng.integers(1, 1 << 16, size=s, dtype=np.uint16) for n, s in shapes.items()}
    out.update({n: rng.integers(1, 1 << 32, size=s, dtype=np.uint32) for n, s in fp32.items()})
    return out


def _rows(a: np.ndarray, parts: int, i: int) -> np.ndarray:
    """Part i of `parts` even parts of a's rows (the frameworks refuse uneven splits)."""
    assert a.shape[0] % parts == 0, (a.shape, parts)
    n = a.shape[0] // parts
    return a[i * n : (i + 1) * n]


def _cols(a: np.ndarray, parts: int, i: int) -> np.ndarray:
    return _rows(a.T, parts, i).T


def _padded_vocab(w: np.ndarray, multiple: int, tp: int, tp_rank: int) -> np.ndarray:
    padded = np.zeros((math.ceil(w.shape[0] / multiple) * multiple, *w.shape[1:]), dtype=w.dtype)
    padded[: w.shape[0]] = w
    return _rows(padded, tp, tp_rank)


@dataclass(frozen=True)
class Megatron:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    etp: int = 0  # 0: expert_tensor_parallel_size left unset, which Megatron makes tp
    vp: int = 1
    layout: str = ""  # --pipeline-model-parallel-layout, e.g. "Et|(tt|)*30mL"
    # --make-vocab-size-divisible-by; 0: unpadded (Megatron-Bridge without should_pad_vocab)
    vocab_divisible_by: int = 128
    spec: str = "te"  # the layer spec: "te" (Transformer Engine) or "local"
    glu_interleave: int = 0  # moe_mlp_glu_interleave_size; 0: unset

    @property
    def vocab_multiple(self) -> int:
        """What the vocab is padded to a multiple of (calculate_padded_vocab_size); unpadded, the
        split's divide() needs tp to divide it, so padding to tp adds nothing."""
        return max(self.vocab_divisible_by, 1) * self.tp

    @property
    def world(self) -> int:
        return self.tp * self.dp * self.pp

    @property
    def expert_tp(self) -> int:
        """``ModelParallelConfig.__post_init__``: expert_tensor_parallel_size defaults to tp."""
        return self.etp or self.tp


def megatron_params(sd: Params, m: Model, c: Megatron) -> dict[int, Params]:
    out: dict[int, Params] = {}
    etp = c.expert_tp
    edp = c.tp * c.dp // (c.ep * etp)
    for r in range(c.world):
        tp_rank, dp_rank, pp_rank = r % c.tp, r // c.tp % c.dp, r // (c.tp * c.dp)
        etp_rank, ep_rank = r % etp, r // etp % c.ep
        assert r // (etp * c.ep * edp) == pp_rank
        out[r] = _megatron_rank(sd, m, c, tp_rank, pp_rank, etp_rank, ep_rank)
    return out


def _layout_stages(layout: str) -> list[str]:
    """``parse_str_to_list``: commas dropped, "(..)*n" then "x*n" unrolled, split at '|'."""
    s = layout.replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        s = re.sub(pattern, lambda x: x.group(1) * int(x.group(2)), s)
    return s.split("|")


def _chunks(m: Model, c: Megatron) -> list[tuple[list[int], int]]:
    """(decoder layers, MTP layers) of chunk vp_stage*pp + pp_rank."""
    if c.layout:
        stages, out, layer = _layout_stages(c.layout), [], 0
        for st in stages:
            out.append((list(range(layer, layer + st.count("t"))), st.count("m")))
            layer += st.count("t")
        return out
    per_chunk = m.layers // (c.pp * c.vp)
    out = []
    for v in range(c.vp):
        for s in range(c.pp):
            offset = v * (m.layers // c.vp) + s * per_chunk  # get_transformer_layer_offset
            out.append((list(range(offset, offset + per_chunk)), 0))
    layers, _ = out[-1]
    out[-1] = (layers, m.mtp)  # no layout: MTP on the last stage
    return out


def _megatron_rank(sd: Params, m: Model, c: Megatron, tp_rank: int, pp_rank: int, etp_rank: int,
                   ep_rank: int) -> Params:  # fmt: skip
    p: Params = {}
    chunks = _chunks(m, c)
    vp = len(chunks) // c.pp  # a layout's stages set vp
    for v in range(vp):
        layers, mtp = chunks[v * c.pp + pp_rank]
        pre, post = pp_rank == 0 and v == 0, pp_rank == c.pp - 1 and v == vp - 1
        chunk = _megatron_chunk(sd, m, c, layers, mtp, pre, post, tp_rank, etp_rank, ep_rank)
        p.update({(f"model{v}." if vp > 1 else "") + n: a for n, a in chunk.items()})
    return p


def _megatron_chunk(sd: Params, m: Model, c: Megatron, layers: list[int], mtp: int, pre: bool, post: bool,
                    tp_rank: int, etp_rank: int, ep_rank: int) -> Params:  # fmt: skip
    """One model chunk (GPTModel) of a rank: `layers` numbered from 0, `mtp` MTP layers."""
    p: Params = {}
    if pre or mtp:  # the MTP chunk keeps a copy of the embedding (setup_embeddings_and_output_layer)
        p["embedding.word_embeddings.weight"] = _padded_vocab(sd["model.embed_tokens.weight"], c.vocab_multiple, c.tp,
                                                              tp_rank)  # fmt: skip
    if post and not (m.tied and pre):  # tied: the last stage's copy of the embedding is the output layer's
        head = sd["model.embed_tokens.weight" if m.tied else "lm_head.weight"]
        p["output_layer.weight"] = _padded_vocab(head, c.vocab_multiple, c.tp, tp_rank)
    if (post and not m.mtp) or (m.mtp and m.layers - 1 in layers):
        p["decoder.final_layernorm.weight"] = sd["model.norm.weight"]
    for local, layer in enumerate(layers):
        p.update(_megatron_layer(sd, m, c, layer, f"decoder.layers.{local}.", tp_rank, etp_rank, ep_rank))
    # MultiTokenPredictionBlock, run on the main embedding and output layer.
    for k in range(mtp):
        h, d = f"model.layers.{m.layers + k}.", f"mtp.layers.{k}."
        p[d + "enorm.weight"] = sd[h + "enorm.weight"]
        p[d + "hnorm.weight"] = sd[h + "hnorm.weight"]
        p[d + "eh_proj.weight"] = _rows(sd[h + "eh_proj.weight"], c.tp, tp_rank)  # ColumnParallelLinear
        p[d + "final_layernorm.weight"] = sd[h + "shared_head.norm.weight"]
        p.update(_megatron_layer(sd, m, c, m.layers + k, d + "mtp_model_layer.", tp_rank, etp_rank, ep_rank))
    return p


def _megatron_layer(sd: Params, m: Model, c: Megatron, layer: int, d: str, tp_rank: int, etp_rank: int,
                    ep_rank: int) -> Params:  # fmt: skip
    """HF layer `layer` as Megatron's TransformerLayer named `d` holds it."""
    h = f"model.layers.{layer}."
    p = _megatron_attention(sd, m, c, tp_rank, h, d)
    if not _moe(m, layer):
        p[d + "mlp.linear_fc1.layer_norm_weight"] = sd[h + "post_attention_layernorm.weight"]
        p.update(_gated(sd, h + "mlp.", d + "mlp.linear_fc1.weight", d + "mlp.linear_fc2.weight", c.tp, tp_rank))
        if m.mlp_bias:  # add_bias_linear: fc1's bias [gate shard; up shard], fc2's whole on every rank
            p.update(_gated_bias(sd, h + "mlp.", d + "mlp.linear_fc1.bias", d + "mlp.linear_fc2.bias", c.tp, tp_rank))
        return p
    p[d + "pre_mlp_layernorm.weight"] = sd[h + "post_attention_layernorm.weight"]
    p[d + "mlp.router.weight"] = sd[h + f"{m.moe_module}.gate.weight"]
    if m.router_bias:
        p[d + "mlp.router.expert_bias"] = sd[h + "mlp.gate.e_score_correction_bias"]
    if m.shared:
        p.update(_gated(sd, h + "mlp.shared_experts.", d + "mlp.shared_experts.linear_fc1.weight",
                        d + "mlp.shared_experts.linear_fc2.weight", c.tp, tp_rank))  # fmt: skip
    local_experts = m.experts // c.ep
    for i in range(local_experts):
        p.update(_gated(sd, f"{h}{m.moe_module}.experts.{ep_rank * local_experts + i}.",
                        d + f"mlp.experts.linear_fc1.weight{i}", d + f"mlp.experts.linear_fc2.weight{i}",
                        c.expert_tp, etp_rank, m.expert_names))  # fmt: skip
        if c.glu_interleave:
            fc1 = d + f"mlp.experts.linear_fc1.weight{i}"
            p[fc1] = _glu_interleaved(p[fc1], c.glu_interleave)
    return p


def _glu_interleaved(fc1: np.ndarray, s: int) -> np.ndarray:
    """A rank's [gate; up] fc1 rows as moe_mlp_glu_interleave_size = s keeps them: blocks of s
    gate rows and s up rows taking turns, the inverse of TEGroupedMLP._remove_glu_interleaving
    (which reshapes fc1's output to [..., n/(2s), 2, s] and swaps the middle axes)."""
    gate, up = np.split(fc1, 2)
    blocks = (gate.shape[0] // s, s, *gate.shape[1:])
    return np.stack([gate.reshape(blocks), up.reshape(blocks)], axis=1).reshape(fc1.shape)


def _gated(sd: Params, hf: str, fc1: str, fc2: str, tp: int, tp_rank: int,
           names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj")) -> Params:  # fmt: skip
    """[gate shard; up shard] and the down projection's columns, as Megatron's linear_fc1/fc2 and
    vLLM's gate_up_proj/down_proj (and w13/w2 per expert) hold them."""
    gate, up, down = names
    return {fc1: np.concatenate([_rows(sd[hf + f"{gate}.weight"], tp, tp_rank),
                                 _rows(sd[hf + f"{up}.weight"], tp, tp_rank)]),
            fc2: _cols(sd[hf + f"{down}.weight"], tp, tp_rank)}  # fmt: skip


def _gated_bias(sd: Params, hf: str, fc1: str, fc2: str, tp: int, tp_rank: int) -> Params:
    """The biases of _gated's projections: fc1's [gate shard; up shard], fc2's whole (a
    row-parallel bias is added once after the reduction)."""
    return {fc1: np.concatenate([_rows(sd[hf + "gate_proj.bias"], tp, tp_rank),
                                 _rows(sd[hf + "up_proj.bias"], tp, tp_rank)]),
            fc2: sd[hf + "down_proj.bias"]}  # fmt: skip


def _megatron_attention(sd: Params, m: Model, c: Megatron, tp_rank: int, h: str, d: str) -> Params:
    a, tp = d + "self_attention.", c.tp
    # MLA's down projections: TELinear 'duplicated' in the TE spec, column-parallel in the local
    # one (get_gpt_layer_local_spec: linear_q_down_proj=column_parallel_linear()).
    down_tp = tp if c.spec == "local" else 1
    down_rank = tp_rank if c.spec == "local" else 0
    p: Params = {a + "linear_proj.weight": _cols(sd[h + "self_attn.o_proj.weight"], tp, tp_rank)}
    if m.o_bias:  # RowParallelLinear: the whole bias on every rank
        p[a + "linear_proj.bias"] = sd[h + "self_attn.o_proj.bias"]
    if m.latent and not m.q_lora:  # MLASelfAttention without q LoRA: linear_q_proj, column-parallel
        p[a + "linear_q_proj.weight"] = _rows(sd[h + "self_attn.q_proj.weight"], tp, tp_rank)
    if m.latent and m.q_lora:
        p |= {a + "linear_q_down_proj.weight": _rows(sd[h + "self_attn.q_a_proj.weight"], down_tp, down_rank),
              a + "linear_q_up_proj.layer_norm_weight": sd[h + "self_attn.q_a_layernorm.weight"],
              a + "linear_q_up_proj.weight": _rows(sd[h + "self_attn.q_b_proj.weight"], tp, tp_rank)}  # fmt: skip
    if m.latent:
        return p | {d + "input_layernorm.weight": sd[h + "input_layernorm.weight"],
                    a + "linear_kv_down_proj.weight": _rows(sd[h + "self_attn.kv_a_proj_with_mqa.weight"], down_tp,
                                                            down_rank),
                    a + "linear_kv_up_proj.layer_norm_weight": sd[h + "self_attn.kv_a_layernorm.weight"],
                    a + "linear_kv_up_proj.weight": _rows(sd[h + "self_attn.kv_b_proj.weight"], tp, tp_rank)}  # fmt: skip
    groups, qpg, hd = m.kv_heads, m.heads // m.kv_heads, m.head_dim
    q = sd[h + "self_attn.q_proj.weight"].reshape(groups, qpg * hd, m.hidden)
    k = sd[h + "self_attn.k_proj.weight"].reshape(groups, hd, m.hidden)
    v = sd[h + "self_attn.v_proj.weight"].reshape(groups, hd, m.hidden)
    # The whole interleaved weight split evenly, whatever a slice's boundaries cut.
    p[a + "linear_qkv.weight"] = _rows(np.concatenate([q, k, v], axis=1).reshape(-1, m.hidden), tp, tp_rank)
    if m.qkv_bias:  # the bias interleaved per group like the weight's rows
        qb, kb, vb = (sd[h + f"self_attn.{x}_proj.bias"].reshape(groups, -1) for x in "qkv")
        p[a + "linear_qkv.bias"] = _rows(np.concatenate([qb, kb, vb], axis=1).reshape(-1), tp, tp_rank)
    p[a + "linear_qkv.layer_norm_weight"] = sd[h + "input_layernorm.weight"]
    if m.qk_norm:
        p[a + "q_layernorm.weight"] = sd[h + "self_attn.q_norm.weight"]
        p[a + "k_layernorm.weight"] = sd[h + "self_attn.k_norm.weight"]
    return p


@dataclass(frozen=True)
class Vllm:
    """`engines` separate vLLM engines, each of data_parallel_size `dp` (internal data parallel) and
    tensor_parallel_size `tp`."""

    tp: int = 1
    dp: int = 1
    expert_parallel: bool = False
    placement: str = "linear"  # or "round_robin" (expert_placement_strategy)
    engines: int = 1
    all2all: str = "allgather_reducescatter"  # all2all_backend

    @property
    def world(self) -> int:
        return self.tp * self.dp * self.engines


# The all2all backends on which vLLM 0.33 does not run MoE layers sequence-parallel
# (ParallelConfig.use_sequence_parallel_moe lists the others).
NO_SEQUENCE_PARALLEL_MOE = ("moonep", "flashinfer_all2allv", "flashinfer_nvlink_two_sided")


def vllm_params(sd: Params, m: Model, c: Vllm, first_rank: int) -> dict[int, Params]:
    """Parameters of the inference ranks, keyed by global rank (first_rank onwards): engine after
    engine, each laid out [DP, TP] (``initialize_model_parallel``), and the same in every engine."""
    one = {tp_rank + c.tp * dp_rank: _vllm_rank(sd, m, c, tp_rank, dp_rank)
           for dp_rank in range(c.dp) for tp_rank in range(c.tp)}  # fmt: skip
    size = c.tp * c.dp
    return {first_rank + e * size + r: params for e in range(c.engines) for r, params in one.items()}


def _placement(m: Model, c: Vllm) -> str:
    """The placement vLLM uses (determine_expert_placement_strategy): round_robin only with expert
    groups, EP over several ranks, and with dp > 1 (all-to-all MoE kernels) on a backend that
    builds round-robin routing tables."""
    all_to_all = c.dp > 1
    if c.placement != "round_robin" or m.expert_groups <= 1 or c.tp * c.dp <= 1:
        return "linear"
    if all_to_all and c.all2all not in ("deepep_low_latency", "nixl_ep"):
        return "linear"
    return "round_robin"


def _experts_of(m: Model, c: Vllm, tp_rank: int, dp_rank: int) -> tuple[list[int], int, int]:
    """(experts held, MoE tp size, MoE tp rank): FusedMoEParallelConfig.make, determine_expert_map."""
    if not c.expert_parallel:
        return list(range(m.experts)), c.tp * c.dp, dp_rank * c.tp + tp_rank
    ep, ep_rank = c.tp * c.dp, dp_rank * c.tp + tp_rank
    if _placement(m, c) == "round_robin":
        return list(range(ep_rank, m.experts, ep)), 1, 0
    base, rem = divmod(m.experts, ep)
    start = ep_rank * base + min(ep_rank, rem)
    return list(range(start, start + base + (1 if ep_rank < rem else 0))), 1, 0


def _kv_rows(w: np.ndarray, m: Model, c: Vllm, tp_rank: int) -> np.ndarray:
    """A TP rank's rows of k_proj or v_proj (weight or bias): its kv heads, or with fewer kv heads
    than TP ranks the one it shares with tp/kv others (QKVParallelLinear)."""
    if m.kv_heads >= c.tp:
        return _rows(w, c.tp, tp_rank)
    head = tp_rank // (c.tp // m.kv_heads)
    return w[head * m.head_dim : (head + 1) * m.head_dim]


def _vllm_attention(sd: Params, m: Model, c: Vllm, tp_rank: int, h: str, o: str) -> Params:
    """HF layer prefix `h`'s attention as vLLM's module `o` holds it."""
    a, q = h + "self_attn.", o + "self_attn."
    p: Params = {q + "o_proj.weight": _cols(sd[a + "o_proj.weight"], c.tp, tp_rank)}
    if m.o_bias:  # RowParallelLinear: the whole bias on every rank
        p[q + "o_proj.bias"] = sd[a + "o_proj.bias"]
    if m.latent and not m.q_lora:  # DeepseekV2MLAAttention: q_proj column-parallel, kv_a replicated
        p |= {q + "q_proj.weight": _rows(sd[a + "q_proj.weight"], c.tp, tp_rank),
              q + "kv_a_proj_with_mqa.weight": sd[a + "kv_a_proj_with_mqa.weight"]}  # fmt: skip
    if m.latent and m.q_lora:
        p |= {q + "fused_qkv_a_proj.weight": np.concatenate([sd[a + "q_a_proj.weight"],
                                                             sd[a + "kv_a_proj_with_mqa.weight"]]),
              q + "q_a_layernorm.weight": sd[a + "q_a_layernorm.weight"],
              q + "q_b_proj.weight": _rows(sd[a + "q_b_proj.weight"], c.tp, tp_rank)}  # fmt: skip
    if m.latent:
        return p | {q + "kv_a_layernorm.weight": sd[a + "kv_a_layernorm.weight"],
                    q + "kv_b_proj.weight": _rows(sd[a + "kv_b_proj.weight"], c.tp, tp_rank)}  # fmt: skip
    for kind in ["weight", "bias"] if m.qkv_bias else ["weight"]:
        k, v = (_kv_rows(sd[a + f"{x}_proj.{kind}"], m, c, tp_rank) for x in "kv")
        p[q + f"qkv_proj.{kind}"] = np.concatenate([_rows(sd[a + f"q_proj.{kind}"], c.tp, tp_rank), k, v])
    if m.qk_norm:
        p[q + "q_norm.weight"] = sd[a + "q_norm.weight"]
        p[q + "k_norm.weight"] = sd[a + "k_norm.weight"]
    return p


def _vllm_rank(sd: Params, m: Model, c: Vllm, tp_rank: int, dp_rank: int) -> Params:
    p: Params = {
        "model.embed_tokens.weight": _padded_vocab(sd["model.embed_tokens.weight"], 64, c.tp, tp_rank),
        "model.norm.weight": sd["model.norm.weight"],
    }
    if not m.tied:  # tied: lm_head is embed_tokens (tie_weights), no parameter of its own
        p["lm_head.weight"] = _padded_vocab(sd["lm_head.weight"], 64, c.tp, tp_rank)
    for L in range(m.layers):
        p.update(_vllm_layer(sd, m, c, L, f"model.layers.{L}.", tp_rank, dp_rank))
    # DeepSeekMTP: the MTP layer's own weights under their HF names, its decoder layer as
    # mtp_block (_rewrite_spec_layer_name); eh_proj a plain nn.Linear; the embedding and lm_head
    # the target model's (EagleProposer.load_model).
    for L in range(m.layers, m.layers + m.mtp):
        h = f"model.layers.{L}."
        for n in ["enorm.weight", "hnorm.weight", "eh_proj.weight", "shared_head.norm.weight"]:
            p[h + n] = sd[h + n]
        p.update(_vllm_layer(sd, m, c, L, h + "mtp_block.", tp_rank, dp_rank))
    return p


def _vllm_layer(sd: Params, m: Model, c: Vllm, L: int, o: str, tp_rank: int, dp_rank: int) -> Params:
    """HF layer L as vLLM's decoder layer module `o` holds it."""
    h = f"model.layers.{L}."
    p = _vllm_attention(sd, m, c, tp_rank, h, o)
    for n in ["input_layernorm.weight", "post_attention_layernorm.weight"]:
        p[o + n] = sd[h + n]
    if not _moe(m, L):
        p.update(_gated(sd, h + "mlp.", o + "mlp.gate_up_proj.weight", o + "mlp.down_proj.weight", c.tp, tp_rank))
        if m.mlp_bias:  # LlamaMLP: MergedColumnParallelLinear(bias=mlp_bias), RowParallelLinear(bias=...)
            p.update(_gated_bias(sd, h + "mlp.", o + "mlp.gate_up_proj.bias", o + "mlp.down_proj.bias", c.tp, tp_rank))
        return p
    p[o + f"{m.moe_module}.gate.weight"] = sd[h + f"{m.moe_module}.gate.weight"]
    if m.router_bias:
        p[o + "mlp.gate.e_score_correction_bias"] = sd[h + "mlp.gate.e_score_correction_bias"]
    if m.shared:
        # TP-sharded like a dense MLP, but whole under sequence-parallel MoE (EP, TP > 1, DP > 1
        # and a backend it lists: ParallelConfig.use_sequence_parallel_moe;
        # DeepseekV2MLP(disable_tp=is_sequence_parallel))
        sequence_parallel = c.expert_parallel and c.tp > 1 and c.dp > 1 and c.all2all not in NO_SEQUENCE_PARALLEL_MOE
        tp, rank = (1, 0) if sequence_parallel else (c.tp, tp_rank)
        p.update(_gated(sd, h + "mlp.shared_experts.", o + "mlp.shared_experts.gate_up_proj.weight",
                        o + "mlp.shared_experts.down_proj.weight", tp, rank))  # fmt: skip
    experts, moe_tp, moe_rank = _experts_of(m, c, tp_rank, dp_rank)
    w = [_gated(sd, f"{h}{m.moe_module}.experts.{x}.", "w13", "w2", moe_tp, moe_rank, m.expert_names)
         for x in experts]  # fmt: skip
    p[o + f"{m.moe_module}.experts.w13_weight"] = np.stack([x["w13"] for x in w])
    p[o + f"{m.moe_module}.experts.w2_weight"] = np.stack([x["w2"] for x in w])
    return p
