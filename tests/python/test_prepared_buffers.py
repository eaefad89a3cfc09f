"""What execute finds of the buffers prepare took: a buffer whose memory moved or whose layout
changed in place since is refused at execute, and a destination written in place bumps its
autograd version as torch's own in-place ops do."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import refit
from conftest import run_ranks, write_manifest
from rank_buffers import torch_buffers


def one_tensor_plan(tmp_path: Path) -> refit.Plan:
    """A plan of one fp32 [4, 6] tensor from one training rank to one inference rank."""
    side = {"mesh": [1], "placements": ["R"]}
    manifest = write_manifest(tmp_path / "one.json", [{"name": "w", "shape": [4, 6], "dtype": "fp32",
                                                       "source": side, "destination": side}], 1, 1)  # fmt: skip
    return refit.plan(refit.Problem.from_manifest(manifest), refit.Cluster.preset("cpu-host"))


@pytest.mark.parametrize("move", ["data", "resize"])
def test_a_buffer_whose_memory_moved_since_prepare_is_refused_at_execute(rows_to_columns: Path, move: str) -> None:
    # `param.data = t` (CPU offload, re-processed weights) or resize_() after prepare left the
    # executor writing into freed memory: heap corruption, and the parameter never got its bytes.
    import torch

    problem = refit.Problem.from_manifest(rows_to_columns)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))

    def body(rank: int, exchange: Any) -> Any:
        buffers = torch_buffers(problem, rank)
        buffers["w"] = buffers["w"].clone()  # torch's own memory, which resize_ may move
        prepared = refit.Executor("ucx", exchange, timeout=2).prepare(plan, buffers)
        if rank != 3:
            with pytest.raises(refit.Failure):  # rank 3 never comes: they time out naming it
                prepared.execute()
            return None
        w = buffers["w"]
        if move == "data":
            w.data = torch.zeros_like(w)
        else:
            w.resize_(2 * w.numel())
        with pytest.raises(refit.BadInput, match="rank 3: buffer 'w': its memory moved since prepare"):
            prepared.execute()
        return None

    results = run_ranks(problem.world_size, body, timeout=30)
    assert not any(isinstance(r, BaseException) for r in results), results


LAYOUT_CHANGES: dict[str, Callable[[Any], Any]] = {
    "t_": lambda t: t.t_(),
    "transpose_": lambda t: t.transpose_(0, 1),
    "as_strided_": lambda t: t.as_strided_((4, 6), (1, 4)),
    "resize_": lambda t: t.resize_(6, 4),  # as many bytes: the same memory
    "numpy shape": lambda a: setattr(a, "shape", (6, 4)),
}


@pytest.mark.parametrize("how", list(LAYOUT_CHANGES))
def test_a_buffer_whose_layout_changed_in_place_since_prepare_is_refused_at_execute(tmp_path: Path, how: str) -> None:
    # Its address and size unchanged, the executor wrote the source's rows into a destination now
    # read as columns. Every rank changes its buffer, so every rank refuses and none waits.
    import torch

    plan = one_tensor_plan(tmp_path)
    change, numpy = LAYOUT_CHANGES[how], how.startswith("numpy")

    def body(rank: int, exchange: Any) -> Any:
        w = np.arange(24, dtype=np.float32).reshape(4, 6) if numpy else torch.arange(24.0).reshape(4, 6)
        prepared = refit.Executor("ucx", exchange, timeout=20).prepare(plan, {"w": w})
        change(w)
        with pytest.raises(refit.BadInput) as refused:
            prepared.execute()
        return str(refused.value)

    for rank, message in enumerate(run_ranks(2, body, timeout=30)):
        assert not isinstance(message, BaseException), message
        assert message.startswith(f"rank {rank}: buffer 'w': its layout changed since prepare() (from shape [4, 6], "
                                  f"strides [{24 if numpy else 6}, {4 if numpy else 1}] to "), message  # fmt: skip


@pytest.mark.parametrize("inference", [False, True], ids=["parameter", "inference tensor"])
def test_a_destination_written_in_place_bumps_its_autograd_version(tmp_path: Path, inference: bool) -> None:
    # A graph that saved a destination for backward used the refitted values silently, where
    # torch's own in-place ops (copy_) make backward() raise. A tensor made under inference_mode
    # has no version counter, and is written as before.
    import torch

    plan = one_tensor_plan(tmp_path)
    source = torch.arange(24.0).reshape(4, 6)
    if inference:
        with torch.inference_mode():
            weight = torch.zeros(4, 6)
    else:
        weight = torch.nn.Parameter(torch.zeros(4, 6))
        saved = (weight * weight).sum()  # weight saved for backward
    versions = (source._version, None if inference else weight._version)

    def body(rank: int, exchange: Any) -> Any:
        return refit.Executor("ucx", exchange, timeout=20).prepare(plan, {"w": weight if rank else source}).execute()

    results = run_ranks(2, body, timeout=30)
    assert not any(isinstance(r, BaseException) for r in results), results
    assert torch.equal(weight.detach(), source)
    assert source._version == versions[0]  # only what refit writes
    if not inference:
        assert weight._version > versions[1]
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            saved.backward()
