"""Refits between processes, as RL jobs start them: the torchrun example (gloo for the exchange,
CPU tensors), the mpi4py example under mpirun, and a process killed mid-transfer, which the
survivors must report within the timeout, naming it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, free_port, mpirun_env, run_workers

EXAMPLES = ROOT / "examples" / "python"


@pytest.mark.processes
def test_torchrun_example_refits_a_tiny_model_and_verifies_every_element() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
         str(EXAMPLES / "torchrun_refit.py")],
        capture_output=True, text=True, timeout=300, env=mpirun_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in (0, 1):
        assert f"rank {rank} (training): sent" in done.stdout, done.stdout
    # tiny-qwen3-moe: 157056 parameters; TP2 on the inference side leaves each rank half of the
    # split tensors and all of the replicated ones: 79232 elements each.
    for rank in (2, 3):
        assert f"rank {rank} (inference): received 158464 bytes, verified 79232 elements" in done.stdout


@pytest.mark.processes
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_mpi4py_example_refits_with_numpy_arrays() -> None:
    pytest.importorskip("mpi4py")
    done = subprocess.run(
        ["mpirun", "--oversubscribe", "-np", "4", sys.executable, str(EXAMPLES / "mpi4py_refit.py")],
        capture_output=True, text=True, timeout=300, env=mpirun_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in (2, 3):  # fp32 this time: twice the bytes
        assert f"rank {rank} (inference): received 316928 bytes, verified 79232 elements" in done.stdout


@pytest.mark.processes
def test_a_killed_process_makes_every_survivor_raise_within_the_timeout_naming_it() -> None:
    # tiny-qwen3-moe TP2xEP2 -> TP2xDP2 (6 processes) in domains of two, 4 KiB chunks, as the
    # refit run fault test; rank 1 dies (SIGKILL) once its first chunk is sent.
    size, victim, timeout = 6, 1, 3.0
    env = mpirun_env()
    env.update(WORLD_SIZE=str(size), VICTIM=str(victim), REFIT_TIMEOUT=str(timeout),
               INIT_METHOD=f"tcp://127.0.0.1:{free_port()}")  # fmt: skip
    start = time.monotonic()
    workers, outputs = run_workers(Path(__file__).with_name("fault_worker.py"), size, env)
    elapsed = time.monotonic() - start
    assert workers[victim].returncode == -9, outputs[victim]
    for rank, (out, err) in enumerate(outputs):
        if rank == victim:
            continue
        assert workers[rank].returncode == 0, err
        outcome = json.loads(out.strip().splitlines()[-1])
        assert outcome["raised"] in {"PeerFailed", "Timeout", "Failure"}, outcome
        assert outcome["runtime_error"], outcome
        assert f"rank {victim} stopped responding" in outcome["message"], outcome
        assert outcome["message"].startswith(f"rank {rank}: "), outcome
        assert outcome["seconds"] < timeout + 5, outcome  # within the timeout and a few seconds
    assert elapsed < 90
