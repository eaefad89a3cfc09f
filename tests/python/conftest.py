"""Fixtures of the refit Python tests: the refit command to compare with, manifests, and ranks
run as threads of this process (each with its own executor, meeting through an in-process
allgather), which is possible only because prepare() and execute() release the GIL."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pytest

ROOT = Path(os.environ.get("REFIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
DATA = ROOT / "tests" / "data"
TINY_MOE = DATA / "models" / "tiny-qwen3-moe.json"


def mpirun_env() -> dict[str, str]:
    """This process's environment for the processes mpirun starts, outside ctest too: this
    machine's shared memory and loopback, mpirun as root, and Open MPI 4.1 trusting the exit code
    of a rank that finalised (REFIT_MPI_TEST_ENV in tests/CMakeLists.txt says why)."""
    env = dict(os.environ)
    env.setdefault("UCX_TLS", "self,sm,tcp")
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_orte_allowed_exit_without_sync="1")  # fmt: skip
    return env


_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
_given: set[int] = set()


def _ephemeral_start() -> int:
    """The first port the kernel gives outgoing connections (32768 unless configured)."""
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port of this machine that nothing listens on now, for a torch.distributed rendezvous,
    and below the kernel's range for outgoing connections: a port picked before the processes
    that listen on it start must not be the one the kernel meanwhile gives a connection of the job
    (gloo's, a store's), or the rendezvous fails with EADDRINUSE and leaves its peers waiting.
    A port is handed out once per test process."""
    high = _ephemeral_start()
    low = max(1024, high - 16384)
    while True:
        port = random.randrange(low, high)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port


def run_workers(script: Path, size: int, env: dict[str, str]) -> tuple[list[subprocess.Popen[str]], list[tuple[str, str]]]:
    """Starts `size` processes of `script` (argument: the tiny MoE model), rank r with RANK=r in
    `env`, and waits for them (120 s at most); the processes and their (stdout, stderr)."""
    workers = [
        subprocess.Popen([sys.executable, str(script), str(TINY_MOE)], env={**env, "RANK": str(r)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r in range(size)
    ]  # fmt: skip
    outputs = []
    try:
        for w in workers:
            outputs.append(w.communicate(timeout=120))
    finally:
        for w in workers:
            w.kill()
    return workers, outputs


def cli_path() -> Optional[str]:
    """The refit command to run: REFIT_CLI, else this checkout's release build, else the PATH's."""
    given = os.environ.get("REFIT_CLI")
    if given:
        return given
    built = ROOT / "build" / "release" / "cli" / "refit"
    return str(built) if built.exists() else shutil.which("refit")


@pytest.fixture(scope="session")
def cli() -> Callable[..., subprocess.CompletedProcess]:
    """Runs the refit command (REFIT_CLI, or build/release/cli/refit) and returns the process."""
    path = cli_path()
    if path is None:
        pytest.skip("the refit command is not built (REFIT_CLI)")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([path, *args], capture_output=True, text=True, timeout=600)

    return run


@pytest.fixture(scope="session")
def cli_json(cli: Callable[..., subprocess.CompletedProcess]) -> Callable[..., dict[str, Any]]:
    """The refit command's --json object for these arguments (it must succeed)."""

    def run(*args: str) -> dict[str, Any]:
        done = cli(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    return run


def write_manifest(path: Path, tensors: list[dict[str, Any]], source_ranks: int, destination_ranks: int) -> Path:
    """Writes a manifest (the refit-manifest format) and returns its path."""
    path.write_text(json.dumps({"format": "refit-manifest", "version": 1, "source_ranks": source_ranks,
                                "destination_ranks": destination_ranks, "tensors": tensors}))  # fmt: skip
    return path


@pytest.fixture
def rows_to_columns(tmp_path: Path) -> Path:
    """Two tensors, rows over 2 training ranks -> columns over 2 inference ranks (fp32 and bf16)."""
    tensors = [
        {"name": "w", "shape": [64, 48], "dtype": "fp32",
         "source": {"mesh": [2], "placements": ["S0"]}, "destination": {"mesh": [2], "placements": ["S1"]}},
        {"name": "b", "shape": [96], "dtype": "bf16",
         "source": {"mesh": [2], "placements": ["R"]}, "destination": {"mesh": [2], "placements": ["S0"]}},
    ]  # fmt: skip
    return write_manifest(tmp_path / "rows_to_columns.json", tensors, 2, 2)


class ThreadExchange:
    """An allgather between threads of this process, one handle per rank."""

    def __init__(self, size: int, timeout: float = 30.0) -> None:
        self.size = size
        self._slots: list[bytes] = [b""] * size
        self._barrier = threading.Barrier(size, timeout=timeout)

    def rank(self, rank: int) -> Any:
        exchange = self

        class Handle:
            def __init__(self) -> None:
                self.rank = rank
                self.size = exchange.size

            def allgather(self, data: bytes) -> list[bytes]:
                exchange._slots[rank] = data
                exchange._barrier.wait()
                out = list(exchange._slots)
                exchange._barrier.wait()
                return out

        return Handle()


def run_ranks(size: int, body: Callable[[int, Any], Any], timeout: float = 60.0) -> list[Any]:
    """Runs body(rank, exchange) for every rank in a thread of its own; returns each rank's
    result, or the exception it raised."""
    exchange = ThreadExchange(size)
    results: list[Any] = [None] * size

    def target(rank: int) -> None:
        try:
            results[rank] = body(rank, exchange.rank(rank))
        except BaseException as e:  # noqa: BLE001 - handed to the test
            results[rank] = e

    threads = [threading.Thread(target=target, args=(r,), daemon=True) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a rank hung"
    return results


def change_buffer(
    rank: int, name: str, value: Optional[Callable[[Any], Any]]
) -> Callable[[int, dict[str, Any]], None]:
    """A change to one rank's buffers before it prepares: buffer ``name`` replaced by
    ``value(old)``, or dropped when ``value`` is None."""

    def change(r: int, buffers: dict[str, Any]) -> None:
        if r == rank:
            if value is None:
                del buffers[name]
            else:
                buffers[name] = value(buffers.get(name))

    return change


def readonly_copy(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` that cannot be written."""
    a = a.copy()
    a.flags.writeable = False
    return a
