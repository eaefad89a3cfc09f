"""Buffers from Python: numpy arrays and torch CPU tensors keyed by tensor name, moved by the UCX
executor between ranks that run as threads of this process (they can only both progress because
prepare() and execute() release the GIL); wrong buffers are refused on every rank before any byte
moves, naming the buffer."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import refit
from conftest import change_buffer, readonly_copy, run_ranks, write_manifest

SENTINEL = 7  # what a destination holds before the refit: still there after a refusal


def _bf16_bits(values: np.ndarray) -> np.ndarray:
    """Whole numbers below 256 as bf16 bit patterns (bf16 is the top half of an fp32)."""
    return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _full(problem: refit.Problem, name: str) -> np.ndarray:
    """The full tensor: element i of tensor t holds (7 i + t) mod 251, in the tensor's dtype."""
    index = [t.name for t in problem.tensors].index(name)
    tensor = problem.tensors[index]
    values = ((np.arange(int(np.prod(tensor.shape))) * 7 + index) % 251).reshape(tensor.shape)
    return _bf16_bits(values) if tensor.dtype == "bf16" else values.astype(refit.numpy_dtype(tensor.dtype))


def _numpy_buffers(problem: refit.Problem, rank: int) -> dict[str, Any]:
    if problem.is_training(rank):
        return {s.tensor: np.ascontiguousarray(_full(problem, s.tensor)[s.slices]) for s in problem.shards(rank)}
    return {s.tensor: np.full(s.extent, SENTINEL, dtype=refit.numpy_dtype(s.dtype)) for s in problem.shards(rank)}


def _torch_buffers(problem: refit.Problem, rank: int) -> dict[str, Any]:
    import torch

    out = {}
    for name, a in _numpy_buffers(problem, rank).items():
        dtype = refit.torch_dtype([t for t in problem.tensors if t.name == name][0].dtype)
        t = torch.from_numpy(a.view(np.int16) if a.dtype == np.uint16 else a)
        out[name] = t.view(dtype) if dtype.itemsize == t.element_size() and t.dtype != dtype else t
    return out


def _meta(shape: tuple[int, ...]) -> Any:
    """A torch tensor of `shape` on the meta device: a shape without memory."""
    import torch

    return torch.empty(shape, dtype=torch.bfloat16, device="meta")


def _alias(rank: int, buffers: dict[str, Any], at: int, name: str, onto: str) -> None:
    """On rank ``at``, buffer ``name`` replaced by a view of the start of buffer ``onto``."""
    if rank == at:
        old = buffers[name]
        buffers[name] = buffers[onto].reshape(-1).view(np.uint8)[: old.nbytes].view(old.dtype).reshape(old.shape)


def _refit(manifest: Path, make: Callable[[refit.Problem, int], dict[str, Any]], steps: int = 3,
           change: Callable[[int, dict[str, Any]], None] = lambda r, b: None) -> tuple[list[Any], list[dict[str, Any]]]:  # fmt: skip
    problem = refit.Problem.from_manifest(manifest)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    buffers = [make(problem, r) for r in range(problem.world_size)]
    for r, b in enumerate(buffers):
        change(r, b)

    def body(rank: int, exchange: Any) -> Any:
        executor = refit.Executor("ucx", exchange, timeout=20)
        prepared = executor.prepare(plan, buffers[rank])
        reports = []
        for _ in range(steps):
            for b in buffers[rank].values():
                if not problem.is_training(rank):
                    b[...] = 0
            reports.append(prepared.execute())
        return reports

    return run_ranks(problem.world_size, body), buffers


def _as_numpy(a: Any) -> np.ndarray:
    if isinstance(a, np.ndarray):
        return a
    import torch

    return (a.view(torch.int16) if a.element_size() == 2 and a.dtype == torch.bfloat16 else a).numpy()


def _check_destinations(manifest: Path, buffers: list[dict[str, Any]]) -> None:
    problem = refit.Problem.from_manifest(manifest)
    for rank in range(problem.source_ranks, problem.world_size):
        for s in problem.shards(rank):
            got = _as_numpy(buffers[rank][s.tensor]).view(refit.numpy_dtype(s.dtype))
            np.testing.assert_array_equal(got, _full(problem, s.tensor)[s.slices], err_msg=f"{s.tensor} rank {rank}")


@pytest.mark.parametrize("make", [_numpy_buffers, _torch_buffers], ids=["numpy", "torch"])
def test_numpy_arrays_and_torch_tensors_refit_every_step(rows_to_columns: Path, make: Any) -> None:
    results, buffers = _refit(rows_to_columns, make)
    for r in results:
        assert not isinstance(r, BaseException), r
    # w: fp32 [64, 48], rows over 2 training ranks -> columns over 2 inference ranks: each
    # inference rank receives half of w (64 x 24 x 4 bytes) and half of b (48 x 2 bytes).
    for rank in (2, 3):
        assert [rep.bytes_received for rep in results[rank]] == [64 * 24 * 4 + 48 * 2] * 3
    _check_destinations(rows_to_columns, buffers)


def test_numpy_and_torch_mixed_on_one_rank(rows_to_columns: Path) -> None:
    def make(problem: refit.Problem, rank: int) -> dict[str, Any]:
        mixed = _numpy_buffers(problem, rank)
        mixed["b"] = _torch_buffers(problem, rank)["b"]  # a torch bfloat16 tensor
        return mixed

    results, buffers = _refit(rows_to_columns, make, steps=1)
    assert not any(isinstance(r, BaseException) for r in results), results
    _check_destinations(rows_to_columns, buffers)






def _negated(a: np.ndarray) -> Any:
    """A torch tensor with its negative bit set: it reads as -a while its bytes are a's."""
    import torch

    return torch._neg_view(torch.from_numpy(a.copy()))


def _read_only_mapping(a: np.ndarray) -> Any:
    """A torch tensor over a read-only memory map of a's bytes (torch.from_numpy only warns, and
    DLPack carries no read-only flag)."""
    import os
    import tempfile
    import warnings

    import torch

    fd, path = tempfile.mkstemp()
    os.close(fd)
    a.tofile(path)
    mapped = np.memmap(path, dtype=a.dtype, mode="r", shape=a.shape)
    os.unlink(path)  # the mapping stays
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.from_numpy(mapped)


def _sparse(a: np.ndarray) -> Any:
    """A torch sparse tensor of a's values: no data pointer to read."""
    import torch

    return torch.from_numpy(a).to_sparse()


def _torch(dtype: str) -> Callable[[np.ndarray], Any]:
    """A zeroed torch tensor of a's shape and the torch dtype named ``dtype``."""

    def make(a: np.ndarray) -> Any:
        import torch

        return torch.zeros(a.shape, dtype=getattr(torch, dtype))

    return make


class _CudaLooking(np.ndarray):
    """A numpy array whose DLPack export says CUDA device 0 (DLPack device type 2) while its bytes
    are host memory: what refit refuses before it touches memory, where no GPU is at hand."""

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)

    def __dlpack__(self, **kwargs: Any) -> Any:
        import ctypes

        capsule = np.asarray(self).__dlpack__()
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        tensor = get(capsule, b"dltensor")  # DLTensor: data pointer, then device type (int32)
        ctypes.c_int32.from_address(tensor + ctypes.sizeof(ctypes.c_void_p)).value = 2
        return capsule


def _cuda_looking(a: np.ndarray) -> np.ndarray:
    return a.view(_CudaLooking)


def _all_cuda_looking(rank: int) -> Callable[[int, dict[str, Any]], None]:
    """Every buffer of ``rank`` made to look like CUDA memory."""

    def change(r: int, buffers: dict[str, Any]) -> None:
        if r == rank:
            buffers.update({name: _cuda_looking(a) for name, a in buffers.items()})

    return change


class _InterfaceWithoutBytes:
    """An object that claims numpy's array interface but has no ``nbytes``."""

    __array_interface__ = {"data": (0, False), "shape": (3,), "typestr": "<f4", "version": 3}


class _RaisingInterface:
    """An object whose array interface raises when read."""

    @property
    def __array_interface__(self) -> dict[str, Any]:
        raise RuntimeError("no interface today")


REFUSALS = [
    ("shape", change_buffer(2, "w", lambda a: np.zeros((24, 64), np.float32)),
     "buffer 'w' (rank 2): shape [24, 64] is not the rank's box of the tensor, [0:64, 0:24] (extent [64, 24])"),
    ("size", change_buffer(3, "w", lambda a: np.zeros((64, 23), np.float32)),
     "buffer 'w' (rank 3): shape [64, 23] is not the rank's box"),
    ("dtype", change_buffer(0, "w", lambda a: a.astype(np.float64)),
     "buffer 'w' (rank 0): dtype float64 does not hold the tensor's fp32 (expected float32)"),
    ("bf16 dtype", change_buffer(2, "b", lambda a: a.astype(np.float32)),
     "buffer 'b' (rank 2): dtype float32 does not hold the tensor's bf16 (expected bfloat16 or uint16)"),
    ("strided", change_buffer(1, "w", lambda a: np.zeros((48, 32), np.float32).T),
     "buffer 'w' (rank 1): not contiguous in row-major order (strides [1, 32] elements)"),
    ("read-only destination", change_buffer(3, "w", readonly_copy),
     "buffer 'w' (rank 3): read-only, but an inference rank's buffers receive the tensor"),
    ("missing", change_buffer(3, "b", None), "rank 3: no buffer for tensor 'b' (the inference rank needs its box [48:96])"),
    ("unknown tensor", change_buffer(1, "x", lambda a: np.zeros(3)), "buffer 'x' (rank 1): no tensor of that name in the problem"),
    ("not an array", change_buffer(0, "b", lambda a: [1, 2, 3]), "buffer 'b' (rank 0): a list is not an array that exports DLPack"),
    # Once "not an array that exports DLPack ...; bf16 and fp8 go as their bits: .view(np.uint16)".
    ("meta tensor", change_buffer(0, "b", lambda a: _meta(a.shape)),
     "buffer 'b' (rank 0): a torch.Tensor on device meta has no memory (a meta tensor is a shape and a dtype); "
     "refit reads and writes host or CUDA memory"),
    # Each was "DLPack type code 11 of 8 bits" (or 5 of 64 bits).
    ("fp8 fnuz dtype", change_buffer(1, "b", _torch("float8_e5m2fnuz")),
     "buffer 'b' (rank 1): dtype float8_e5m2fnuz does not hold the tensor's bf16 (expected bfloat16 or uint16)"),
    ("complex dtype", change_buffer(0, "w", _torch("complex64")),
     "buffer 'w' (rank 0): dtype complex64 does not hold the tensor's fp32 (expected float32)"),
    # Once only the buffer of the second kind was named.
    ("host and CUDA memory", change_buffer(2, "b", _cuda_looking),
     "buffer 'b' (rank 2): CUDA memory, while buffer 'w' (rank 2) is host memory"),
    # Once "rank 3: the buffers are CUDA memory, this executor moves host memory", naming none.
    ("CUDA memory on ucx", _all_cuda_looking(3),
     "buffer 'w' (rank 3): CUDA memory, as is every buffer of the rank, but the ucx executor moves host memory"),
    ("big-endian", change_buffer(0, "w", lambda a: a.astype(">f4")),
     "buffer 'w' (rank 0): a ndarray on device cpu of dtype >f4 is not an array that exports DLPack"),
    # Once moved as its bytes: the destination got -w. Once a segfault at the first write.
    ("negated view", change_buffer(0, "w", _negated),
     "rank 0: buffer 'w': a torch tensor with a pending negation its bytes do not show"),
    ("read-only mapping", change_buffer(3, "w", _read_only_mapping),
     "buffer 'w' (rank 3): its memory is read-only"),
    # Each of these raised on its rank alone, before the agreement, and left the others waiting in
    # the exchange until it gave up (torch.distributed: 30 minutes).
    ("key with a lone surrogate", change_buffer(1, "w\ud800", lambda a: np.zeros(3)),
     "rank 1: buffer key 'w\\ud800': not text a tensor name can be (it has no UTF-8 spelling)"),
    ("sparse tensor", change_buffer(0, "w", _sparse),
     "rank 0: buffer 'w': its memory cannot be read (RuntimeError: Cannot access data pointer"),
    ("array interface without nbytes", change_buffer(1, "b", lambda a: _InterfaceWithoutBytes()),
     "rank 1: buffer 'b': its memory cannot be read (AttributeError: "),
    ("array interface that raises", change_buffer(0, "b", lambda a: _RaisingInterface()),
     "rank 0: buffer 'b': its memory cannot be read (RuntimeError: no interface today)"),
]  # fmt: skip


@pytest.mark.parametrize("change,message", [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS])
def test_wrong_buffers_are_refused_on_every_rank_before_any_byte_moves(
    rows_to_columns: Path, change: Any, message: str
) -> None:
    results, buffers = _refit(rows_to_columns, _numpy_buffers, change=change)
    offender = int(message.split("rank ")[1].split(")")[0].split(":")[0])
    for rank, r in enumerate(results):
        assert isinstance(r, refit.BadInput), (rank, r)
        assert isinstance(r, ValueError)
        if rank == offender:
            assert str(r).startswith(message), str(r)
        else:
            assert str(r).startswith(f"refused because rank {offender} refused: "), str(r)
            assert message in str(r)
    # Nothing moved: every destination still holds what it held (the sentinel, or the zeros of
    # a replacement).
    for rank in (2, 3):
        for name, a in buffers[rank].items():
            a = _as_numpy(a)
            assert np.all(a == SENTINEL) or np.all(a == 0) or not a.flags.writeable, (rank, name)


def _freed(a: np.ndarray) -> Any:
    """A torch tensor of a's shape whose storage was freed, as FSDP frees a parameter between its
    uses (``untyped_storage().resize_(0)``): its data pointer is null."""
    import torch

    t = torch.from_numpy(a).clone()  # torch's own storage: numpy's cannot be resized
    t.untyped_storage().resize_(0)
    return t


def _fake(a: np.ndarray) -> Any:
    """A FakeTensor of a's shape (torch.compile's tracing): a shape without memory."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        return torch.zeros(a.shape, dtype=torch.float32)


@pytest.mark.parametrize("ranks", [[0], [2], [0, 2]], ids=["source", "destination", "both"])
@pytest.mark.parametrize("make", [_freed, _fake], ids=["freed storage", "FakeTensor"])
def test_a_tensor_without_memory_is_refused_naming_it(rows_to_columns: Path, ranks: list[int], make: Any) -> None:
    # A freed storage was "sources[0]: the buffer of tensor 'w' holds 6144 bytes, its box [0:32,
    # 0:48] needs 6144" on a training rank, "its memory is read-only" on an inference rank, and
    # with both "a buffer it reads shares memory with one that rank 2 ... writes" (both at 0).
    import warnings

    problem = refit.Problem.from_manifest(rows_to_columns)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    buffers = {r: _numpy_buffers(problem, r) for r in range(problem.world_size)}
    for r in ranks:
        buffers[r]["w"] = make(buffers[r]["w"])

    def body(rank: int, exchange: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a FakeTensor's data_ptr() warns
            return refit.Executor("ucx", exchange, timeout=20).prepare(plan, buffers[rank])

    results = run_ranks(problem.world_size, body, timeout=30)
    for rank, r in enumerate(results):
        assert isinstance(r, refit.BadInput), (rank, r)
        if rank in ranks:  # each offender names itself, the others one of them
            assert str(r).startswith(f"buffer 'w' (rank {rank}): a "), str(r)
        assert any(f"buffer 'w' (rank {o}): a " in str(r) for o in ranks), str(r)
        assert " of 6144 bytes with no memory (its data pointer is null" in str(r) and "FSDP" in str(r), str(r)


_DTENSOR = """
import sys
import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.tensor import DeviceMesh, Shard, distribute_tensor

import refit
from conftest import run_ranks

dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
side = refit.Layout((1,), ("R",))
problem = refit.Problem.from_layouts([refit.TensorLayout("w", (4, 6), "fp32", side, side)], source_ranks=1,
                                     destination_ranks=1)
plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
whole = distribute_tensor(torch.ones(4, 6), DeviceMesh("cpu", [0]), [Shard(0)])
buffers = [{"w": whole}, {"w": np.zeros((4, 6), np.float32)}]
results = run_ranks(2, lambda rank, exchange: refit.Executor("ucx", exchange, timeout=20).prepare(plan, buffers[rank]))
print(repr(results[0]))
dist.destroy_process_group()
"""


def test_a_dtensor_is_refused_asking_for_its_local_shard() -> None:
    # Its DLPack export has the global shape and a null data pointer: refit read address 0. Torch's
    # process group is global state, hence a process of its own.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _DTENSOR], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parent)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "buffer 'w' (rank 0): a DTensor" in done.stdout and "pass this rank's shard, .to_local()" in done.stdout, (
        done.stdout
    )


def test_training_parameters_that_require_grad_are_read_as_they_are(rows_to_columns: Path) -> None:
    import torch

    def parameters(problem: refit.Problem, rank: int) -> dict[str, Any]:
        buffers = _torch_buffers(problem, rank)
        if problem.is_training(rank):
            buffers["w"] = torch.nn.Parameter(buffers["w"])  # requires grad, as a model's weights
        return buffers

    results, buffers = _refit(rows_to_columns, parameters, steps=1)
    assert not any(isinstance(r, BaseException) for r in results), results
    _check_destinations(rows_to_columns, buffers)


def test_executor_memory_holds_buffers(rows_to_columns: Path) -> None:
    problem = refit.Problem.from_manifest(rows_to_columns)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))

    def body(rank: int, exchange: Any) -> dict[str, np.ndarray]:
        executor = refit.Executor("ucx", exchange, timeout=20)
        arrays = {s.tensor: executor.empty(s) for s in problem.shards(rank)}
        for s in problem.shards(rank):
            arrays[s.tensor][...] = _full(problem, s.tensor)[s.slices] if problem.is_training(rank) else 0
        refit.run(executor, plan, arrays)
        return arrays

    results = run_ranks(problem.world_size, body)
    assert not any(isinstance(r, BaseException) for r in results), results
    _check_destinations(rows_to_columns, results)


def test_a_mistake_one_rank_makes_in_python_is_refused_by_every_rank_at_once(rows_to_columns: Path) -> None:
    # An unknown `storage` (or buffers that are no mapping) on rank 3 alone was raised there
    # before the collective prepare, and the other ranks waited for it until their exchange gave up.
    problem = refit.Problem.from_manifest(rows_to_columns)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))

    def body(rank: int, exchange: Any) -> Any:
        executor = refit.Executor("ucx", exchange, timeout=20)
        storage = "Framework" if rank == 3 else "logical"
        return executor.prepare(plan, _numpy_buffers(problem, rank), storage=storage)  # type: ignore[arg-type]

    results = run_ranks(problem.world_size, body, timeout=15)
    for rank, r in enumerate(results):
        assert isinstance(r, refit.BadInput), (rank, r)
        assert "storage: 'Framework' is neither 'logical' nor 'framework'" in str(r), str(r)


@pytest.mark.parametrize(
    "rank,message",
    [(2**40, "rank 1: rank 1099511627776 is not in the problem's 4 ranks"),
     ("2", "rank 1: rank: expected a plan rank (an int), got '2'"),
     (True, "rank 1: rank: expected a plan rank (an int), got True")],
)  # fmt: skip
def test_a_rank_that_is_not_a_plan_rank_is_refused_by_every_rank_at_once(
    rows_to_columns: Path, rank: Any, message: str
) -> None:
    # A TypeError on the rank that gave it, before the agreement: the others waited for it.
    problem = refit.Problem.from_manifest(rows_to_columns)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))

    def body(r: int, exchange: Any) -> Any:
        executor = refit.Executor("ucx", exchange, timeout=20)
        return executor.prepare(plan, _numpy_buffers(problem, r), rank=rank if r == 1 else None)

    results = run_ranks(problem.world_size, body, timeout=15)
    for r, result in enumerate(results):
        assert isinstance(result, refit.BadInput), (r, result)
        assert str(result) == message if r == 1 else str(result) == f"refused because rank 1 refused: {message}"


def test_an_executor_that_failed_says_so_at_once_instead_of_waiting_again(rows_to_columns: Path) -> None:
    # Rank 3 prepares but never executes: the others time out (1 s). Their next execute then
    # raises at once, naming the first failure, where each used to wait out the timeout again and
    # blame a peer; and preparing again is refused by every rank together.
    import time

    problem = refit.Problem.from_manifest(rows_to_columns)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))

    def body(rank: int, exchange: Any) -> Any:
        executor = refit.Executor("ucx", exchange, timeout=1)
        buffers = _numpy_buffers(problem, rank)
        prepared = executor.prepare(plan, buffers)
        took, first, again = 0.0, "", ""
        if rank != 3:
            with pytest.raises(refit.Failure) as failed:
                prepared.execute()
            start = time.monotonic()
            with pytest.raises(refit.Failure, match="cannot execute: this executor failed earlier") as repeated:
                prepared.execute()
            took, first, again = time.monotonic() - start, str(failed.value), str(repeated.value)
        with pytest.raises(refit.Failure, match="failed earlier"):
            executor.prepare(plan, buffers)
        return took, first, again

    results = run_ranks(problem.world_size, body, timeout=30)
    for rank in range(problem.world_size):
        assert not isinstance(results[rank], BaseException), (rank, results[rank])
    for took, first, again in results[:3]:
        assert took < 0.5, took
        assert first.split(": ", 1)[1] in again, (first, again)


def test_destination_buffers_that_share_memory_are_refused_on_every_rank(rows_to_columns: Path) -> None:
    # Once taken: both received, and the later write won, silently.
    message = "rank 3: buffers 'w' and 'b' share memory, but an inference rank's buffers each receive bytes of their own"
    results, _ = _refit(rows_to_columns, _numpy_buffers, change=lambda r, b: _alias(r, b, 3, "b", onto="w"))
    for rank, r in enumerate(results):
        assert isinstance(r, refit.BadInput), (rank, r)
        assert message in str(r), str(r)


def test_ranks_of_one_process_that_share_memory_one_writes_are_refused_on_every_rank(rows_to_columns: Path) -> None:
    # Rank 2's destination 'w' given the very array rank 0 sends 'w' from: rank 2's bytes landed
    # under what rank 0 was sending, silently. Ranks as threads of one process now refuse it
    # together, whichever prepared first; arrays that are only read by both stay allowed.
    problem = refit.Problem.from_manifest(rows_to_columns)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    shared = {rank: _numpy_buffers(problem, rank) for rank in range(problem.world_size)}
    column = shared[2]["w"]
    shared[0]["w"] = column.reshape(shared[0]["w"].shape)  # a view of the same bytes

    def body(rank: int, exchange: Any) -> Any:
        return refit.Executor("ucx", exchange, timeout=20).prepare(plan, shared[rank])

    results = run_ranks(problem.world_size, body, timeout=30)
    for rank, r in enumerate(results):
        assert isinstance(r, refit.BadInput), (rank, r)
        assert "shares memory with one that rank" in str(r) and "ranks must not share memory" in str(r), str(r)


@pytest.mark.parametrize("keep", [False, True], ids=["dropped", "kept"])
def test_memory_a_dropped_plan_used_may_be_used_again_by_another_rank(tmp_path: Path, keep: bool) -> None:
    # Ranks as long-lived threads that reuse memory across steps, as an allocator hands it out again:
    # step 1's destination is step 2's source. Claims were kept per executor for its whole life,
    # so step 2 was refused ("a buffer it reads shares memory with one that rank 1 ... writes")
    # although step 1's plan was gone. A plan still alive keeps its claims: then it is refused.
    side = {"mesh": [1], "placements": ["R"]}
    manifest = write_manifest(tmp_path / "one.json", [{"name": "w", "shape": [64, 64], "dtype": "fp32",
                                                       "source": side, "destination": side}], 1, 1)  # fmt: skip
    plan = refit.plan(refit.Problem.from_manifest(manifest), refit.Cluster.preset("cpu-host"))
    pool = np.zeros((2, 64, 64), np.float32)
    steps = [{0: np.ones((64, 64), np.float32), 1: pool[0]}, {0: pool[0], 1: pool[1]}]
    kept: list[Any] = []

    def body(rank: int, exchange: Any) -> list[str]:
        executor, out = refit.Executor("ucx", exchange, timeout=20), []
        for buffers in steps:
            try:
                prepared = executor.prepare(plan, {"w": buffers[rank]})
                prepared.execute()
                out.append("ok")
                if keep:
                    kept.append(prepared)
                del prepared
            except refit.BadInput as e:
                out.append(str(e))
        return out

    results = run_ranks(2, body, timeout=30)
    if not keep:
        assert results == [["ok", "ok"], ["ok", "ok"]], results
        assert np.all(pool[1] == 1)
        return
    assert [r[0] for r in results] == ["ok", "ok"], results
    assert "rank 0: a buffer it reads shares memory with one that rank 1 (prepared in this process) writes" in results[0][1]


def test_a_live_plan_of_a_thread_that_ended_still_claims_its_memory(tmp_path: Path) -> None:
    # Claims told threads apart by threading.get_ident(), which Python gives a new thread once
    # another ended: a rank on a new thread could read memory a live plan of an ended one writes.
    side = {"mesh": [1], "placements": ["R"]}
    manifest = write_manifest(tmp_path / "one.json", [{"name": "w", "shape": [8], "dtype": "fp32",
                                                       "source": side, "destination": side}], 1, 1)  # fmt: skip
    plan = refit.plan(refit.Problem.from_manifest(manifest), refit.Cluster.preset("cpu-host"))
    written = np.zeros(8, np.float32)
    first = run_ranks(2, lambda rank, exchange: refit.Executor("ucx", exchange, timeout=20).prepare(
        plan, {"w": written if rank == 1 else np.ones(8, np.float32)}))  # fmt: skip
    assert all(isinstance(p, refit.Prepared) for p in first), first
    again = run_ranks(2, lambda rank, exchange: refit.Executor("ucx", exchange, timeout=20).prepare(
        plan, {"w": written if rank == 0 else np.zeros(8, np.float32)}))  # fmt: skip
    assert all(isinstance(r, refit.BadInput) for r in again), again
    assert "shares memory with one that rank 1 (prepared in this process) writes" in str(again[0]), again[0]


def test_an_exchange_that_garbles_bytes_is_named_not_a_decode_error(rows_to_columns: Path) -> None:
    # An exchange that hands back something else than what rank 1 gave (here its bytes reversed)
    # made prepare() raise UnicodeDecodeError, or fail with an empty reason. Every collective call
    # now carries refit's prefix; a part without it is named on every rank that received it.
    problem = refit.Problem.from_manifest(rows_to_columns)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))

    class Garbling:
        def __init__(self, inner: Any) -> None:
            self.rank, self.size, self._inner = inner.rank, inner.size, inner

        def allgather(self, data: bytes) -> list[bytes]:
            parts = self._inner.allgather(data)
            return [p[::-1] if r == 1 else p for r, p in enumerate(parts)]

    def body(rank: int, exchange: Any) -> Any:
        return refit.Executor("ucx", Garbling(exchange), timeout=20).prepare(plan, _numpy_buffers(problem, rank))

    results = run_ranks(problem.world_size, body, timeout=30)
    for rank, r in enumerate(results):
        assert isinstance(r, refit.Failure), (rank, r)
        assert "rank 1's part of collective call 1 (an allgather) is not refit's" in str(r), str(r)


def test_ctrl_c_while_executing_stops_the_execution_at_once(rows_to_columns: Path) -> None:
    # Rank 0 executes on the main thread, where Python runs its signal handlers, while rank 3
    # holds back: rank 0 waits for it. Ctrl-C (SIGINT) then raises KeyboardInterrupt within a
    # poll (0.1 s) instead of after the 20 s timeout, and the executor is done.
    import signal
    import threading
    import time

    from conftest import ThreadExchange

    problem = refit.Problem.from_manifest(rows_to_columns)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    exchange = ThreadExchange(problem.world_size)
    interrupted = threading.Event()
    others: dict[int, Any] = {}

    def peer(rank: int) -> None:
        try:
            prepared = refit.Executor("ucx", exchange.rank(rank), timeout=20).prepare(
                plan, _numpy_buffers(problem, rank))
            if rank == 3:
                interrupted.wait(30)
            prepared.execute()
        except refit.Failure as e:
            others[rank] = e

    threads = [threading.Thread(target=peer, args=(r,), daemon=True) for r in (1, 2, 3)]
    for t in threads:
        t.start()
    prepared = refit.Executor("ucx", exchange.rank(0), timeout=20).prepare(plan, _numpy_buffers(problem, 0))
    threading.Timer(0.5, signal.raise_signal, args=(signal.SIGINT,)).start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        prepared.execute()
    took = time.monotonic() - start
    interrupted.set()
    for t in threads:
        t.join(30)
        assert not t.is_alive(), "a peer hung after the interrupt"
    assert took < 3.0, took
    with pytest.raises(refit.Failure, match="interrupted"):
        prepared.execute()
    assert all(isinstance(e, refit.Failure) for e in others.values()), others


@pytest.mark.parametrize("move", ["data", "resize"])
def test_a_buffer_whose_memory_moved_since_prepare_is_refused_at_execute(rows_to_columns: Path, move: str) -> None:
    # `param.data = t` (CPU offload, re-processed weights) or resize_() after prepare left the
    # executor writing into freed memory: heap corruption, and the parameter never got its bytes.
    import torch

    problem = refit.Problem.from_manifest(rows_to_columns)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))

    def body(rank: int, exchange: Any) -> Any:
        buffers = _torch_buffers(problem, rank)
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

    side = {"mesh": [1], "placements": ["R"]}
    manifest = write_manifest(tmp_path / "one.json", [{"name": "w", "shape": [4, 6], "dtype": "fp32",
                                                       "source": side, "destination": side}], 1, 1)  # fmt: skip
    plan = refit.plan(refit.Problem.from_manifest(manifest), refit.Cluster.preset("cpu-host"))
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


def _one_tensor_plan(tmp_path: Path) -> refit.Plan:
    """A plan of one fp32 [4, 6] tensor from one training rank to one inference rank."""
    side = {"mesh": [1], "placements": ["R"]}
    manifest = write_manifest(tmp_path / "one.json", [{"name": "w", "shape": [4, 6], "dtype": "fp32",
                                                       "source": side, "destination": side}], 1, 1)  # fmt: skip
    return refit.plan(refit.Problem.from_manifest(manifest), refit.Cluster.preset("cpu-host"))


@pytest.mark.parametrize("inference", [False, True], ids=["parameter", "inference tensor"])
def test_a_destination_written_in_place_bumps_its_autograd_version(tmp_path: Path, inference: bool) -> None:
    # A graph that saved a destination for backward used the refitted values silently, where
    # torch's own in-place ops (copy_) make backward() raise. A tensor made under inference_mode
    # has no version counter, and is written as before.
    import torch

    plan = _one_tensor_plan(tmp_path)
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


_WITHOUT_TORCH = """
import sys
import numpy as np
import refit
from conftest import run_ranks

side = refit.Layout((1,), ("R",))
problem = refit.Problem.from_layouts([refit.TensorLayout("w", (4, 6), "fp32", side, side)], source_ranks=1,
                                     destination_ranks=1)
plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
results = run_ranks(2, lambda rank, exchange: refit.Executor("ucx", exchange, timeout=20).prepare(
    plan, {"w": np.ones((4, 6), np.float32) if rank == 0 else np.zeros((4, 6), np.float32)}).execute())
print(all(isinstance(r, refit.ExecutionReport) for r in results), "torch" in sys.modules)
"""


def test_numpy_buffers_do_not_import_torch() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _WITHOUT_TORCH], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parent)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"], done.stdout


def test_one_executor_runs_one_execution_at_a_time(rows_to_columns: Path) -> None:
    # Two plans prepared on one executor, executed from two threads: both drove the one transport
    # worker at once. The second now raises at once, and the first completes. Training ranks 0
    # and 1 know their first execution is under way when it has sent a chunk (on_chunk_sent); it
    # cannot end before rank 3, held back, executes too. No sleep: the test waits on the event.
    import threading

    problem = refit.Problem.from_manifest(rows_to_columns)
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    released = threading.Event()

    def body(rank: int, exchange: Any) -> Any:
        sent = threading.Event()
        executor = refit.Executor("ucx", exchange, timeout=20, on_chunk_sent=lambda transfer, chunk: sent.set())
        first = executor.prepare(plan, _numpy_buffers(problem, rank))
        second = executor.prepare(plan, _numpy_buffers(problem, rank))
        if rank >= 2:  # rank 3 holds the others in their first execution until ranks 0 and 1 have tried
            if rank == 3:
                released.wait(20)
            return first.execute().rank
        done: dict[str, Any] = {}
        worker = threading.Thread(target=lambda: done.setdefault("first", first.execute()))
        worker.start()
        assert sent.wait(20), "the first execution sent nothing"
        with pytest.raises(refit.Failure, match="already executing a plan on another thread"):
            second.execute()
        return worker, done

    tried = threading.Barrier(2, action=released.set)

    def ranked(rank: int, exchange: Any) -> Any:
        out = body(rank, exchange)
        if rank >= 2:
            return out
        tried.wait(20)
        worker, done = out
        worker.join(20)
        return done["first"].rank

    results = run_ranks(problem.world_size, ranked, timeout=40)
    assert results == [0, 1, 2, 3]
