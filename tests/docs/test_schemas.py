"""The JSON schemas of docs/schemas/ and refit's parsers agree, so that neither drifts:

- every cluster file and manifest of tests/data that refit reads, every plan of tests/data, and
  every file the command writes (clusters from presets and NCCL dumps, manifests of versions 1
  and 2 with and without FP8, plans of every strategy and a landing plan with its quantize steps)
  validates against its schema;
- on such files, a field the schema requires, taken out, is refused by the parser as missing, and
  one it does not require, taken out, is not; an unknown field added anywhere is refused by both.

The parser is the refit command (REFIT_CLI): `refit topo --cluster-file`, `refit plan --manifest`
and `refit simulate --plan`, which name the JSON path of what they refuse."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Iterator, Optional

import jsonschema
import pytest

ROOT = Path(os.environ.get("REFIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
DATA = ROOT / "tests" / "data"
SCHEMAS = ROOT / "docs" / "schemas"
TINY_MOE = str(DATA / "models" / "tiny-qwen3-moe.json")
SMALL_MOE = str(DATA / "models" / "small-qwen3-moe-blocks.json")
# The tiny model's problem of the plans below (and of tests/data/plans/tiny_moe_refit.json).
TINY_PROBLEM = ["--model", TINY_MOE, "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2,dp=2"]
UNKNOWN = "unknown_field_of_no_format"


def schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def cli(*args: str) -> subprocess.CompletedProcess:
    given = os.environ.get("REFIT_CLI")
    path = Path(given) if given else ROOT / "build" / "release" / "cli" / "refit"
    if not path.exists():
        pytest.skip("the refit command is not built (REFIT_CLI)")
    return subprocess.run([str(path), *args], capture_output=True, text=True, timeout=300)


def written(tmp: Path, name: str, *args: str) -> Path:
    """A file the command writes with these arguments (`{out}` stands for its path)."""
    path = tmp / name
    done = cli(*[a.replace("{out}", str(path)) for a in args])
    assert done.returncode == 0, done.stderr
    if not path.exists():
        path.write_text(done.stdout)
    return path


# How the parser of each format is asked about a file: the refusal's message, or None.
def parse_cluster(path: Path) -> Optional[str]:
    done = cli("topo", "--cluster-file", str(path))
    return None if done.returncode == 0 else done.stderr


def parse_manifest(path: Path) -> Optional[str]:
    done = cli("plan", "--manifest", str(path), "--cluster", "cpu-host")
    return None if done.returncode == 0 else done.stderr


def parse_plan(path: Path) -> Optional[str]:
    done = cli("simulate", *TINY_PROBLEM, "--cluster", "cpu-host", "--plan", str(path))
    return None if done.returncode == 0 else done.stderr


PARSERS = {"cluster": parse_cluster, "manifest": parse_manifest, "plan": parse_plan}


@pytest.fixture(scope="module")
def instances(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    """Files of each format that refit reads: from tests/data, and written by the command."""
    tmp = tmp_path_factory.mktemp("written")
    tiny = [TINY_MOE, "--train", "tp=2,ep=2,etp=1", "--infer", "tp=2,dp=2"]
    clusters = [
        written(tmp, "preset.json", "topo", "--cluster", "dgx-h100", "--train-ranks", "16", "--infer-ranks", "16", "--json"),
        written(tmp, "gb200.json", "topo", "--cluster", "gb200-nvl72:gpus_per_domain=64,oversubscription=2", "--json"),
        written(tmp, "nccl.json", "topo", "--nccl-topo-xml", str(DATA / "topology" / "node_storage_nics.xml"), "--json"),
    ]
    manifests = [
        written(tmp, "v1.json", "models", *tiny, "--write-manifest", "{out}"),
        written(tmp, "v2.json", "models", *tiny, "--storage", "--write-manifest", "{out}"),
        written(tmp, "fp8.json", "models", SMALL_MOE, "--train", "tp=2,ep=2,etp=2", "--infer", "tp=4", "--quantize", "mxfp8",
                "--write-manifest", "{out}"),
    ]
    plans = [
        written(tmp, f"{s}.plan.json", "plan", *TINY_PROBLEM, "--cluster", "cpu-host", "--strategy", s, "--out", "{out}")
        for s in ("refit", "direct", "m2n-ring", "gather-broadcast")
    ]
    data_clusters = [p for p in sorted((DATA / "topology").glob("*.json")) if parse_cluster(p) is None]
    data_manifests = [p for p in sorted((DATA / "manifests").glob("*.json")) if parse_manifest(p) is None]
    assert data_clusters and data_manifests
    return {"cluster": data_clusters + clusters, "manifest": data_manifests + manifests,
            "plan": sorted((DATA / "plans").glob("*.json")) + plans}  # fmt: skip


@pytest.mark.parametrize("name", ["cluster", "manifest", "plan"])
def test_schema_is_a_valid_json_schema(name: str) -> None:
    jsonschema.Draft202012Validator.check_schema(schema(name))


@pytest.mark.parametrize("name", ["cluster", "manifest", "plan"])
def test_every_file_refit_reads_or_writes_follows_its_schema(name: str, instances: dict[str, list[Path]]) -> None:
    validator = jsonschema.Draft202012Validator(schema(name))
    for path in instances[name]:
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(json.loads(path.read_text()))]
        assert not errors, f"{path.name} does not follow {name}.schema.json:\n" + "\n".join(errors[:10])


def objects(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, dict]]:
    """Every object of a JSON value with its path; of an array only the first element (the
    others have the same fields)."""
    if isinstance(value, dict):
        yield path, value
        for key, child in value.items():
            yield from objects(child, path + (key,))
    elif isinstance(value, list) and value:
        yield from objects(value[0], path + (0,))


def at(value: Any, path: tuple) -> Any:
    for step in path:
        value = value[step]
    return value


# The small files the mutations are made on: one of each shape of every format.
MUTATED = {"cluster": ["cluster_small.json", "gb200.json"], "manifest": ["quantized_at_sender.json", "v2.json"],
           "plan": ["refit.plan.json"]}  # fmt: skip


@pytest.mark.parametrize("name", ["cluster", "manifest", "plan"])
def test_schema_and_parser_agree_on_required_and_unknown_fields(name: str, instances: dict[str, list[Path]],
                                                                tmp_path: Path) -> None:  # fmt: skip
    validator = jsonschema.Draft202012Validator(schema(name))
    parse = PARSERS[name]
    disagreements: list[str] = []
    for path in (p for p in instances[name] if p.name in MUTATED[name]):
        original = json.loads(path.read_text())
        assert parse(path) is None, f"refit refuses {path}"
        for where, obj in list(objects(original)):
            spelled = ".".join(map(str, where)) or "(root)"
            for key in list(obj) + [UNKNOWN]:
                mutated = copy.deepcopy(original)
                target = at(mutated, where)
                if key == UNKNOWN:
                    target[UNKNOWN] = 1
                else:
                    del target[key]
                file = tmp_path / f"mutated-{path.name}"
                file.write_text(json.dumps(mutated))
                schema_ok = validator.is_valid(mutated)
                refusal = parse(file)
                if key == UNKNOWN:
                    if schema_ok or refusal is None or "unknown field" not in refusal:
                        disagreements.append(f"{path.name}: an unknown field in {spelled}: schema "
                                             f"{'accepts' if schema_ok else 'refuses'}, refit says {refusal!r}")  # fmt: skip
                    continue
                says_missing = refusal is not None and f"{key}: missing" in refusal
                if schema_ok == says_missing:
                    disagreements.append(f"{path.name}: without {spelled}.{key}: schema "
                                         f"{'accepts' if schema_ok else 'refuses'}, refit says {refusal!r}")  # fmt: skip
    assert not disagreements, "\n".join(disagreements)
