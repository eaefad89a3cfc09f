"""Bad input raises refit.BadInput (a ValueError) with the message the refit command prints after
"refit plan: error: ", and the error code kept; failures are RuntimeErrors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import refit
from conftest import DATA, TINY_MOE

PREFIX = "refit plan: error: "


def _cli_message(cli: Any, *args: str) -> str:
    done = cli("plan", *args)
    assert done.returncode == 2, done.stderr  # bad input
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(PREFIX), line
    return line[len(PREFIX):]


def _tiny(train: str = "tp=2,ep=2,etp=1", infer: str = "tp=2") -> refit.Problem:
    return refit.Problem.from_model(TINY_MOE, train=train, infer=infer)


# (command-line arguments, the same in Python)
CASES: list[tuple[list[str], Callable[[Path], Any]]] = [
    (["--model", "no-such-model", "--train", "tp=1", "--infer", "tp=1"],
     lambda _: refit.Problem.from_model("no-such-model", train="tp=1", infer="tp=1")),
    (["--model", "deepseek-v3", "--train", "tp=3", "--infer", "tp=32,engines=8"],
     lambda _: refit.Problem.from_model("deepseek-v3", train="tp=3", infer="tp=32,engines=8")),
    (["--model", "qwen3-8b", "--train", "tp=2,bogus=1", "--infer", "tp=2"],
     lambda _: refit.Problem.from_model("qwen3-8b", train="tp=2,bogus=1", infer="tp=2")),
    (["--model", "qwen3-8b", "--train", "tp=2", "--infer", "tp=2,ep=3"],
     lambda _: refit.Problem.from_model("qwen3-8b", train="tp=2", infer="tp=2,ep=3")),
    (["--model", "qwen3-8b", "--train", "tp=2", "--infer", "tp=2", "--dtype", "float7"],
     lambda _: refit.Problem.from_model("qwen3-8b", train="tp=2", infer="tp=2", dtype="float7")),
    (["--model", str(DATA / "models" / "bad-missing-field.json"), "--train", "tp=1", "--infer", "tp=1"],
     lambda _: refit.Problem.from_model(DATA / "models" / "bad-missing-field.json", train="tp=1", infer="tp=1")),
    (["--manifest", "/no/such/manifest.json"],
     lambda _: refit.Problem.from_manifest("/no/such/manifest.json")),
    (["--manifest", "{tmp}/broken.json"],
     lambda tmp: refit.Problem.from_manifest(tmp / "broken.json")),
    (["--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2", "--cluster", "dgx-h1000"],
     lambda _: refit.Cluster.preset("dgx-h1000")),
    (["--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2", "--cluster", "dgx-h100:nic_gbs=3"],
     lambda _: refit.Cluster.preset("dgx-h100", nic_gbs=3)),
    (["--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2", "--cluster", "dgx-h100:nic_gbps=-1"],
     lambda _: refit.Cluster.preset("dgx-h100:nic_gbps=-1")),
    (["--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2",
      "--cluster", "dgx-h100:nodes=1,infer_offset=7"],
     lambda _: refit.plan(_tiny(), refit.Cluster.preset("dgx-h100:nodes=1,infer_offset=7"))),
    (["--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2",
      "--cluster-file", str(DATA / "topology" / "bad_missing_node.json")],
     lambda _: refit.Cluster.from_file(DATA / "topology" / "bad_missing_node.json")),
    (["--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2",
      "--nccl-topo-xml", str(DATA / "topology" / "malformed_gpu_without_sm.xml")],
     lambda _: refit.Cluster.from_nccl_xml(DATA / "topology" / "malformed_gpu_without_sm.xml")),
    (["--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2", "--strategy", "fastest"],
     lambda _: refit.plan(_tiny(), refit.Cluster.preset("cpu-host"), strategy="fastest")),
]  # fmt: skip


@pytest.mark.parametrize("args,call", CASES, ids=[" ".join(a[-2:]) for a, _ in CASES])
def test_bad_input_raises_with_the_commands_message(cli: Any, tmp_path: Path, args: list[str], call: Any) -> None:
    (tmp_path / "broken.json").write_text('{"source_ranks": 2, "destination_ranks": 2, "tensors": [{"name": 3}]}')
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    expected = _cli_message(cli, *args)
    with pytest.raises(ValueError) as raised:
        call(tmp_path)
    assert isinstance(raised.value, refit.BadInput)
    assert str(raised.value) == expected
    assert raised.value.code in {"invalid argument", "parse", "out of range", "not found", "mismatch", "unsupported"}


def test_error_classes_by_code() -> None:
    from refit._errors import make_error

    assert isinstance(make_error("timeout", "m"), TimeoutError)
    assert isinstance(make_error("timeout", "m"), RuntimeError)
    assert isinstance(make_error("peer failed", "m"), refit.PeerFailed)
    assert isinstance(make_error("runtime", "m"), refit.Failure)
    assert isinstance(make_error("internal", "m"), RuntimeError)
    assert not isinstance(make_error("runtime", "m"), ValueError)
    assert make_error("parse", "m").code == "parse"


def test_python_only_arguments_are_checked_too() -> None:
    problem = _tiny()
    with pytest.raises(ValueError, match="--vary nic_gbps: varies the hardware of a preset"):
        refit.sweep(problem, refit.Cluster.from_file(DATA / "topology" / "cluster_small.json"),
                    vary={"nic_gbps": [400]})  # fmt: skip
    with pytest.raises(ValueError, match="--vary nic_speed: unknown key"):
        refit.sweep(problem, refit.Cluster.preset("cpu-host"), vary={"nic_speed": [1]})
    with pytest.raises(ValueError, match="window: -1 is negative"):
        refit.simulate(problem, refit.Cluster.preset("cpu-host"), window=-1)
    with pytest.raises(ValueError, match="--executor: unknown executor 'tcp'"):
        refit.Executor("tcp", refit.exchange.from_callable(lambda d: [d], rank=0, size=1))
    # A deadline past 2^63 ns wrapped, and every wait failed at once: at most 10^6 s.
    for timeout in (float("inf"), 1e300, 0.0):
        with pytest.raises(ValueError, match=r"timeout: .* is not in \(0, 1e\+06\]"):
            refit.Executor("ucx", refit.exchange.from_callable(lambda d: [d], rank=0, size=1), timeout=timeout)
    with pytest.raises(refit.BadInput, match="unknown dtype 'bf17'"):
        refit.numpy_dtype("bf17")
    with pytest.raises(refit.BadInput, match="--quantize-at: unknown quantization site 'recevier'"):
        refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2", quantize_at="recevier")


def test_paths_with_a_nul_byte_are_refused_as_open_refuses_them(tmp_path: Path) -> None:
    # The compiled part read a path only up to the NUL: "real.json\0.bak" opened real.json.
    problem = _tiny()
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    for call in (
        lambda: refit.Problem.from_manifest(str(tmp_path / "m.json") + "\0.bak"),
        lambda: plan.save(str(tmp_path / "p.json") + "\0.bak"),
        lambda: refit.Plan.load(str(tmp_path / "p.json") + "\0.bak", problem, refit.Cluster.preset("cpu-host")),
        lambda: refit.Cluster.from_file(str(tmp_path / "c.json") + "\0"),
    ):
        with pytest.raises(ValueError, match="embedded null byte"):
            call()
    assert not list(tmp_path.iterdir())


def test_a_plan_that_cannot_be_written_in_full_raises(tmp_path: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    plan = refit.plan(_tiny(), refit.Cluster.preset("cpu-host"))
    with pytest.raises(refit.Failure, match="/dev/full: cannot be written"):
        plan.save("/dev/full")


def test_host_memory_beyond_the_host_is_refused_before_any_is_mapped() -> None:
    # UCX once filled /dev/shm until the kernel killed the process, and left the file behind.
    problem = refit.Problem.from_layouts(
        [refit.TensorLayout("w", (1 << 24, 1 << 20), "fp32", refit.Layout((1,), ("R",)), refit.Layout((1,), ("R",)))],
        source_ranks=1, destination_ranks=1,
    )  # fmt: skip
    executor = refit.Executor("ucx", refit.exchange.from_callable(lambda d: [d], rank=0, size=1))
    with pytest.raises(refit.BadInput, match="bytes, where this host has"):
        executor.empty(problem.shards(0)[0])


def test_simulate_takes_a_trace_path_or_a_flag() -> None:
    with pytest.raises(TypeError, match="trace: True, False or a path, got int"):
        refit.simulate(_tiny(), refit.Cluster.preset("cpu-host"), trace=5)  # type: ignore[arg-type]


class Shard:
    """A placement as DTensor spells it, before a DTensor counts a negative dim from the end."""

    def __init__(self, dim: int) -> None:
        self.dim = dim


def test_wrong_types_at_the_api_name_the_argument() -> None:
    # Each once failed deep inside (AttributeError, or nanobind's list of signatures), or was
    # taken: a string of placements read letter by letter, a string override adding more keys.
    problem = _tiny()
    cpu = refit.Cluster.preset("cpu-host")
    one = refit.exchange.from_callable(lambda d: [d], rank=0, size=1)
    side = refit.Layout((1,), ("R",))
    cases: list[tuple[Callable[[], Any], type, str]] = [
        (lambda: refit.plan(None, cpu), TypeError, "problem: expected a Problem, got NoneType"),  # type: ignore[arg-type]
        (lambda: refit.plan(problem, "cpu-host"), TypeError, "cluster"),  # type: ignore[arg-type]
        (lambda: refit.plan(problem, cpu, chunk_bytes=2**64), ValueError, "chunk_bytes: "),
        (lambda: refit.Cluster.preset(None), TypeError, "Cluster.preset: a preset name"),  # type: ignore[arg-type]
        (lambda: refit.Cluster.preset("dgx-h100", nic_gbps="400,nodes=1"), ValueError, "takes a number"),  # type: ignore[arg-type]
        (lambda: refit.Executor("ucx", object()), TypeError, "exchange: expected an allgather"),  # type: ignore[arg-type]
        (lambda: refit.Executor("ucx", one, timeout="5"), TypeError, "timeout: a number of seconds"),  # type: ignore[arg-type]
        (lambda: refit.Executor("ucx", one, on_chunk_sent=5), TypeError, "on_chunk_sent: a callable"),  # type: ignore[arg-type]
        (lambda: refit.Executor("ucx", one).empty(None), TypeError, "empty: a refit.Shard"),  # type: ignore[arg-type]
        (lambda: refit.numpy_dtype(["bf16"]), refit.BadInput, "unknown dtype"),  # type: ignore[arg-type]
        (lambda: refit.Layout(2, ("R",)), TypeError, "Layout.mesh: expected a sequence"),  # type: ignore[arg-type]
        (lambda: refit.Layout.of([0, 1], "S0"), TypeError, "placements: expected a sequence"),
        (lambda: refit.TensorLayout("w", (8,), "fp32", "S0", side), TypeError, "tensor 'w': source is a str"),  # type: ignore[arg-type]
        (lambda: refit.Problem.from_layouts([{"name": "w"}], source_ranks=1, destination_ranks=1),  # type: ignore[list-item]
         TypeError, "tensors[0]: expected a refit.TensorLayout, got dict"),
        (lambda: refit.Layout.of([0], [Shard(-1)]), ValueError, "Shard needs a dim counted from 0"),
    ]  # fmt: skip
    for call, kind, message in cases:
        with pytest.raises(kind, match=re.escape(message)):
            call()


def test_an_exchange_that_returns_no_bytes_is_named() -> None:
    # bytes(5) made five NUL bytes of an int: the refusal read "rank 0 refused: \x00\x00\x00\x00".
    problem = refit.Problem.from_layouts(
        [refit.TensorLayout("w", (8,), "fp32", refit.Layout((1,), ("R",)), refit.Layout((1,), ("R",)))],
        source_ranks=1, destination_ranks=1,
    )  # fmt: skip
    executor = refit.Executor("ucx", refit.exchange.from_callable(lambda d: [5], rank=0, size=2))
    plan = refit.plan(problem, refit.Cluster.preset("cpu-host"))
    with pytest.raises(refit.Error, match="the exchange returned 1 contributions for 2 ranks"):
        executor.prepare(plan, {"w": np.zeros(8, np.float32)})
    executor = refit.Executor("ucx", refit.exchange.from_callable(lambda d: [5, d], rank=0, size=2))
    with pytest.raises(refit.Error, match="the exchange returned a int for rank 0 where bytes were expected"):
        executor.prepare(plan, {"w": np.zeros(8, np.float32)})
