"""examples/python/megatron_to_vllm.py as a user runs it: torchrun, 2 Megatron ranks and 2 vLLM
workers, three refits; each worker checks it holds the trainer's weights after every update."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm")
pytest.importorskip("megatron.core")

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "python" / "megatron_to_vllm.py"


def test_the_example_refits_a_vllm_model_from_megatron_three_times() -> None:
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "OMP_NUM_THREADS": "1",
           "UCX_TLS": os.environ.get("UCX_TLS", "self,sm,tcp")}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
                           str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    # found, not split into lines: the ranks' prints share torchrun's stdout and may interleave
    lines = sorted(re.findall(r"(?:trainer rank \d|vLLM worker rank \d)[^\n]*?(?:times|in place)", done.stdout))
    assert lines == ["trainer rank 0: 15 parameters refitted 3 times", "trainer rank 1: 15 parameters refitted 3 times",
                     "vLLM worker rank 2: 15 parameters, 205440 bytes, 3 updates in place",
                     "vLLM worker rank 3: 15 parameters, 205440 bytes, 3 updates in place"], done.stdout  # fmt: skip
