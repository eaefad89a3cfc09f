"""The refit Python package on a GPU (tests/gpu/run.sh runs it there; skipped where there is no
CUDA device or the package was built without the NCCL executor): torch CUDA tensors through the
NCCL executor with every plan rank of a plan in this one process on one GPU
(``Executor("nccl", ..., comm_rank_of=[0] * world_size)`` and ``prepare_ranks``: a communicator
of size 1, every send NCCL's send to self).

Logical and framework storage, FP8 quantized by the CUDA kernels at the senders and at the
landing ranks, and the torchrun example's Megatron -> vLLM refit on CUDA tensors. Every inference
rank's bytes are checked after each of two executions against references written apart from
refit (the frameworks' layouts in numpy, tests/python/framework_reference.py; vLLM's
per_block_cast_to_fp8, tests/quantize/make_vectors.py), and no tensor's memory moves."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

# torch first: it loads its own NCCL, which the refit module then shares.
torch = pytest.importorskip("torch")
refit = pytest.importorskip("refit")

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if "nccl" not in refit.executors():
    pytest.skip("this refit was built without the NCCL executor", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
for helpers in ("tests/python", "tests/quantize", "examples/python"):
    sys.path.insert(0, str(ROOT / helpers))

from framework_worker import as_torch, reference  # noqa: E402
from test_landing import _buffers as landing_buffers  # noqa: E402
from test_landing import _expected as fp8_expected  # noqa: E402
from test_landing import _weights as fp8_weights  # noqa: E402
from torchrun_refit import TINY_MODEL, weights  # noqa: E402

MODELS = ROOT / "tests" / "data" / "models"
Buffers = dict[int, dict[str, Any]]  # plan rank -> tensor or parameter name -> CUDA tensor


def _one_gpu(problem: refit.Problem) -> refit.Executor:
    """The NCCL executor running every plan rank of `problem` in this process on GPU 0."""
    alone = refit.exchange.from_callable(lambda data: [data], rank=0, size=1)
    return refit.Executor("nccl", alone, timeout=60, comm_rank_of=[0] * problem.world_size, device=0)


def _bits(t: Any) -> np.ndarray:
    """The bytes of a tensor (on any device) or an array, row-major."""
    if isinstance(t, torch.Tensor):
        return t.detach().contiguous().view(torch.uint8).cpu().numpy().reshape(-1)
    return np.ascontiguousarray(t).view(np.uint8).reshape(-1)


def _refit_twice(problem: refit.Problem, cluster: str, buffers: Buffers, storage: str,
                 check: Callable[[int, str, torch.Tensor], None]) -> None:  # fmt: skip
    """Plans on `cluster` (where the ranks would run, which shapes the plan), prepares the plan
    with every rank's buffers, then twice: zeroes the inference ranks' buffers, executes, and
    checks every one of them and that no buffer's memory moved."""
    plan = refit.plan(problem, refit.Cluster.preset(cluster))
    prepared = _one_gpu(problem).prepare_ranks(plan, buffers, storage=storage)
    assert prepared.ranks == list(buffers)
    pointers = {(r, n): t.data_ptr() for r, b in buffers.items() for n, t in b.items()}
    inference = [r for r in buffers if not problem.is_training(r)]
    for _ in range(2):
        for r in inference:
            for t in buffers[r].values():
                t.zero_()
        report = prepared.execute()
        torch.cuda.synchronize()
        assert report.bytes_received == report.bytes_sent > 0
        assert {(r, n): t.data_ptr() for r, b in buffers.items() for n, t in b.items()} == pointers
        for r in inference:
            for name, t in buffers[r].items():
                assert t.is_cuda
                check(r, name, t)


def test_the_torchrun_example_on_cuda_tensors() -> None:
    """examples/python/torchrun_refit.py's Megatron TP2 x EP2 -> vLLM TP2 refit of its tiny MoE,
    the rank's boxes as CUDA tensors (logical storage), all four ranks on one GPU."""
    problem = refit.Problem.from_model(TINY_MODEL, train="tp=2,ep=2,etp=1", infer="tp=2")
    full = {t.name: weights(problem, t.name) for t in problem.tensors}
    buffers = {
        r: {s.tensor: full[s.tensor][s.slices].contiguous().cuda() if problem.is_training(r)
            else torch.zeros(s.extent, dtype=refit.torch_dtype(s.dtype), device="cuda")
            for s in problem.shards(r)}
        for r in range(problem.world_size)
    }  # fmt: skip
    slices = {(r, s.tensor): s.slices for r in range(problem.world_size) for s in problem.shards(r)}

    def check(rank: int, name: str, got: torch.Tensor) -> None:
        assert torch.equal(got.cpu(), full[name][slices[rank, name]]), f"{name} on rank {rank}"

    _refit_twice(problem, "cpu-host", buffers, "logical", check)


# config, Megatron sizes, vLLM sizes: experts over vLLM's EP ranks; GQA with a padded vocab.
FRAMEWORK_CASES = [
    ("tiny-qwen3-moe.json", "tp=2,ep=2,etp=1", "tp=1,dp=2,ep=1"),
    ("tiny-llama-vocab1023.json", "tp=2", "tp=4"),
]


@pytest.mark.parametrize("case", FRAMEWORK_CASES, ids=[c[0] for c in FRAMEWORK_CASES])
def test_framework_parameters_on_cuda(case: tuple[str, str, str]) -> None:
    """Megatron-Core's parameters on the training ranks, vLLM's on the inference ranks (fused
    qkv and gate/up, stacked experts, padded vocab), as CUDA tensors keyed by the frameworks'
    names (storage="framework"); each inference parameter must equal vLLM's layout of the
    checkpoint byte for byte (padding rows zero, as vLLM zeroes them)."""
    config, train, infer = case
    problem = refit.Problem.from_model(MODELS / config, train=train, infer=infer)
    expected = {r: reference(MODELS / config, train, infer, r, problem.source_ranks) for r in range(problem.world_size)}
    buffers = {
        r: {p.name: as_torch(np.ascontiguousarray(expected[r][p.name]).view(refit.numpy_dtype(p.dtype))
                             if problem.is_training(r) else np.zeros(p.shape, refit.numpy_dtype(p.dtype)),
                             p.dtype).cuda()
            for p in problem.parameters(r)}
        for r in range(problem.world_size)
    }  # fmt: skip

    def check(rank: int, name: str, got: torch.Tensor) -> None:
        np.testing.assert_array_equal(_bits(got), _bits(expected[rank][name]), err_msg=f"{name} on rank {rank}")

    _refit_twice(problem, "cpu-host", buffers, "framework", check)


@pytest.mark.parametrize(
    "train,quantize_at",
    [("tp=2", "landing"), ("tp=4", "landing")],
    ids=["at-the-senders", "at-the-landing-ranks"],
)
def test_fp8_in_flight_quantized_by_the_cuda_kernels(train: str, quantize_at: str) -> None:
    """fp8-block128 inference weights from bf16 training weights. With tp=2 every linear weight
    is whole 128x128 blocks on its training ranks, which quantize it before sending; with tp=4
    training cuts the attention weights' blocks, so each reaches one vLLM engine in bf16, is
    quantized there and goes on as fp8. The fp8 values and scales must be vLLM's
    per_block_cast_to_fp8 of the whole weight."""
    problem = refit.Problem.from_model(MODELS / "small-llama-blocks.json", train=train, infer="tp=2,engines=2",
                                       quantize="fp8-block128", quantize_at=quantize_at)  # fmt: skip
    assert any(t.name.endswith("@landing") for t in problem.tensors) == (train == "tp=4")
    full = fp8_weights(problem)
    dtypes = {(r, s.tensor): s.dtype for r in range(problem.world_size) for s in problem.shards(r)}
    slices = {(r, s.tensor): s.slices for r in range(problem.world_size) for s in problem.shards(r)}
    buffers = {
        r: {name: as_torch(a, dtypes[r, name]).cuda() for name, a in landing_buffers(problem, r, full).items()}
        for r in range(problem.world_size)
    }

    def check(rank: int, name: str, got: torch.Tensor) -> None:
        want = fp8_expected(name, full)[slices[rank, name]]
        np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"{name} on rank {rank}")

    # Two GPUs a domain: each engine its own domain, as tests/python/test_landing.py plans it.
    _refit_twice(problem, "cpu-host:gpus_per_domain=2", buffers, "logical", check)
