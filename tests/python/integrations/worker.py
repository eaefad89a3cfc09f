"""One process of the integration tests' torchrun job (test_megatron_to_vllm.py): for each
layout pair of the job, processes 0..S-1 are Megatron-Core training ranks (their own
torch.distributed world), S..S+D-1 vLLM workers (their own world, vLLM's parallel state), the
rest sit the pair out. The two sides meet only through torchrun's store, as an RL job's trainer
and engine meet: each publishes its layout for the other's problem, and refit's exchange
(refit.exchange.store) runs over it.

A vLLM worker first loads checkpoint A (seed 1) with vLLM's loader, as an engine does at start;
the training ranks hold checkpoint B (seed 2); refit moves B into the worker's parameters
through RefitWorkerExtension (refit_prepare, refit_update, called as collective_rpc calls them,
vLLM's run_method); then vLLM's loader loads B into the same parameters, and every parameter
must hold what refit wrote, byte for byte, padding included, at the address it had. Prints one
JSON file per pair and process (job["results"]/<pair>.<rank>.json: the processes share
torchrun's stdout, where long lines interleave).

    torchrun --nproc-per-node N worker.py JOB.json
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

import refit
from refit.integrations import megatron as refit_megatron

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from framework_reference import Megatron  # noqa: E402

from checkpoint import checkpoint_state  # noqa: E402


def store() -> Any:
    """torchrun's own store, which every process of the job reaches."""
    return dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                         timeout=timedelta(seconds=120))  # fmt: skip


def bits(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().view(torch.uint8).numpy().tobytes()


def training(pair: dict[str, Any], rank: int, tcp: Any) -> dict[str, Any]:
    from megatron.core import parallel_state as ps

    import megatron_side

    sizes = Megatron(**pair["train"])
    dist.init_process_group("gloo", init_method=pair["megatron_init"], rank=rank, world_size=sizes.world,
                            timeout=timedelta(seconds=120))  # fmt: skip
    ps.initialize_model_parallel(sizes.tp, sizes.pp, virtual_pipeline_model_parallel_size=sizes.vp if sizes.vp > 1 else None,
                                 expert_model_parallel_size=sizes.ep, expert_tensor_parallel_size=sizes.expert_tp)  # fmt: skip
    config = json.loads(Path(pair["checkpoint_b"], "config.json").read_text())
    model = megatron_side.build(config, sizes)
    flats = {megatron_side.flatten(chunk).untyped_storage().data_ptr() for chunk in model}
    unloaded = megatron_side.load(model, checkpoint_state(config, 2), config, sizes)
    key = pair["name"]
    if rank == 0:
        tcp.set(f"{key}/train", refit_megatron.train_layout(model))
    problem = refit_megatron.problem(model, pair["checkpoint_b"], infer=tcp.get(f"{key}/infer").decode())
    buffers = refit_megatron.parameters(model)
    outside = sorted(n for n, t in buffers.items() if t.untyped_storage().data_ptr() not in flats)
    me = refit_megatron.rank()
    exchange = refit.exchange.store(tcp, rank=me, size=problem.world_size, prefix=key)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    prepared = refit.Executor("ucx", exchange, timeout=60).prepare(plan, buffers, me, storage="framework")
    prepared.execute()
    return {"side": "megatron", "rank": me, "train": problem.train, "parameters": len(buffers), "outside_flat_buffer": outside,
            "unloaded": unloaded}  # fmt: skip


def inference(pair: dict[str, Any], rank: int, world: int, tcp: Any) -> dict[str, Any]:
    from vllm.v1.serial_utils import run_method

    import vllm_side

    i = pair["infer"]
    config = vllm_side.start(Path(pair["checkpoint_a"]), rank, world, pair["vllm_init"], i["tp"], i["dp"], i["ep"],
                             i["placement"], i["all2all"], pair["mtp"])  # fmt: skip
    model, drafter = vllm_side.build(config)
    vllm_side.load(config, model, drafter, Path(pair["checkpoint_a"]))  # the engine's start
    if drafter is not None:
        vllm_side.share_with_target(model, drafter)
    worker = vllm_side.worker(config, model, drafter, pair["vllm_init"])
    key = pair["name"]
    if rank == 0:
        tcp.set(f"{key}/infer", run_method(worker, "refit_layout", (), {}))
    train = tcp.get(f"{key}/train").decode()
    named = worker._refit_current()
    addresses = {n: t.data_ptr() for n, t in named.items()}
    info = run_method(worker, "refit_prepare", (), {"train": train, "store": (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])),
                                                     "prefix": key, "process_weights": False})  # fmt: skip
    run_method(worker, "refit_update", (), {})
    got = {n: bits(t) for n, t in named.items()}
    vllm_side.load(config, model, drafter, Path(pair["checkpoint_b"]))  # vLLM's own loading of B
    after = worker._refit_current()
    wrong = sorted(n for n, t in after.items() if bits(t) != got.get(n))
    moved = sorted(n for n, t in after.items() if t.data_ptr() != addresses.get(n))
    return {"side": "vllm", "rank": info["rank"], "infer": run_method(worker, "refit_layout", (), {}),
            "parameters": info["parameters"], "wrong": wrong, "moved": moved}  # fmt: skip


def teardown(training: bool) -> None:
    """Leaves no framework state behind for the next pair."""
    if training:
        from megatron.core import parallel_state as ps

        ps.destroy_model_parallel()
    else:
        from vllm.distributed import parallel_state as ps

        ps.destroy_model_parallel()
        ps.destroy_distributed_environment()
    if dist.is_initialized():
        dist.destroy_process_group()


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text())
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])  # vLLM's workers set their own
    tcp = store()
    for pair in job["pairs"]:
        started = time.monotonic()
        s = Megatron(**pair["train"]).world
        d = pair["infer"]["tp"] * pair["infer"]["dp"]
        try:
            if rank < s:
                out = training(pair, rank, tcp)
            elif rank < s + d:
                out = inference(pair, rank - s, d, tcp)
            else:
                out = {"side": "idle"}
        except Exception:  # reported as this pair's result; the job goes on to the next pair
            out = {"side": "megatron" if rank < s else "vllm", "error": traceback.format_exc()[-3000:]}
        finally:
            teardown(rank < s)
        out.update(pair=pair["name"], seconds=round(time.monotonic() - started, 1))
        Path(job["results"], f"{pair['name']}.{rank}.json").write_text(json.dumps(out))
        done = f"{pair['name']}/done"  # every process waits for all before the next pair
        tcp.add(done, 1)
        while tcp.add(done, 0) < size:
            time.sleep(0.05)

if __name__ == "__main__":
    main()
