"""What an RL job copies to refit a vLLM engine from a Megatron-Core trainer: the trainer's ranks
and the engine's workers are separate worlds (each its own torch.distributed group) that meet
through one TCPStore, as NeMo RL's or OpenRLHF's model-update group joins them.

    torchrun --standalone --nproc-per-node 4 examples/python/megatron_to_vllm.py

Ranks 0-1 play the trainer (a tiny Llama, Megatron TP2, Megatron's local layer spec on CPU,
wrapped in Float16Module), ranks 2-3 the engine's two TP workers. On CPU no vLLM engine can run
(its wheel has CUDA kernels only), so each worker builds vLLM's own model and holds it as a
worker does; with a GPU engine the same two calls go through
``llm.collective_rpc("refit_prepare", kwargs=...)`` and ``llm.collective_rpc("refit_update")``
on an ``LLM(..., worker_extension_cls="refit.integrations.vllm.RefitWorkerExtension")``.
Every step the trainer changes its weights; each worker checks that vLLM's final norm is the
trainer's.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.distributed as dist

import refit
from refit.integrations import megatron as refit_megatron
from refit.integrations.vllm import RefitWorkerExtension

CONFIG = Path(__file__).resolve().parents[2] / "tests/data/models/tiny-llama-vocab1023.json"
TRAIN_RANKS, STEPS = 2, 3


def trainer(rank: int, store: dist.TCPStore) -> None:
    """A Megatron training rank: its model, the problem, prepare once, refit every step."""
    from megatron.core import parallel_state
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig

    dist.init_process_group("gloo", store=dist.PrefixStore("trainer", store), rank=rank, world_size=TRAIN_RANKS)
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=TRAIN_RANKS)
    hf = json.loads(CONFIG.read_text())
    config = TransformerConfig(
        num_layers=hf["num_hidden_layers"], hidden_size=hf["hidden_size"], num_attention_heads=hf["num_attention_heads"],
        num_query_groups=hf["num_key_value_heads"], ffn_hidden_size=hf["intermediate_size"], normalization="RMSNorm",
        gated_linear_unit=True, activation_func=torch.nn.functional.silu, add_bias_linear=False, use_cpu_initialization=True, bf16=True,
        tensor_model_parallel_size=TRAIN_RANKS,
    )  # fmt: skip
    model = Float16Module(config, GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(normalization="RMSNorm"),
                                           vocab_size=1024, max_sequence_length=64, position_embedding_type="rope"))  # fmt: skip

    if rank == 0:  # the controller's job: each side's layout for the other's problem
        store.set("train", refit_megatron.train_layout(model))
    problem = refit_megatron.problem(model, CONFIG, infer=store.get("infer").decode())
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    me = refit_megatron.rank()
    exchange = refit.exchange.store(store, rank=me, size=problem.world_size)
    prepared = refit.Executor("ucx", exchange).prepare(plan, refit_megatron.parameters(model), me, storage="framework")
    for step in range(STEPS):
        with torch.no_grad():  # a training step
            model.module.decoder.final_layernorm.weight.fill_(step + 1)
        prepared.execute()
    print(f"trainer rank {me}: {len(prepared.buffers)} parameters refitted {STEPS} times", flush=True)


def engine_worker(rank: int, world: int, store: dist.TCPStore) -> None:
    """A vLLM worker holding vLLM's own model (what LLM(...) gives each worker on a GPU)."""
    from vllm.config import set_current_vllm_config
    from vllm.distributed import parallel_state
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    with tempfile.TemporaryDirectory() as checkpoint:  # vLLM reads the model's config.json from a directory
        Path(checkpoint, "config.json").write_text(CONFIG.read_text())
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
        config = EngineArgs(model=checkpoint, tensor_parallel_size=world, distributed_executor_backend="external_launcher",
                            skip_tokenizer_init=True, dtype="bfloat16", enforce_eager=True).create_engine_config()  # fmt: skip
    dist.init_process_group("gloo", store=dist.PrefixStore("engine", store), rank=rank, world_size=world)
    with set_current_vllm_config(config):  # vLLM's groups over the engine's own world
        parallel_state.init_distributed_environment(world, rank, "env://", rank, "gloo")
        parallel_state.initialize_model_parallel(world, 1)
    with set_current_vllm_config(config), set_default_torch_dtype(torch.bfloat16), torch.device("cpu"):
        model = initialize_model(config)
    worker = RefitWorkerExtension()  # what vLLM mixes into its Worker, with the worker's attributes
    worker.vllm_config, worker.device = config, torch.device("cpu")
    worker.model_runner = SimpleNamespace(model=model)

    if rank == 0:
        store.set("infer", worker.refit_layout())
    store_address = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
    info = worker.refit_prepare(train=store.get("train").decode(), store=store_address, config=str(CONFIG))
    for step in range(STEPS):
        worker.refit_update()
        norm = model.model.norm.weight
        assert bool((norm == step + 1).all()), f"step {step}: vLLM's norm is not the trainer's"
    print(f"vLLM worker rank {info['rank']}: {info['parameters']} parameters, {info['bytes']} bytes, "
          f"{STEPS} updates in place", flush=True)  # fmt: skip


def main() -> None:
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                          timeout=timedelta(seconds=120))  # torchrun's own store  # fmt: skip
    if rank < TRAIN_RANKS:
        trainer(rank, store)
    else:
        engine_worker(rank - TRAIN_RANKS, size - TRAIN_RANKS, store)


if __name__ == "__main__":
    main()
