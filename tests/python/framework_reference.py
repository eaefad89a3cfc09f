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
  * vocab padded to make_vocab_size_divisible_by (128) * TP, zero rows, split evenly
    (``_vocab_size_with_padding``, ``VocabUtility.vocab_range_from_global_vocab_size``).
  * ``linear_qkv``: per query group [its q heads; k head; v head] (``SelfAttention.
    get_query_key_value_tensors``: [sq, b, ng * (np/ng + 2) * hn]), rows split evenly over TP.
  * ``linear_fc1``: [gate shard; up shard] (``GatedMLPMapping`` in Megatron-Bridge
    ``param_mapping.py``), ``linear_proj``/``linear_fc2`` split along columns.
  * routed experts: ``TEGroupedMLP`` keeps ``linear_fc1.weight<i>`` / ``linear_fc2.weight<i>`` per
    local expert i, experts ep_rank*E/EP onwards (``BaseMoELayer.__init__``), sharded over ETP.

vLLM:
  * ranks: tp + TP*dp (``parallel_state.initialize_model_parallel``).
  * vocab padded to a multiple of 64, zero rows, split evenly over TP
    (``VocabParallelEmbedding.__init__``, ``pad_vocab_size``, ``vocab_range_from_global_vocab_size``).
  * ``qkv_proj``: [q shard; k shard; v shard], a kv head replicated on TP/kv ranks when TP exceeds
    the kv heads (``QKVParallelLinear.__init__`` and ``weight_loader``).
  * ``gate_up_proj``: [gate shard; up shard] (``MergedColumnParallelLinear``); ``o_proj``/
    ``down_proj`` split along columns (``RowParallelLinear``).
  * ``FusedMoE``: ``w13_weight`` [E_local, 2*I/tp, H] gate rows then up rows (``_load_w13``),
    ``w2_weight`` [E_local, H, I/tp]; without EP the MoE TP is flattened over DP*TP
    (``FusedMoEParallelConfig.make``); with EP experts are placed ``linear`` or ``round_robin``
    (``determine_expert_map``) over EP = DP*TP, ep_rank = dp_rank*TP + tp_rank.
"""

from __future__ import annotations

import math
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
    moe_intermediate: int = 0
    qk_norm: bool = False

    @staticmethod
    def from_config(c: dict) -> "Model":
        return Model(hidden=c["hidden_size"], layers=c["num_hidden_layers"], heads=c["num_attention_heads"],
                     kv_heads=c["num_key_value_heads"],
                     head_dim=c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"],
                     vocab=c["vocab_size"], intermediate=c["intermediate_size"],
                     experts=c.get("num_experts", 0), moe_intermediate=c.get("moe_intermediate_size", 0),
                     qk_norm=c["model_type"].startswith("qwen3"))  # fmt: skip


def hf_state_dict(m: Model, rng: np.random.Generator) -> Params:
    """Random bf16 weights (as uint16 bit patterns) under their HF names."""
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (m.vocab, m.hidden),
        "model.norm.weight": (m.hidden,),
        "lm_head.weight": (m.vocab, m.hidden),
    }
    for L in range(m.layers):
        p = f"model.layers.{L}."
        shapes[p + "input_layernorm.weight"] = (m.hidden,)
        shapes[p + "post_attention_layernorm.weight"] = (m.hidden,)
        shapes[p + "self_attn.q_proj.weight"] = (m.heads * m.head_dim, m.hidden)
        shapes[p + "self_attn.k_proj.weight"] = (m.kv_heads * m.head_dim, m.hidden)
        shapes[p + "self_attn.v_proj.weight"] = (m.kv_heads * m.head_dim, m.hidden)
        shapes[p + "self_attn.o_proj.weight"] = (m.hidden, m.heads * m.head_dim)
        if m.qk_norm:
            shapes[p + "self_attn.q_norm.weight"] = (m.head_dim,)
            shapes[p + "self_attn.k_norm.weight"] = (m.head_dim,)
        if m.experts:
            shapes[p + "mlp.gate.weight"] = (m.experts, m.hidden)
            for e in range(m.experts):
                shapes[p + f"mlp.experts.{e}.gate_proj.weight"] = (m.moe_intermediate, m.hidden)
                shapes[p + f"mlp.experts.{e}.up_proj.weight"] = (m.moe_intermediate, m.hidden)
                shapes[p + f"mlp.experts.{e}.down_proj.weight"] = (m.hidden, m.moe_intermediate)
        else:
            shapes[p + "mlp.gate_proj.weight"] = (m.intermediate, m.hidden)
            shapes[p + "mlp.up_proj.weight"] = (m.intermediate, m.hidden)
            shapes[p + "mlp.down_proj.weight"] = (m.hidden, m.intermediate)
    return {n: rng.integers(1, 1 << 16, size=s, dtype=np.uint16) for n, s in shapes.items()}


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
    etp: int = 1

    @property
    def world(self) -> int:
        return self.tp * self.dp * self.pp


def megatron_params(sd: Params, m: Model, c: Megatron) -> dict[int, Params]:
    out: dict[int, Params] = {}
    edp = c.tp * c.dp // (c.ep * c.etp)
    for r in range(c.world):
        tp_rank, dp_rank, pp_rank = r % c.tp, r // c.tp % c.dp, r // (c.tp * c.dp)
        etp_rank, ep_rank = r % c.etp, r // c.etp % c.ep
        assert r // (c.etp * c.ep * edp) == pp_rank
        out[r] = _megatron_rank(sd, m, c, tp_rank, pp_rank, etp_rank, ep_rank)
    return out


def _megatron_rank(sd: Params, m: Model, c: Megatron, tp_rank: int, pp_rank: int, etp_rank: int,
                   ep_rank: int) -> Params:  # fmt: skip
    p: Params = {}
    if pp_rank == 0:
        p["embedding.word_embeddings.weight"] = _padded_vocab(sd["model.embed_tokens.weight"], 128 * c.tp, c.tp,
                                                              tp_rank)  # fmt: skip
    if pp_rank == c.pp - 1:
        p["decoder.final_layernorm.weight"] = sd["model.norm.weight"]
        p["output_layer.weight"] = _padded_vocab(sd["lm_head.weight"], 128 * c.tp, c.tp, tp_rank)
    per_stage = m.layers // c.pp
    for local in range(per_stage):
        h = f"model.layers.{pp_rank * per_stage + local}."
        d = f"decoder.layers.{local}."
        groups, qpg, hd = m.kv_heads, m.heads // m.kv_heads, m.head_dim
        q = sd[h + "self_attn.q_proj.weight"].reshape(groups, qpg * hd, m.hidden)
        k = sd[h + "self_attn.k_proj.weight"].reshape(groups, hd, m.hidden)
        v = sd[h + "self_attn.v_proj.weight"].reshape(groups, hd, m.hidden)
        qkv = np.concatenate([q, k, v], axis=1).reshape(-1, m.hidden)
        p[d + "self_attention.linear_qkv.weight"] = _rows(qkv, c.tp, tp_rank)
        p[d + "self_attention.linear_qkv.layer_norm_weight"] = sd[h + "input_layernorm.weight"]
        p[d + "self_attention.linear_proj.weight"] = _cols(sd[h + "self_attn.o_proj.weight"], c.tp, tp_rank)
        if m.qk_norm:
            p[d + "self_attention.q_layernorm.weight"] = sd[h + "self_attn.q_norm.weight"]
            p[d + "self_attention.k_layernorm.weight"] = sd[h + "self_attn.k_norm.weight"]
        if not m.experts:
            p[d + "mlp.linear_fc1.layer_norm_weight"] = sd[h + "post_attention_layernorm.weight"]
            p[d + "mlp.linear_fc1.weight"] = np.concatenate([_rows(sd[h + "mlp.gate_proj.weight"], c.tp, tp_rank),
                                                             _rows(sd[h + "mlp.up_proj.weight"], c.tp, tp_rank)])  # fmt: skip
            p[d + "mlp.linear_fc2.weight"] = _cols(sd[h + "mlp.down_proj.weight"], c.tp, tp_rank)
            continue
        p[d + "pre_mlp_layernorm.weight"] = sd[h + "post_attention_layernorm.weight"]
        p[d + "mlp.router.weight"] = sd[h + "mlp.gate.weight"]
        local_experts = m.experts // c.ep
        for i in range(local_experts):
            e = f"{h}mlp.experts.{ep_rank * local_experts + i}."
            p[d + f"mlp.experts.linear_fc1.weight{i}"] = np.concatenate([_rows(sd[e + "gate_proj.weight"], c.etp, etp_rank),
                                                                         _rows(sd[e + "up_proj.weight"], c.etp, etp_rank)])  # fmt: skip
            p[d + f"mlp.experts.linear_fc2.weight{i}"] = _cols(sd[e + "down_proj.weight"], c.etp, etp_rank)
    return p


@dataclass(frozen=True)
class Vllm:
    tp: int = 1
    dp: int = 1
    expert_parallel: bool = False
    placement: str = "linear"  # or "round_robin" (expert_placement_strategy)

    @property
    def world(self) -> int:
        return self.tp * self.dp


def vllm_params(sd: Params, m: Model, c: Vllm, first_rank: int) -> dict[int, Params]:
    """Parameters of the inference ranks, keyed by global rank (first_rank onwards)."""
    return {first_rank + tp_rank + c.tp * dp_rank: _vllm_rank(sd, m, c, tp_rank, dp_rank)
            for dp_rank in range(c.dp) for tp_rank in range(c.tp)}  # fmt: skip


def _experts_of(m: Model, c: Vllm, tp_rank: int, dp_rank: int) -> tuple[list[int], int, int]:
    """(experts held, MoE tp size, MoE tp rank): FusedMoEParallelConfig.make, determine_expert_map."""
    if not c.expert_parallel:
        return list(range(m.experts)), c.tp * c.dp, dp_rank * c.tp + tp_rank
    ep, ep_rank = c.tp * c.dp, dp_rank * c.tp + tp_rank
    if c.placement == "round_robin":
        return list(range(ep_rank, m.experts, ep)), 1, 0
    base, rem = divmod(m.experts, ep)
    start = ep_rank * base + min(ep_rank, rem)
    return list(range(start, start + base + (1 if ep_rank < rem else 0))), 1, 0


def _vllm_rank(sd: Params, m: Model, c: Vllm, tp_rank: int, dp_rank: int) -> Params:
    p: Params = {
        "model.embed_tokens.weight": _padded_vocab(sd["model.embed_tokens.weight"], 64, c.tp, tp_rank),
        "lm_head.weight": _padded_vocab(sd["lm_head.weight"], 64, c.tp, tp_rank),
        "model.norm.weight": sd["model.norm.weight"],
    }
    hd = m.head_dim
    for L in range(m.layers):
        h = f"model.layers.{L}."
        if m.kv_heads >= c.tp:
            k, v = (_rows(sd[h + f"self_attn.{x}_proj.weight"], c.tp, tp_rank) for x in "kv")
        else:
            head = tp_rank // (c.tp // m.kv_heads)
            k, v = (sd[h + f"self_attn.{x}_proj.weight"][head * hd : (head + 1) * hd] for x in "kv")
        p[h + "self_attn.qkv_proj.weight"] = np.concatenate([_rows(sd[h + "self_attn.q_proj.weight"], c.tp, tp_rank), k, v])
        p[h + "self_attn.o_proj.weight"] = _cols(sd[h + "self_attn.o_proj.weight"], c.tp, tp_rank)
        for n in ["input_layernorm.weight", "post_attention_layernorm.weight"] + (
            ["self_attn.q_norm.weight", "self_attn.k_norm.weight"] if m.qk_norm else []
        ):
            p[h + n] = sd[h + n]
        if not m.experts:
            p[h + "mlp.gate_up_proj.weight"] = np.concatenate([_rows(sd[h + "mlp.gate_proj.weight"], c.tp, tp_rank),
                                                               _rows(sd[h + "mlp.up_proj.weight"], c.tp, tp_rank)])  # fmt: skip
            p[h + "mlp.down_proj.weight"] = _cols(sd[h + "mlp.down_proj.weight"], c.tp, tp_rank)
            continue
        p[h + "mlp.gate.weight"] = sd[h + "mlp.gate.weight"]
        experts, moe_tp, moe_rank = _experts_of(m, c, tp_rank, dp_rank)
        e = [f"{h}mlp.experts.{x}." for x in experts]
        p[h + "mlp.experts.w13_weight"] = np.stack([np.concatenate([_rows(sd[x + "gate_proj.weight"], moe_tp, moe_rank),
                                                                    _rows(sd[x + "up_proj.weight"], moe_tp, moe_rank)])
                                                    for x in e])  # fmt: skip
        p[h + "mlp.experts.w2_weight"] = np.stack([_cols(sd[x + "down_proj.weight"], moe_tp, moe_rank) for x in e])
    return p
