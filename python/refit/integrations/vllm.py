"""The inference side of a refit inside vLLM's workers.

An engine started with ``worker_extension_cls="refit.integrations.vllm.RefitWorkerExtension"``
has the extension mixed into every worker (vLLM appends it to the worker class's bases), so the
trainer's controller drives it through ``collective_rpc``::

    llm = vllm.LLM(model=path, tensor_parallel_size=4,
                   worker_extension_cls="refit.integrations.vllm.RefitWorkerExtension")
    llm.collective_rpc("refit_prepare", kwargs={"train": train, "store": (host, port)})  # once
    llm.collective_rpc("refit_update")                                                    # every step

while the training ranks prepare and execute the same plan with their Megatron parameters
(:mod:`refit.integrations.megatron`). The destination buffers are the engine's own parameters:
refit writes into them in place, so every parameter keeps its memory across updates and the
CUDA graphs that captured their addresses stay valid (``refit_update`` checks it).

After the bytes land, ``refit_update`` does what vLLM does after its own ``load_weights``: it
runs vLLM's ``process_weights_after_loading``, which for bf16 models on CUDA leaves linear
weights as they are, pads and re-registers fused-MoE weights in place, and recomputes MLA's
absorbed ``W_UK_T`` / ``W_UV`` from ``kv_b_proj`` in place (``replace_parameter``). What differs
by model family and quantization is in docs/guide/integrations.md.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Optional

import refit
from refit._errors import BadInput, Failure
from refit.integrations import problem_options

__all__ = ["RefitWorkerExtension", "infer_layout", "parameters", "rank"]

Module = Any  # a torch.nn.Module


def _refuse_eplb(pc: Any) -> None:
    """EPLB moves experts between slots at run time and redundant experts add slots, while
    refit's maps place every expert in a fixed slot (docs/frameworks.md, "MoE")."""
    if getattr(pc, "enable_eplb", False):
        raise BadInput(
            "parallel_config.enable_eplb: expert load balancing moves experts between ranks at run time, "
            "and refit's layouts place each expert on a fixed rank and slot; start the engine without EPLB",
            "unsupported",
        )
    redundant = getattr(getattr(pc, "eplb_config", None), "num_redundant_experts", 0)
    if redundant:
        raise BadInput(
            f"parallel_config.eplb_config.num_redundant_experts={redundant}: refit's layouts hold each expert "
            "once, not redundant copies",
            "unsupported",
        )


def _refuse_unfused_latent_attention(model_config: Any) -> None:
    """With MLA off (VLLM_MLA_DISABLE, or a backend without MLA) vLLM builds a DeepSeek model's
    attention as DeepseekV2Attention, whose q_a_proj and kv_a_proj_with_mqa stay apart, while
    refit's maps fuse them as DeepseekV2MLAAttention does (docs/frameworks.md, "Storage")."""
    hf = getattr(model_config, "hf_text_config", None) or getattr(model_config, "hf_config", None)
    if getattr(hf, "kv_lora_rank", None) is not None and not getattr(model_config, "use_mla", True):
        raise BadInput(
            "model_config.use_mla is False for a multi-head latent attention model: vLLM then keeps q_a_proj "
            "and kv_a_proj_with_mqa apart, and refit's layouts hold them fused as fused_qkv_a_proj",
            "unsupported",
        )


def infer_layout(vllm_config: Any, engines: int = 1) -> str:
    """refit's inference layout (``--infer``) of an engine's ``VllmConfig`` (``engines`` such
    engines, each a copy): tensor and data parallel sizes, expert parallelism and the expert
    placement it asked for, with the all2all backend that decides whether vLLM keeps it and
    whether the shared experts are TP-sharded (sequence-parallel MoE).

    Raises:
        refit.BadInput: pipeline parallelism (refit's inference layouts have none); expert
            load balancing (EPLB) or redundant experts; a latent-attention model with MLA off.
    """
    pc = vllm_config.parallel_config
    if pc.pipeline_parallel_size != 1:
        raise BadInput(
            f"pipeline_parallel_size={pc.pipeline_parallel_size}: refit's inference layouts have no pipeline stages",
            "unsupported",
        )
    _refuse_eplb(pc)
    _refuse_unfused_latent_attention(getattr(vllm_config, "model_config", None))
    keys = [f"tp={pc.tensor_parallel_size}", f"dp={pc.data_parallel_size}"]
    if engines > 1:
        keys.append(f"engines={engines}")
    if pc.enable_expert_parallel:
        # The backend decides both whether round_robin holds and whether shared experts are TP-sharded.
        keys += ["ep=on", f"placement={pc.expert_placement_strategy}", f"all2all={pc.all2all_backend}"]
    return ",".join(keys)


def rank(source_ranks: int, engine: int = 0) -> int:
    """This worker's rank in the plan: after the training ranks, engine by engine, each engine
    [DP, TP] with TP fastest (vLLM's ``initialize_model_parallel``)."""
    from vllm.distributed import parallel_state as ps

    tp = ps.get_tensor_model_parallel_world_size()
    dp = ps.get_dp_group().world_size
    return source_ranks + engine * tp * dp + ps.get_dp_group().rank_in_group * tp + ps.get_tensor_model_parallel_rank()


# vLLM >= 0.25 keeps a fused-MoE layer's weights in a RoutedExperts submodule
# (fused_moe/routed_experts.py); refit's maps use the name without it.
_VLLM_TO_REFIT = ((re.compile(r"(^|\.)experts\.routed_experts\."), r"\1experts."),)


def _refit_name(name: str) -> str:
    for pattern, replacement in _VLLM_TO_REFIT:
        name = pattern.sub(replacement, name)
    return name


def _refuse_fused_shared_experts(model: Module) -> None:
    """vLLM's MoE layers set is_fused_shared_expert_enabled when ROCm AITER runs the shared
    experts as extra experts of the FusedMoE (resolve_layer_fused_shared_expert): then w13/w2 hold
    them after the routed ones and no shared_experts parameters exist, which refit's maps do not
    lay out (docs/frameworks.md, "MoE")."""
    for name, module in model.named_modules():
        if getattr(module, "is_fused_shared_expert_enabled", False) is True:
            raise BadInput(
                f"{name or 'the model'}: is_fused_shared_expert_enabled (ROCm AITER fused shared experts) puts the "
                "shared experts inside the routed experts' w13/w2, which refit's layouts do not model; start the "
                "engine with them apart",
                "unsupported",
            )


def parameters(model: Module, drafter: Optional[Module] = None) -> dict[str, Any]:
    """The engine's parameters keyed by refit's names for them: the model's, and a speculative
    drafter's (DeepSeek MTP) except those it shares with the model (embedding, lm_head), as the
    Parameter objects themselves (the same memory; not ``detach()``, whose tensor keeps the old
    memory after ``param.data = t``, which ``execute`` then could not see).

    Raises:
        refit.BadInput: shared experts fused into the routed experts' FusedMoE (ROCm AITER).
    """
    _refuse_fused_shared_experts(model)
    out = {_refit_name(n): p for n, p in model.named_parameters()}
    if drafter is not None:
        shared = {p.data_ptr() for p in model.parameters()}
        for n, p in drafter.named_parameters():
            if p.data_ptr() not in shared:
                out[_refit_name(n)] = p
    return out


def _addresses(buffers: Mapping[str, Any]) -> dict[str, int]:
    return {name: int(t.data_ptr()) for name, t in buffers.items()}


@dataclass
class _Session:
    """What refit_prepare made: the prepared plan and the addresses it was prepared with."""

    prepared: refit.Prepared
    addresses: dict[str, int]
    process_weights: bool


class RefitWorkerExtension:
    """Mixed into vLLM's worker by ``worker_extension_cls``: ``self`` is the worker, whose
    ``model_runner`` holds the model (and a drafter with speculative decoding) and whose
    ``vllm_config`` the engine's configuration. Methods are called through ``collective_rpc``
    on every worker of the engine; names start with ``refit_`` so that none shadows the worker's.
    """

    def refit_layout(self, engines: int = 1) -> str:
        """This engine's inference layout (:func:`infer_layout`), for the trainer's problem."""
        return infer_layout(self.vllm_config, engines)

    def refit_prepare(
        self,
        *,
        train: str,
        store: tuple[str, int],
        config: str = "",
        engine: int = 0,
        engines: int = 1,
        executor: str = "",
        cluster: str = "cpu-host",
        strategy: str = "refit",
        timeout: float = 60.0,
        process_weights: Optional[bool] = None,
        prefix: str = "refit",
        **options: Any,
    ) -> dict[str, Any]:
        """Prepares this worker's part of the refit; collective with every training rank and
        every worker of every engine. Returns this worker's rank, parameters and bytes.

        Args:
            train: the training layout (:func:`refit.integrations.megatron.train_layout`).
            store: (host, port) of a ``torch.distributed.TCPStore`` every process of the refit
                reaches (the trainer's rank 0 typically hosts it): the exchange.
            config: the checkpoint's ``config.json`` (default: the engine's model path).
            engine, engines: this engine's index and the number of engines refitted together.
            executor: ``nccl`` for CUDA parameters, ``ucx`` for host memory (default: by where
                the parameters are).
            cluster: a cluster preset spec (``refit.Cluster.preset``) the plan is made for.
            process_weights: run vLLM's ``process_weights_after_loading`` after every update
                (default: on CUDA-like platforms; vLLM's CPU backend repacks linear weights and
                drops them, so a CPU engine cannot be refitted in place).
            prefix: the exchange's keys in the store (one per refit sharing the store).
            options: as for :meth:`refit.Problem.from_model` (``quantize=`` ...).
        """
        import torch.distributed as dist
        from vllm.platforms import current_platform

        model = self.model_runner.model
        drafter = getattr(getattr(self.model_runner, "drafter", None), "model", None)
        options.setdefault("mtp", drafter is not None)
        infer = infer_layout(self.vllm_config, engines)
        problem = refit.Problem.from_model(
            config or self.vllm_config.model_config.model, train=train, infer=infer, **problem_options(infer, options)
        )  # fmt: skip
        plan = refit.plan(problem, refit.Cluster.preset(cluster), strategy)
        me = rank(problem.source_ranks, engine)
        buffers = parameters(model, drafter)
        cuda = next(iter(buffers.values())).is_cuda
        exchange = refit.exchange.store(
            dist.TCPStore(store[0], store[1], is_master=False), rank=me, size=problem.world_size, prefix=prefix
        )
        prepared = refit.Executor(executor or ("nccl" if cuda else "ucx"), exchange, timeout=timeout).prepare(
            plan, buffers, me, storage="framework"
        )
        if process_weights is None:
            process_weights = bool(current_platform.is_cuda_alike())
        self._refit = _Session(prepared, _addresses(buffers), process_weights)
        return {"rank": me, "parameters": len(buffers), "bytes": sum(int(t.nbytes) for t in buffers.values())}

    def refit_update(self) -> dict[str, Any]:
        """Receives this step's weights into the engine's parameters (collective with the
        training ranks), then post-processes them as vLLM does after loading. Returns the
        execution report.

        Raises:
            refit.Failure: a transfer failed, or a parameter's memory moved during the update
                (CUDA graphs that captured it would read stale weights), naming it.
            refit.BadInput: a parameter's memory or layout changed since ``refit_prepare``
                (``param.data = t``), naming it: nothing moved on this worker; prepare again.
        """
        session: Optional[_Session] = getattr(self, "_refit", None)
        if session is None:
            raise BadInput("refit_update before refit_prepare", "invalid argument")
        report = session.prepared.execute()
        if session.process_weights:
            self._refit_process_weights()
        now = self._refit_current()
        moved = sorted(n for n, a in session.addresses.items() if n not in now or int(now[n].data_ptr()) != a)
        if moved:
            raise Failure(
                "parameters moved in memory during the update (CUDA graphs that captured them would "
                f"read stale weights): {', '.join(moved)}",
                "runtime",
            )
        return asdict(report)

    def _refit_current(self) -> dict[str, Any]:
        """The engine's parameters as they are now."""
        return parameters(self.model_runner.model, getattr(getattr(self.model_runner, "drafter", None), "model", None))

    def _refit_process_weights(self) -> None:
        """vLLM's own post-loading step, in the engine's configuration, as its loader runs it."""
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.model_loader.utils import process_weights_after_loading

        with set_current_vllm_config(self.vllm_config):
            process_weights_after_loading(self.model_runner.model, self.vllm_config.model_config, self.device)
