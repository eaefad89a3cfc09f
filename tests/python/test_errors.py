"""Bad input raises refit.BadInput (a ValueError) with the message the refit command prints after
"refit plan: error: ", and the error code kept; failures are RuntimeErrors."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import sys
import threading
from pathlib import Path, PurePosixPath
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
    # Once the last value kept silently: the spec's overrides went through a dict.
    (["--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2",
      "--cluster", "dgx-h100:nic_gbps=400,nic_gbps=800"],
     lambda _: refit.Cluster.preset("dgx-h100:nic_gbps=400,nic_gbps=800")),
    # Once taken: Python stripped spaces around the name and keys, and dropped empty items.
    *[(["--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2", "--cluster", spec],
       lambda _, spec=spec: refit.Cluster.preset(spec))
      for spec in ("dgx-h100\u00a0", " dgx-h100", "dgx-h100:", "dgx-h100:nodes=2,", "dgx-h100:nodes=2,,copy_gbps=3",
                   "dgx-h100: nodes=2", "dgx-h100:nodes= 2")],
    # ... and so with keyword overrides, which leave the spec's other items as they are.
    (["--model", str(TINY_MOE), "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2", "--cluster", "dgx-h100:,nodes=2"],
     lambda _: refit.Cluster.preset("dgx-h100:", nodes=2)),
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
    # A thousandth of a second is a unit slip: every live peer would be taken for gone.
    with pytest.raises(ValueError, match=r"timeout: 0.001 s is under 0.1 s \(milliseconds for seconds\?\)"):
        refit.Executor("ucx", refit.exchange.from_callable(lambda d: [d], rank=0, size=1), timeout=0.001)
    with pytest.raises(refit.BadInput, match="unknown dtype 'bf17'"):
        refit.numpy_dtype("bf17")
    with pytest.raises(refit.BadInput, match="--quantize-at: unknown quantization site 'recevier'"):
        refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2", quantize_at="recevier")


def test_simulating_a_plan_refuses_the_arguments_that_would_plan_it_otherwise() -> None:
    """A Plan is simulated as it was planned: another strategy or chunk size once passed silently,
    and so did another cluster (a plan of cpu-host predicted there, not on the hardware asked
    for). A cluster is now simulated on when the plan's links fit it, and refused naming why
    otherwise; strategy and chunk_bytes are refused."""
    problem = _tiny()
    two_nodes = refit.Cluster.preset("dgx-h100:gpus_per_node=2")
    plan = refit.plan(problem, two_nodes)
    faster = refit.Cluster.preset("dgx-h100:gpus_per_node=2,nic_gbps=800")
    assert refit.simulate(plan, faster).predicted_s < refit.simulate(plan).predicted_s
    assert refit.simulate(plan, two_nodes).predicted_s == refit.simulate(plan).predicted_s
    with pytest.raises(refit.BadInput, match="cluster: the plan does not fit it: transfer #"):
        refit.simulate(plan, refit.Cluster.preset("dgx-h100"))
    with pytest.raises(refit.BadInput, match="strategy: a Plan is simulated as it was planned, with 'refit'"):
        refit.simulate(plan, strategy="direct")
    with pytest.raises(refit.BadInput, match="chunk_bytes: a Plan is simulated with the chunks it was planned"):
        refit.simulate(plan, chunk_bytes=1 << 20)


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


def test_text_the_compiled_part_cannot_take_is_refused_naming_the_argument() -> None:
    # A lone surrogate or a NUL once reached the binding, which answered with its list of
    # signatures; a cluster placed for something that is not a Problem raised AttributeError.
    with pytest.raises(refit.BadInput, match="train: not valid Unicode text"):
        refit.Problem.from_model("llama-3.1-8b", train="tp=\udcff", infer="tp=1")
    with pytest.raises(refit.BadInput, match="nvml_library: contains a NUL character"):
        refit.Cluster.discover(nvml_library="a\x00b")
    for call in (lambda: refit.Cluster.preset("cpu-host").placed(None),
                 lambda: refit.Cluster.preset("cpu-host").describe(5)):  # fmt: skip
        with pytest.raises(TypeError, match="problem: expected a refit.Problem"):
            call()


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


def test_lower_bound_and_plan_load_name_an_argument_of_the_wrong_kind(tmp_path: Path) -> None:
    # Each was an AttributeError from inside ('NoneType' object has no attribute 'placed').
    problem, cpu = _tiny(), refit.Cluster.preset("cpu-host")
    plan = refit.plan(problem, cpu)
    plan.save(tmp_path / "p.json")
    none: Any = None
    a_plan: Any = plan
    cluster = "cluster (refit.Cluster.preset(...)): expected a Cluster, got NoneType"
    cases: list[tuple[Callable[[], Any], str]] = [
        (lambda: refit.lower_bound(problem, none), cluster),
        (lambda: refit.lower_bound(a_plan, cpu), "problem (plan.lower_bound for a Plan): expected a Problem, got Plan"),
        (lambda: refit.Plan.load(tmp_path / "p.json", none, cpu), "problem: expected a Problem, got NoneType"),
        (lambda: refit.Plan.load(tmp_path / "p.json", problem, none), cluster),
        (lambda: refit.plan_join(none, cpu, 0), "problem: expected a Problem, got NoneType"),
    ]  # fmt: skip
    for call, message in cases:
        with pytest.raises(TypeError, match=re.escape(message)):
            call()
    assert refit.lower_bound(problem, cpu) == plan.lower_bound


def test_strings_flags_and_callbacks_of_the_wrong_kind_name_the_argument() -> None:
    # Each was nanobind's "incompatible function arguments" with a list of signatures.
    problem, cpu = _tiny(), refit.Cluster.preset("cpu-host")
    elastic = refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2,engines=2")
    tiny: Any = functools.partial(refit.Problem.from_model, TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2")
    none: Any = None
    raw: Any = b"refit"
    cases: list[tuple[Callable[[], Any], str]] = [
        (lambda: refit.plan(problem, cpu, none), "strategy: expected a str, got None"),
        (lambda: refit.plan(problem, cpu, raw), "strategy: expected a str, got b'refit'"),
        (lambda: refit.simulate(problem, cpu, none), "strategy: expected a str, got None"),
        (lambda: refit.simulate(problem, cpu, deployment=raw), "deployment: expected a str, got b'refit'"),
        (lambda: refit.simulate_elastic(elastic, cpu, join=0, source=none), "source: expected a str, got None"),
        (lambda: refit.plan_join(elastic, cpu, 0, strategy=none), "strategy: expected a str, got None"),
        (lambda: tiny(train=None), "train: expected a str, got None"),
        (lambda: tiny(train=b"tp=2"), "train: expected a str, got b'tp=2'"),
        (lambda: tiny(infer=3), "infer: expected a str, got 3"),
        (lambda: tiny(dtype=b"bf16"), "dtype: expected a str, got b'bf16'"),
        (lambda: tiny(quantize=b"mxfp8"), "quantize: expected a str, got b'mxfp8'"),
        (lambda: tiny(quantize_at=None), "quantize_at: expected a str, got None"),
        (lambda: tiny(per_expert="no"), "per_expert: expected True or False, got 'no'"),
        (lambda: tiny(mtp=2), "mtp: expected True or False, got 2"),
        (lambda: problem.with_layouts(train=raw), "train: expected a str, got b'refit'"),
        (lambda: problem.with_layouts(infer=3), "infer: expected a str, got 3"),  # type: ignore[arg-type]
    ]  # fmt: skip
    for call, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            call()
    # A flag takes 0 and 1, as every flag of the package does: mtp=1 asks for the MTP layer.
    with pytest.raises(refit.BadInput, match="the config has no MTP layer to include"):
        tiny(mtp=1)
    with pytest.raises(TypeError, match=re.escape("progress: a callable (done, total) or None, got 5")):
        refit.sweep(problem, cpu, {"copy_gbps": [100]}, progress=5)  # type: ignore[arg-type]


def test_a_preset_override_is_a_number_not_its_spelling() -> None:
    # "400" was read as a number, where Cluster.preset takes ints and floats.
    for value in ("400", "4e2", b"400"):
        message = f"nic_gbps: a preset override takes a number, got {value!r}"
        with pytest.raises(refit.BadInput, match=re.escape(message)):
            refit.Cluster.preset("dgx-h100", nic_gbps=value)  # type: ignore[arg-type]
    assert refit.Cluster.preset("dgx-h100", nic_gbps=400.0).spec == "dgx-h100:nic_gbps=400"
    assert refit.Cluster.preset("dgx-h100:nodes=2", nic_gbps=800).overrides == {"nodes": "2", "nic_gbps": "800"}


def test_nan_and_infinity_in_a_manifest_name_the_field() -> None:
    # Each was "manifest: not valid JSON: parse error at line 1, column 123", naming no field.
    side = refit.Layout((1,), ("R",))
    nan: Any = math.nan
    minus_inf: Any = np.float64(-math.inf)  # numpy's, as a mesh made with numpy would hold
    nan_shape = refit.TensorLayout("w", (nan,), "fp32", side, side)
    inf_mesh = refit.TensorLayout("w", (8,), "fp32", refit.Layout((minus_inf,), ("R",)), side)
    for layout, message in [
        (nan_shape, "tensor 'w' (tensors[0].shape[0]): expected an integer, got nan"),
        (inf_mesh, "tensor 'w' (tensors[0].source.mesh[0]): expected an integer, got -inf"),
    ]:
        with pytest.raises(refit.BadInput, match=re.escape(message)):
            refit.Problem.from_layouts([layout], source_ranks=1, destination_ranks=1)
    tensor = {"name": "w", "shape": [8], "dtype": "fp32", "source": side.to_manifest(),
              "destination": side.to_manifest()}  # fmt: skip
    cases = [
        ({"source_ranks": math.inf, "destination_ranks": 1, "tensors": []},
         "source_ranks: expected an integer, got inf"),
        ({"source_ranks": 1, "destination_ranks": 1, "tensors": [tensor, {**tensor, "shape": [np.float32("nan")]}]},
         "tensors[1].shape[0]: expected an integer, got nan"),
    ]  # fmt: skip
    for manifest, message in cases:
        with pytest.raises(refit.BadInput, match=re.escape(message)):
            refit.Problem.from_manifest(manifest)
    # A manifest that contains itself is still named so, with a nan after the loop or not.
    looped: dict[str, Any] = {"source_ranks": 1, "destination_ranks": 1}
    looped["tensors"] = [looped]
    with pytest.raises(refit.BadInput, match="the manifest contains itself"):
        refit.Problem.from_manifest(looped)
    looped["z"] = math.nan
    with pytest.raises(refit.BadInput, match="the manifest contains itself"):
        refit.Problem.from_manifest(looped)


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


def _within(seconds: float, call: Callable[[], Any]) -> Any:
    """call() on a thread of its own: its result or what it raised, failing the test (rather than
    hanging it) when it does not return in time, as a write to a FIFO nobody reads would not."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(call())
        except BaseException as e:  # noqa: BLE001 - handed to the test
            outcome.append(e)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still running after {seconds} s"
    return outcome[0]


def test_output_paths_are_refused_before_any_work_as_plan_save_refuses_them(tmp_path: Path) -> None:
    # A trace or manifest written to a FIFO nobody read hung; a folder, "" or a missing folder
    # failed with a raw IsADirectoryError or FileNotFoundError, and only after the simulation.
    problem = _tiny()
    cpu = refit.Cluster.preset("cpu-host")
    plan = refit.plan(problem, cpu)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    bad = {str(fifo): "a FIFO that no process reads", str(tmp_path): "is a directory",
           str(tmp_path / "no" / "t.json"): "cannot be created", "": "an empty path"}  # fmt: skip
    for path, why in bad.items():
        calls = {
            "trace": lambda: refit.simulate(problem, cpu, trace=path),
            # Refused before planning: the unknown strategy is never reached.
            "trace ": lambda: refit.simulate(problem, cpu, strategy="no-such", trace=path),
            "trace  ": lambda: refit.simulate(plan, trace=path),
            "path": lambda: problem.save_manifest(path),
        }
        for keyword, call in calls.items():
            raised = _within(10, call)
            assert isinstance(raised, refit.BadInput), (keyword, path, raised)
            assert str(raised).startswith(f"{keyword.strip()}: {path}" if path else keyword.strip()), str(raised)
            assert why in str(raised), str(raised)
    # Plan.save refuses them by the same rules.
    for path, why in bad.items():
        raised = _within(10, lambda: plan.save(path))
        assert isinstance(raised, refit.BadInput) and why in str(raised), (path, raised)


class _PathLike:
    """An os.PathLike that is no pathlib path."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __fspath__(self) -> str:
        return self.path


def test_a_trace_is_written_to_any_path_like(tmp_path: Path, monkeypatch: Any) -> None:
    # A PurePosixPath or any os.PathLike was accepted, and no file was written.
    monkeypatch.chdir(tmp_path)
    problem, cpu = _tiny(), refit.Cluster.preset("cpu-host")
    for given, written in [(PurePosixPath("pure.json"), "pure.json"), (_PathLike("custom.json"), "custom.json"),
                           (b"bytes.json", "bytes.json"), (tmp_path / "path.json", "path.json")]:  # fmt: skip
        refit.simulate(problem, cpu, trace=given)  # type: ignore[arg-type]
        assert json.loads((tmp_path / written).read_text())["traceEvents"], given
    with pytest.raises(TypeError, match="trace: True, False or a path, got int"):
        refit.simulate(problem, cpu, trace=5)  # type: ignore[arg-type]


def test_file_names_that_are_not_utf8_are_read_and_written(tmp_path: Path) -> None:
    # A name os.listdir returns for bytes that are not UTF-8 ('m\udcff.json') was a TypeError from
    # the binding, and the same name as bytes "a path or a mapping, got bytes", while the refit
    # command read the file.
    if sys.getfilesystemencoding().lower() != "utf-8":
        pytest.skip("file names here are not UTF-8")
    problem, cpu = _tiny(), refit.Cluster.preset("cpu-host")
    surrogate = str(tmp_path / "m\udcff.json")
    problem.save_manifest(surrogate)
    assert os.listdir(tmp_path) == ["m\udcff.json"]
    assert os.fsencode(surrogate).endswith(b"m\xff.json")
    for name in (surrogate, os.fsencode(surrogate), Path(surrogate)):
        assert refit.Problem.from_manifest(name).tensors == problem.tensors
    plan = refit.plan(problem, cpu)
    plan.save(tmp_path / "p\udcfe.json")
    assert refit.Plan.load(os.fsencode(str(tmp_path / "p\udcfe.json")), problem, cpu).hash == plan.hash
    # Each point of a sweep loads the manifest again, by the name it was given.
    rows = refit.sweep(refit.Problem.from_manifest(surrogate), cpu, {"copy_gbps": [100]}, strategies=["refit"],
                       as_frame=False)  # fmt: skip
    assert rows and {r["strategy"] for r in rows} == {"refit"}
    with pytest.raises(refit.BadInput, match="no such file"):
        refit.Problem.from_manifest(str(tmp_path / "gone\udcff.json"))


def test_an_elastic_timeout_is_finite_and_at_most_the_executors_cap() -> None:
    # inf gave timeout_s, completion_s and lost_s of None; 1e300 was taken, where the command and
    # the executors cap a timeout at 10^6 s.
    problem = refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2,engines=2")
    cpu = refit.Cluster.preset("cpu-host")
    for timeout in (math.inf, math.nan, 1e300, 1e6 + 1, 0.0, -1.0):
        with pytest.raises(refit.BadInput, match=re.escape("timeout_s: ") + r".* is not in \(0, 1e\+06\]"):
            refit.simulate_elastic(problem, cpu, fail=0, timeout_s=timeout, strategy="gather-broadcast")
    with pytest.raises(refit.BadInput, match="timeout_s: expected a number of seconds, got '5'"):
        refit.simulate_elastic(problem, cpu, fail=0, timeout_s="5")  # type: ignore[arg-type]
    assert refit.simulate_elastic(problem, cpu, fail=0, timeout_s=1e6).elastic["timeout_s"] == 1e6


def test_preset_keywords_cannot_add_overrides_of_their_own() -> None:
    # **{"copy_gbps=1,nodes": 3} made the spec "dgx-h100:copy_gbps=1,nodes=3".
    for key in ("copy_gbps=1,nodes", "nodes:2", "nic_gbps\n", ""):
        with pytest.raises(refit.BadInput, match=re.escape(f"Cluster.preset: {key!r} is not an override key")):
            refit.Cluster.preset("dgx-h100", **{key: 3})
    # A keyword still sets a key the spec gives, in its place.
    assert refit.Cluster.preset("dgx-h100:nic_gbps=400,nodes=2", nic_gbps=800).spec == "dgx-h100:nic_gbps=800,nodes=2"


def test_strategy_names_are_checked_before_any_prediction() -> None:
    # sweep kept the rows of no strategy for an unknown name and returned []; a bare string was
    # read letter by letter ("unknown strategy 'r'").
    problem, cpu = _tiny(), refit.Cluster.preset("cpu-host")
    unknown = "strategies: unknown strategy 'bogus' (expected refit, direct, m2n-ring, gather-broadcast)"
    with pytest.raises(refit.BadInput, match=re.escape(unknown)):
        refit.sweep(problem, cpu, {"copy_gbps": [100]}, strategies=["bogus"])
    with pytest.raises(refit.BadInput, match=re.escape(unknown)):
        refit.compare(problem, cpu, strategies=["refit", "bogus"])
    for call in (lambda: refit.compare(problem, cpu, strategies="refit"),
                 lambda: refit.sweep(problem, cpu, {"copy_gbps": [100]}, strategies="refit")):  # fmt: skip
        with pytest.raises(refit.BadInput, match="strategies: a list of strategy names, not one string 'refit'"):
            call()


def test_chunk_bytes_is_a_whole_number_of_bytes_everywhere_as_plan_takes_it() -> None:
    # simulate cut 1.5 to 1 and took "8", which plan() refuses.
    problem, cpu = _tiny(), refit.Cluster.preset("cpu-host")
    calls = [lambda c: refit.plan(problem, cpu, chunk_bytes=c), lambda c: refit.simulate(problem, cpu, chunk_bytes=c),
             lambda c: refit.compare(problem, cpu, chunk_bytes=c),
             lambda c: refit.sweep(problem, cpu, {"copy_gbps": [100]}, chunk_bytes=c),
             lambda c: refit.simulate_elastic(problem, cpu, members=[0], chunk_bytes=c)]  # fmt: skip
    for call in calls:
        for chunk in (1.5, "8", True, None):
            with pytest.raises(refit.BadInput, match=re.escape(f"chunk_bytes: expected an integer, got {chunk!r}")):
                call(chunk)
        with pytest.raises(refit.BadInput, match="chunk_bytes: 0 bytes is not positive"):
            call(0)


def test_a_sweep_point_that_is_not_one_names_the_field() -> None:
    # {"values": 5} raised std::bad_cast, {} a KeyError.
    predict_point = sys.modules["refit.sweep"].predict_point
    cases = [
        ({}, "point: no 'values'"),
        ({"values": 5}, "point: no 'problem'"),
        ({"values": 5, "problem": {}, "cluster": {}}, "point['values']: expected a list of (key, value) pairs"),
        ({"values": [], "problem": [], "cluster": {}}, "point['problem']: expected a dict, got list"),
        ({"values": [], "problem": {"train": 3}, "cluster": {}}, "point['problem']['train']: expected a str, got int"),
        ({"values": [], "problem": {"manifest": 3}, "cluster": {}}, "point['problem']['manifest']: expected a path"),
        ({"values": [], "problem": {}, "cluster": {"discover": "yes"}},
         "point['cluster']['discover']: expected a bool"),
        ([("values", [])], "point: expected a mapping"),
    ]  # fmt: skip
    for point, message in cases:
        with pytest.raises(refit.BadInput, match=re.escape(message)):
            predict_point(point, 4096, None)


def test_integers_beyond_what_refit_takes_name_the_argument_and_its_range() -> None:
    # Each was nanobind's "incompatible function arguments" with a list of signatures.
    problem = refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2,engines=2")
    cpu = refit.Cluster.preset("cpu-host")
    plan = refit.plan(problem, cpu)
    one = refit.exchange.from_callable(lambda d: [d], rank=0, size=1)
    cases: list[tuple[Callable[[], Any], str]] = [
        (lambda: refit.simulate(problem, cpu, window=2**31), "window: 2147483648 is more than 2147483647"),
        (lambda: refit.simulate(problem, cpu, staging_bytes=2**63),
         "staging_bytes: 9223372036854775808 bytes is more than 9223372036854775807 bytes"),
        (lambda: refit.Executor("ucx", one, staging=2**70), "staging: 1180591620717411303424 bytes is more than"),
        (lambda: problem.shards(2**31), "rank 2147483648 is not in the problem's 6 ranks"),
        (lambda: problem.parameters(-1), "rank -1 is not in the problem's 6 ranks"),
        (lambda: plan.explain(2**31), "rank 2147483648 is not in the plan's 6 ranks"),
        (lambda: refit.simulate_elastic(problem, cpu, members=[0, 2**31]), "members[1]: 2147483648 is more than"),
        (lambda: refit.simulate_elastic(problem, cpu, join=2**31), "join: 2147483648 is more than"),
        (lambda: refit.sweep(problem, cpu, {"copy_gbps": [100]}, jobs=2**40), "jobs: 1099511627776 is more than"),
        (lambda: refit.Executor("ucx", one, comm_rank_of=[2**31]), "comm_rank_of[0]: 2147483648 is more than"),
    ]  # fmt: skip
    for call, message in cases:
        with pytest.raises(refit.BadInput, match=re.escape(message)):
            call()


def test_layouts_rank_counts_are_checked_before_the_manifest_is_made() -> None:
    # nan for source_ranks was "manifest: not valid JSON ...", naming neither.
    side = refit.Layout((1,), ("R",))
    tensors = [refit.TensorLayout("w", (8,), "fp32", side, side)]
    for keyword, value, message in [("source_ranks", math.nan, "expected an integer, got nan"),
                                    ("destination_ranks", "2", "expected an integer, got '2'"),
                                    ("source_ranks", True, "expected an integer, got True"),
                                    ("destination_ranks", 0, "0 is not positive")]:  # fmt: skip
        counts: dict[str, Any] = {"source_ranks": 1, "destination_ranks": 1, keyword: value}
        with pytest.raises(refit.BadInput, match=re.escape(f"{keyword}: {message}")):
            refit.Problem.from_layouts(tensors, **counts)
    with pytest.raises(TypeError, match="tensors: expected a list of refit.TensorLayout, got TensorLayout"):
        refit.Problem.from_layouts(tensors[0], source_ranks=1, destination_ranks=1)  # type: ignore[arg-type]


def test_flags_and_counts_of_the_wrong_kind_are_refused() -> None:
    # delta="yes" made a delta executor, join=True asked about engine 1, and a hand-made shard of
    # extent (-2, -2) failed in numpy's reshape.
    problem = refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2,engines=2")
    cpu = refit.Cluster.preset("cpu-host")
    one = refit.exchange.from_callable(lambda d: [d], rank=0, size=1)
    with pytest.raises(refit.BadInput, match="delta: expected True or False, got 'yes'"):
        refit.Executor("ucx", one, delta="yes")  # type: ignore[arg-type]
    with pytest.raises(refit.BadInput, match="direct_stores: expected True or False, got 'no'"):
        refit.Executor("ucx", one, direct_stores="no")  # type: ignore[arg-type]
    for keyword in ("join", "fail"):
        with pytest.raises(refit.BadInput, match=f"{keyword}: expected an integer, got True"):
            refit.simulate_elastic(problem, cpu, **{keyword: True})
    shard = refit.Shard("w", "fp32", (2, 2), (0, 0), (-2, -2))
    with pytest.raises(refit.BadInput, match=re.escape("shard 'w': extent (-2, -2) is not a box's")):
        refit.Executor("ucx", one).empty(shard)


def test_an_empty_name_is_refused_as_the_command_refuses_it() -> None:
    """``dtype=""``, ``quantize=""`` and ``deployment=""`` once meant the default (the compiled
    part reads "" so); ``refit simulate --dtype ''`` is refused as empty, and so are they."""
    for kwargs, what in (({"dtype": ""}, "dtype"), ({"quantize": ""}, "quantize")):
        with pytest.raises(refit.BadInput, match=f"{what}: is empty"):
            refit.Problem.from_model(TINY_MOE, train="tp=2,ep=2,etp=1", infer="tp=2", **kwargs)
    with pytest.raises(refit.BadInput, match="deployment: is empty"):
        refit.simulate(_tiny(), refit.Cluster.preset("cpu-host"), deployment="")


def test_is_training_refuses_a_rank_as_shards_refuses_it() -> None:
    """``is_training(-1)`` and ``is_training(2**40)`` once answered False, ``True`` and ``1.5``
    True, and ``"2"`` raised Python's TypeError from a comparison: a rank that is not one of the
    problem's is now refused with the message :meth:`Problem.shards` gives."""
    problem = _tiny(infer="tp=2,engines=2")  # 2 training ranks, 4 inference ranks
    assert [problem.is_training(rank) for rank in range(6)] == [True] * 2 + [False] * 4
    assert problem.is_training(np.int64(1)) and not problem.is_training(np.int32(2))
    cases: list[tuple[Any, str]] = [
        (-1, "rank -1 is not in the problem's 6 ranks"),
        (6, "rank 6 is not in the problem's 6 ranks"),
        (2**40, "rank 1099511627776 is not in the problem's 6 ranks"),
        (True, "rank: expected a plan rank (an int), got True"),
        (1.5, "rank: expected a plan rank (an int), got 1.5"),
        ("2", "rank: expected a plan rank (an int), got '2'"),
    ]
    for rank, message in cases:
        for ask in (problem.is_training, problem.shards):
            with pytest.raises(refit.BadInput, match=re.escape(message)):
                ask(rank)


def test_buffer_and_row_helpers_name_an_argument_of_the_wrong_kind() -> None:
    """``fp8_parameter_buffers([])`` was an AttributeError ('list' object has no attribute
    'items') and ``(None)`` a TypeError from ``dict()``; ``to_frame(None)`` and ``to_frame([1])``
    were pandas' or ``dict()``'s TypeError. Each now names the argument, as the figures do."""
    pytest.importorskip("pandas")
    none: Any = None
    buffers = "buffers (parameter names to buffers): expected a Mapping, got"
    row = "rows[0] (a sweep's row or a refit.Simulation): expected a Mapping, got"
    cases: list[tuple[Callable[[], Any], type, str]] = [
        (lambda: refit.fp8_parameter_buffers(none), TypeError, f"{buffers} NoneType"),
        (lambda: refit.fp8_parameter_buffers([]), TypeError, f"{buffers} list"),  # type: ignore[arg-type]
        (lambda: refit.fp8_parameter_buffers("w"), TypeError, f"{buffers} str"),  # type: ignore[arg-type]
        (lambda: refit.to_frame(none), refit.BadInput, "rows: a list of rows, got NoneType"),
        (lambda: refit.to_frame("rows"), refit.BadInput, "rows: a list of rows, not one string 'rows'"),
        (lambda: refit.to_frame([1]), TypeError, f"{row} int"),  # type: ignore[list-item]
        (lambda: refit.to_frame([{"a": 1}, none]), TypeError, row.replace("rows[0]", "rows[1]") + " NoneType"),
        (lambda: refit.to_frame({"a": 1}), TypeError, f"{row} str"),  # type: ignore[arg-type]
    ]  # fmt: skip
    for call, kind, message in cases:
        with pytest.raises(kind, match=re.escape(message)):
            call()
    # What they take is unchanged: a mapping passes as it is; rows and predictions make a frame.
    weights = np.zeros(4, np.float32)
    assert refit.fp8_parameter_buffers({"w": weights}) == {"w": weights}
    prediction = refit.simulate(_tiny(), refit.Cluster.preset("cpu-host"))
    frame = refit.to_frame([prediction, {"strategy": "x"}])
    assert list(frame["strategy"]) == ["refit", "x"]
