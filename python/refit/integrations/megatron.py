"""The training side of a refit from a live Megatron-Core model.

A training process holds its model chunks (a ``GPTModel``, or one per virtual pipeline stage),
possibly wrapped in ``Float16Module`` and ``DistributedDataParallel``, and Megatron's
``parallel_state``. From them::

    problem = refit.integrations.megatron.problem(model, "hf/config.json", infer="tp=4,dp=2")
    rank = refit.integrations.megatron.rank()            # this process's rank in the plan
    buffers = refit.integrations.megatron.parameters(model)
    prepared = executor.prepare(plan, buffers, rank, storage="framework")

``parameters`` hands refit the model's own tensors (the parameters themselves: the same memory,
also when the distributed optimizer made every parameter a view into one contiguous buffer, and a
``param.data = t`` after ``prepare`` is refused at ``execute`` instead of leaving refit on the old
memory, as it would with ``param.detach()``), keyed by
the names refit's storage maps use: wrappers' ``module.`` prefixes dropped, ``model<v>.`` before
each virtual stage's names, and the names of Megatron's local (Transformer-Engine-free) layer
spec given their Transformer Engine spelling, which the maps follow (see :data:`LOCAL_TO_TE`).

refit reads the bf16 model parameters, not the fp32 main parameters: those are what the forward
pass (and so vLLM) uses and what the distributed optimizer all-gathers after every step, laid out
as the storage maps say; the fp32 copies are the optimizer's, each DP rank holding a slice of
the flattened buffer, in no tensor-parallel layout and not in vLLM's dtype.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

import refit
from refit._errors import BadInput
from refit.integrations import problem_options

__all__ = ["LOCAL_TO_TE", "chunks", "parameters", "problem", "rank", "train_layout"]

Model = Any  # a torch.nn.Module: GPTModel, or one wrapped in Float16Module / DDP
Models = Union[Model, Sequence[Model]]


def chunks(model: Models) -> list[Model]:
    """The bare model chunks: a list of virtual-pipeline chunks or one model, each unwrapped from
    ``Float16Module`` / ``DistributedDataParallel`` (both keep the wrapped model as ``module``)."""
    out = []
    for chunk in model if isinstance(model, (list, tuple)) else [model]:
        while hasattr(chunk, "module") and hasattr(chunk.module, "named_parameters"):
            chunk = chunk.module
        out.append(chunk)
    return out


def _parallel_state() -> Any:
    from megatron.core import parallel_state

    if not parallel_state.model_parallel_is_initialized():
        raise BadInput("Megatron's parallel_state is not initialised (initialize_model_parallel)", "invalid argument")
    return parallel_state


def _sizes(ps: Any) -> dict[str, int]:
    """The parallel sizes, as refit's --train keys name them."""
    return {"tp": ps.get_tensor_model_parallel_world_size(), "cp": ps.get_context_parallel_world_size(),
            "dp": ps.get_data_parallel_world_size(), "pp": ps.get_pipeline_model_parallel_world_size(),
            "ep": ps.get_expert_model_parallel_world_size(), "etp": ps.get_expert_tensor_parallel_world_size()}  # fmt: skip


# TransformerConfig fields that lay expert weights out in ways refit's storage maps do not
# (docs/frameworks.md, "Experts"), each with why. moe_shared_expert_glu_interleave_size acts only
# with use_grouped_gemm_for_shared_expert, refused here.
_UNMODELLED: tuple[tuple[str, str], ...] = (
    ("moe_single_grouped_weight", "the local experts' weights as one grouped parameter 'weight', where refit's "
     "storage maps name one weight<i> per expert"),
    ("use_grouped_gemm_for_shared_expert", "the shared experts as a grouped linear, whose parameters refit's "
     "storage maps do not name"),
)  # fmt: skip


def _glu_interleave(config: Any) -> Union[int, None]:
    """moe_mlp_glu_interleave_size: the routed experts' fc1 rows in blocks of that many gate and up
    rows taking turns (refit's glu_interleave=)."""
    return getattr(config, "moe_mlp_glu_interleave_size", None)


def _check_glu_interleave(config: Any, train: str) -> None:
    """A train= layout must say the model's GLU interleave: without it refit would read [gate; up]
    where Megatron holds blocks of gate and up rows, the same shape."""
    keys = {k.strip(): v.strip() for k, v in (kv.split("=", 1) for kv in train.split(",") if "=" in kv)}
    size = _glu_interleave(config)
    if keys.get("glu_interleave") != (None if size is None else str(size)):
        raise BadInput(
            f"train={train!r}: TransformerConfig.moe_mlp_glu_interleave_size is {size}, so the layout needs "
            + (f"glu_interleave={size}" if size is not None else "no glu_interleave"),
            "mismatch",
        )


def _refuse_unmodelled(config: Any) -> None:
    for field, why in _UNMODELLED:
        value = getattr(config, field, None)
        if value not in (None, False):
            raise BadInput(f"TransformerConfig.{field} = {value}: {why}", "unsupported")


def train_layout(model: Models) -> str:
    """refit's training layout (``--train``) of this job, from Megatron's parallel_state and the
    model's ``TransformerConfig``: sizes, virtual stages (the chunks given), uneven first and last
    stages, the vocab padding (the model's padded ``vocab_size``), ``spec=local`` for MLA
    layers of the local layer spec and ``glu_interleave`` (``moe_mlp_glu_interleave_size``). The
    same on every rank.

    Raises:
        refit.BadInput: parallel_state not initialised; a ``pipeline_model_parallel_layout``
            (pass ``train=`` to :func:`problem` with refit's ``layout=`` instead); expert weights
            laid out as refit's maps do not lay them out (``moe_single_grouped_weight``,
            ``use_grouped_gemm_for_shared_expert``), naming the field.
    """
    ps = _parallel_state()
    bare = chunks(model)
    config = bare[0].config
    if getattr(config, "pipeline_model_parallel_layout", None) is not None:
        raise BadInput(
            "TransformerConfig.pipeline_model_parallel_layout: not read here; pass train= with refit's "
            "layout= key to refit.integrations.megatron.problem",
            "unsupported",
        )
    _refuse_unmodelled(config)
    sizes = _sizes(ps)
    keys = dict(sizes)
    if len(bare) > 1:
        keys["vp"] = len(bare)
    for key, attr in (("pp_first", "num_layers_in_first_pipeline_stage"), ("pp_last", "num_layers_in_last_pipeline_stage")):
        if getattr(config, attr, None):
            keys[key] = getattr(config, attr)
    keys["vocab_divisible_by"] = bare[0].vocab_size // sizes["tp"]  # GPTModel holds the padded size
    if _local_latent_attention(bare[0]):
        keys["spec"] = "local"
    if _glu_interleave(config) is not None:
        keys["glu_interleave"] = _glu_interleave(config)
    return ",".join(f"{k}={v}" for k, v in keys.items())


def _local_latent_attention(chunk: Model) -> bool:
    """Whether the chunk's MLA layers come from the local layer spec, which keeps kv_layernorm apart
    (the TE spec fuses it into linear_kv_up_proj) and splits the down projections over TP."""
    named = chunk.named_parameters() if hasattr(chunk, "named_parameters") else ()
    return any(name.endswith("self_attention.kv_layernorm.weight") for name, _ in named)


def rank() -> int:
    """This process's rank in the plan: Megatron's default order "tp-cp-ep-dp-pp", dense rank
    tp + TP*(cp + CP*(dp + DP*pp)), which refit's training layouts follow.

    Raises:
        refit.BadInput: parallel_state made with another order (the expert ranks disagree).
    """
    ps = _parallel_state()
    s = _sizes(ps)
    r = ps.get_tensor_model_parallel_rank() + s["tp"] * (
        ps.get_context_parallel_rank()
        + s["cp"] * (ps.get_data_parallel_rank() + s["dp"] * ps.get_pipeline_model_parallel_rank())
    )
    expected = (r % s["etp"], r // s["etp"] % s["ep"])
    actual = (ps.get_expert_tensor_parallel_rank(), ps.get_expert_model_parallel_rank())
    if expected != actual:
        raise BadInput(
            f"dense rank {r} has expert ranks (etp, ep) = {actual}, not {expected}: parallel_state was "
            "initialised with an order other than tp-cp-ep-dp-pp, which refit's layouts follow",
            "unsupported",
        )
    return r


# Megatron's local layer spec (get_gpt_layer_local_spec) names some weights apart that its
# Transformer Engine spec fuses or stacks; refit's storage maps use the TE names. Each rule:
# (pattern on a parameter's name within a layer, the TE name, a parameter the layer must have for
# the rule to apply). The local spec's own sharded_state_dict_keys_map makes the first two
# renames for its checkpoints; a MoE layer (TE: pre_mlp_layernorm apart) and an MLA layer (TE:
# input_layernorm apart, the q/kv LoRA norms fused into the up projections) keep theirs.
LOCAL_TO_TE: tuple[tuple[str, str, str], ...] = (
    (r"input_layernorm\.(weight|bias)$", r"self_attention.linear_qkv.layer_norm_\1", "self_attention.linear_qkv.weight"),
    (r"pre_mlp_layernorm\.(weight|bias)$", r"mlp.linear_fc1.layer_norm_\1", "mlp.linear_fc1.weight"),
    (r"self_attention\.q_layernorm\.(weight|bias)$", r"self_attention.linear_q_up_proj.layer_norm_\1",
     "self_attention.linear_q_up_proj.weight"),
    (r"self_attention\.kv_layernorm\.(weight|bias)$", r"self_attention.linear_kv_up_proj.layer_norm_\1",
     "self_attention.linear_kv_up_proj.weight"),
    (r"mlp\.experts\.local_experts\.(\d+)\.(linear_fc[12])\.weight$", r"mlp.experts.\2.weight\1", "mlp.router.weight"),
)  # fmt: skip

# A layer's prefix: decoder layers, and MTP layers' inner layer (megatron-core <= 0.16 names it
# transformer_layer, later releases and refit's maps mtp_model_layer).
_LAYER = re.compile(r"^((?:decoder\.layers\.\d+|mtp\.layers\.\d+\.(?:transformer_layer|mtp_model_layer))\.)(.*)$")


def _te_name(name: str, has: Callable[[str], bool]) -> str:
    """A parameter's name as the TE spec gives it; `has` tells whether the layer has a name."""
    match = _LAYER.match(name)
    if match is None:
        return name
    prefix, rest = match[1].replace(".transformer_layer.", ".mtp_model_layer."), match[2]
    for pattern, replacement, needs in LOCAL_TO_TE:
        if re.search(pattern, rest) and has(match[1] + needs):
            return prefix + re.sub(pattern, replacement, rest)
    return prefix + rest


def _named_tensors(chunk: Model) -> Iterable[tuple[str, Any]]:
    """The chunk's parameters and its routers' expert biases (a buffer in Megatron, fp32, that
    vLLM holds as e_score_correction_bias)."""
    yield from chunk.named_parameters()
    for name, buffer in chunk.named_buffers():
        if name.endswith("mlp.router.expert_bias"):
            yield name, buffer


def parameters(model: Models) -> dict[str, Any]:
    """This rank's tensors keyed by refit's names for them (``Problem.parameters(rank)``): the
    model's own parameters, the Parameter objects themselves (no copy; not ``detach()``, whose
    tensor keeps the old memory after ``param.data = t``, which ``execute`` then could not see),
    wrappers' prefixes dropped,
    ``model<v>.`` before virtual stage v's names when there are several, local-spec names given
    their TE spelling (:data:`LOCAL_TO_TE`). ``Executor.prepare(..., storage="framework")``
    refuses a missing, unknown or ill-shaped one, naming it."""
    bare = chunks(model)
    out: dict[str, Any] = {}
    for v, chunk in enumerate(bare):
        named = dict(_named_tensors(chunk))
        prefix = f"model{v}." if len(bare) > 1 else ""
        for name, tensor in named.items():
            out[prefix + _te_name(name, named.__contains__)] = tensor
    return out


# TransformerConfig fields and the config.json keys that must agree with them.
_SAME: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("num_layers", ("num_hidden_layers",)),
    ("hidden_size", ("hidden_size",)),
    ("num_attention_heads", ("num_attention_heads",)),
    ("num_moe_experts", ("num_experts", "n_routed_experts", "num_local_experts")),
    ("moe_ffn_hidden_size", ("moe_intermediate_size",)),
    ("q_lora_rank", ("q_lora_rank",)),
    ("kv_lora_rank", ("kv_lora_rank",)),
)


def _check_config(config: Any, hf: Mapping[str, Any], path: str) -> None:
    """Refuses a TransformerConfig that is not the checkpoint's model, naming the field."""
    for field, keys in _SAME:
        ours = getattr(config, field, None)
        theirs = next((hf[k] for k in keys if k in hf), None)
        if ours is not None and theirs is not None and ours != theirs:
            raise BadInput(f"TransformerConfig.{field} is {ours} but {path} has {keys[0]} = {theirs}", "mismatch")
    groups = getattr(config, "num_query_groups", None)
    if not getattr(config, "multi_latent_attention", False) and groups and hf.get("num_key_value_heads") not in (None, groups):
        raise BadInput(
            f"TransformerConfig.num_query_groups is {groups} but {path} has num_key_value_heads = "
            f"{hf['num_key_value_heads']}",
            "mismatch",
        )


def problem(model: Models, config: Union[str, Path], *, infer: str, train: str = "", **options: Any) -> refit.Problem:
    """The problem of this job: the checkpoint's model (its ``config.json``, whose tensors are
    the logical ones; checked against the model's ``TransformerConfig``), the training layout
    from Megatron (:func:`train_layout`, or ``train`` when given), the inference layout ``infer``
    (:func:`refit.integrations.vllm.infer_layout` on the vLLM side), MTP when the config has MTP
    layers; ``options`` as for :meth:`refit.Problem.from_model`.

    Raises:
        refit.BadInput: a TransformerConfig that does not match the checkpoint (naming the
            field) or whose expert weights refit cannot lay out (as :func:`train_layout`), a
            ``train`` whose ``glu_interleave`` is not the model's, sizes refit refuses (naming the
            key).
    """
    path = Path(config)
    path = path / "config.json" if path.is_dir() else path
    bare = chunks(model)
    _check_config(bare[0].config, json.loads(path.read_text()), str(path))
    _refuse_unmodelled(bare[0].config)  # also when train= is given
    if train:
        _check_glu_interleave(bare[0].config, train)
    options.setdefault("mtp", bool(getattr(bare[0].config, "mtp_num_layers", None)))
    return refit.Problem.from_model(path, train=train or train_layout(model), infer=infer,
                                    **problem_options(infer, options))
