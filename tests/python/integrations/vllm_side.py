"""The inference side of the integration tests: vLLM's own model classes, built on CPU under
vLLM's own parallel state (init_distributed_environment on gloo, initialize_model_parallel, as
its external_launcher mode does under torchrun) and loaded by vLLM's own loader from the HF
checkpoint's safetensors (DefaultModelLoader.load_weights: the model's load_weights and its
layers' weight_loader functions). No engine runs: vLLM's CUDA wheel has no CPU kernels, so
nothing is run forward and process_weights_after_loading (which on the CPU backend repacks
linear weights for oneDNN and drops them) is not called; the parameters are as load_weights
leaves them, which a CUDA engine keeps for bf16 weights (docs/guide/integrations.md).

refit's extension is mixed into vLLM's own worker class by vLLM's own WorkerWrapperBase, and its
methods are called by vLLM's run_method, as collective_rpc calls them in each worker process.

A DeepSeek MTP drafter is the speculative model of the same config (method "mtp"), sharing the
target's embedding and lm_head as vLLM's proposer does when it loads (llm_base_proposer.py,
_maybe_share_embeddings / _maybe_share_lm_head)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import torch

from refit.integrations.vllm import RefitWorkerExtension


def engine_config(checkpoint: Path, tp: int, dp: int, ep: bool, placement: str, all2all: str, mtp: bool) -> Any:
    """The VllmConfig an engine of these sizes makes (EngineArgs, external_launcher: one process
    per rank, started by torchrun)."""
    from vllm.engine.arg_utils import EngineArgs

    extra: dict[str, Any] = {"speculative_config": {"method": "mtp", "num_speculative_tokens": 1}} if mtp else {}
    return EngineArgs(model=str(checkpoint), tensor_parallel_size=tp, data_parallel_size=dp, enable_expert_parallel=ep,
                      expert_placement_strategy=placement, all2all_backend=all2all,
                      worker_extension_cls="refit.integrations.vllm.RefitWorkerExtension",
                      distributed_executor_backend="external_launcher", skip_tokenizer_init=True, dtype="bfloat16",
                      enforce_eager=True, load_format="safetensors", **extra).create_engine_config()  # fmt: skip


def start(checkpoint: Path, rank: int, world: int, init_method: str, tp: int, dp: int, ep: bool, placement: str,
          all2all: str, mtp: bool) -> Any:  # fmt: skip
    """vLLM's distributed state for this worker (rank `rank` of the engine's `world`)."""
    from vllm.config import set_current_vllm_config
    from vllm.distributed import parallel_state as ps

    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))  # external_launcher reads them
    config = engine_config(checkpoint, tp, dp, ep, placement, all2all, mtp)
    with set_current_vllm_config(config):
        ps.init_distributed_environment(world, rank, init_method, rank, "gloo")
        ps.initialize_model_parallel(tp, 1)
    return config


def stop() -> None:
    from vllm.distributed import parallel_state as ps

    ps.destroy_model_parallel()
    ps.destroy_distributed_environment()


def build(config: Any) -> tuple[torch.nn.Module, Optional[torch.nn.Module]]:
    """The engine's model (and MTP drafter), parameters allocated, nothing loaded."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    with set_current_vllm_config(config), set_default_torch_dtype(torch.bfloat16), torch.device("cpu"):
        model = initialize_model(config)
        drafter = None
        if config.speculative_config is not None:
            drafter = initialize_model(config, model_config=config.speculative_config.draft_model_config)
    return model, drafter


def load(config: Any, model: torch.nn.Module, drafter: Optional[torch.nn.Module], checkpoint: Path) -> None:
    """vLLM's own loading of `checkpoint` into the model (and drafter), in place."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model_loader

    config.model_config.model = str(checkpoint)
    with set_current_vllm_config(config):
        loader = get_model_loader(config.load_config)
        loader.load_weights(model, config.model_config)
        if drafter is not None:
            draft = config.speculative_config.draft_model_config
            draft.model = str(checkpoint)
            loader.load_weights(drafter, draft)


def share_with_target(model: torch.nn.Module, drafter: torch.nn.Module) -> None:
    """The drafter's embedding and heads become the target's, as vLLM's proposer makes them."""
    drafter.model.embed_tokens = model.model.embed_tokens
    for layer in drafter.model.layers.values():
        layer.shared_head.head = model.lm_head


def worker(config: Any, model: torch.nn.Module, drafter: Optional[torch.nn.Module], init_method: str) -> Any:
    """vLLM's own worker of a CUDA engine (gpu_worker.Worker) made by vLLM's WorkerWrapperBase,
    which mixes the config's worker_extension_cls (refit's) into it as every engine process does;
    the wrapper forwards collective_rpc's calls to it. Its device and model runner are set as
    init_device and load_model set them on a GPU (neither runs here)."""
    from vllm.distributed import parallel_state as ps
    from vllm.v1.worker.worker_base import WorkerWrapperBase

    config.parallel_config.worker_cls = "vllm.v1.worker.gpu_worker.Worker"
    rank = ps.get_world_group().rank_in_group
    wrapper = WorkerWrapperBase(rpc_rank=0)
    wrapper.init_worker([{"vllm_config": config, "local_rank": rank, "rank": rank,
                          "distributed_init_method": init_method, "is_driver_worker": rank == 0}])  # fmt: skip
    assert isinstance(wrapper.worker, RefitWorkerExtension), type(wrapper.worker).__mro__
    wrapper.worker.device = torch.device("cpu")
    wrapper.worker.model_runner = SimpleNamespace(model=model, drafter=SimpleNamespace(model=drafter) if drafter else None)
    return wrapper
