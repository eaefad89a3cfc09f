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
from conftest import change_buffer, readonly_copy, run_ranks
from rank_buffers import SENTINEL, full_tensor, numpy_buffers, torch_buffers



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
            np.testing.assert_array_equal(got, full_tensor(problem, s.tensor)[s.slices], err_msg=f"{s.tensor} rank {rank}")


@pytest.mark.parametrize("make", [numpy_buffers, torch_buffers], ids=["numpy", "torch"])
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
        mixed = numpy_buffers(problem, rank)
        mixed["b"] = torch_buffers(problem, rank)["b"]  # a torch bfloat16 tensor
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
    results, buffers = _refit(rows_to_columns, numpy_buffers, change=change)
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
    buffers = {r: numpy_buffers(problem, r) for r in range(problem.world_size)}
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
        buffers = torch_buffers(problem, rank)
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
            arrays[s.tensor][...] = full_tensor(problem, s.tensor)[s.slices] if problem.is_training(rank) else 0
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
        return executor.prepare(plan, numpy_buffers(problem, rank), storage=storage)  # type: ignore[arg-type]

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
        return executor.prepare(plan, numpy_buffers(problem, r), rank=rank if r == 1 else None)

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
        buffers = numpy_buffers(problem, rank)
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
    results, _ = _refit(rows_to_columns, numpy_buffers, change=lambda r, b: _alias(r, b, 3, "b", onto="w"))
    for rank, r in enumerate(results):
        assert isinstance(r, refit.BadInput), (rank, r)
        assert message in str(r), str(r)


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
        return refit.Executor("ucx", Garbling(exchange), timeout=20).prepare(plan, numpy_buffers(problem, rank))

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
                plan, numpy_buffers(problem, rank))
            if rank == 3:
                interrupted.wait(30)
            prepared.execute()
        except refit.Failure as e:
            others[rank] = e

    threads = [threading.Thread(target=peer, args=(r,), daemon=True) for r in (1, 2, 3)]
    for t in threads:
        t.start()
    prepared = refit.Executor("ucx", exchange.rank(0), timeout=20).prepare(plan, numpy_buffers(problem, 0))
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


def testnumpy_buffers_do_not_import_torch() -> None:
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
        first = executor.prepare(plan, numpy_buffers(problem, rank))
        second = executor.prepare(plan, numpy_buffers(problem, rank))
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
