"""The guide's commands and Python snippets run, so that the documentation cannot drift from the
code: every ``sh`` and ``console`` command and every ``python`` block of docs/guide/, docs/index.md
and README.md that runs on a CPU (snippets.py says how a page marks one that does not), from a
scratch folder per page that sees the repository's tests/, examples/ and docs/, with this build's
refit command first on the PATH and this Python's ``python`` after it. A ``console`` command must
also print every line shown under it. The README stays a page a newcomer reads: at most 200 lines,
opening with the two commands."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from snippets import RUNNABLE, Block, blocks, missing_output

ROOT = Path(os.environ.get("REFIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
PAGES = sorted((ROOT / "docs" / "guide").glob("*.md")) + [ROOT / "docs" / "index.md", ROOT / "README.md"]
# What a page's commands see of the repository, by the paths the guide names.
SHARED = ("tests", "examples", "docs", "bench")
COMMAND_TIMEOUT_S = 600
README_MAX_LINES = 200

ALL_BLOCKS = [b for page in PAGES for b in blocks(page)]
# The README opens with ./run and ./test, which install and build: checked below, not run.
OPENING = blocks(ROOT / "README.md")[0]
RUN = [b for b in ALL_BLOCKS if b.language in RUNNABLE and b.not_run is None and b != OPENING]
# Pages whose commands start processes (mpirun, torchrun): all their blocks are marked `processes`,
# since a page's blocks share a folder and run in order; ctest runs them one job at a time with
# the other multi-process tests (tests/docs/CMakeLists.txt).
PROCESS_PAGES = {b.page for b in RUN if re.search(r"\b(mpirun|torchrun)\b", b.text)}
CHECKED = [b for b in ALL_BLOCKS if b.check is not None]


def cli() -> Path:
    """The refit command under test (ctest passes this build's)."""
    given = os.environ.get("REFIT_CLI")
    path = Path(given) if given else ROOT / "build" / "release" / "cli" / "refit"
    if not path.exists():
        pytest.skip("the refit command is not built (REFIT_CLI)")
    return path


def environment() -> dict[str, str]:
    """The commands' environment: refit and this Python first on the PATH; mpirun as root, on
    this machine's shared memory and loopback, trusting a finalised rank's exit code (as
    REFIT_MPI_TEST_ENV in tests/CMakeLists.txt); matplotlib without a display."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(cli().parent), str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("UCX_TLS", "self,sm,tcp")
    env.setdefault("MPLBACKEND", "Agg")
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_orte_allowed_exit_without_sync="1")  # fmt: skip
    return env


@pytest.fixture(scope="session")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One scratch folder per page, which sees the repository's shared folders; a page's blocks
    run in order in it, so a later block finds the files an earlier one wrote."""
    folders: dict[Path, Path] = {}

    def folder(page: Path) -> Path:
        if page not in folders:
            made = tmp_path_factory.mktemp(page.stem)
            for name in SHARED:
                (made / name).symlink_to(ROOT / name)
            folders[page] = made
        return folders[page]

    return folder


# The Python blocks of one page share a namespace, in page order, as a reader runs them.
NAMESPACES: dict[Path, dict[str, Any]] = {}


def run_command(command: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=environment(),
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)  # fmt: skip


def marked(block: Block) -> Any:
    """The block as a test parameter, marked `processes` when its page starts processes."""
    return pytest.param(block, marks=pytest.mark.processes) if block.page in PROCESS_PAGES else block


@pytest.mark.parametrize("block", [marked(b) for b in RUN], ids=[b.name for b in RUN])
def test_snippet_runs(block: Block, scratch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cwd = scratch(block.page)
    if block.language == "python":
        monkeypatch.chdir(cwd)
        for key, value in environment().items():
            monkeypatch.setenv(key, value)
        namespace = NAMESPACES.setdefault(block.page, {"__name__": "__guide__"})
        exec(compile(block.text, block.name, "exec"), namespace)
        return
    for command in block.commands:
        done = run_command(command.text, cwd)
        printed = done.stdout + done.stderr
        assert done.returncode == 0, f"{block.name}: `{command.text}` exited {done.returncode}:\n{printed[-4000:]}"
        missing = missing_output(command.shown, printed)
        assert not missing, f"{block.name}: `{command.text}` no longer prints:\n" + "\n".join(missing) + f"\n\nit printed:\n{printed[-4000:]}"


@pytest.mark.parametrize("block", CHECKED, ids=[b.name for b in CHECKED])
def test_example_file_is_valid(block: Block, tmp_path: Path) -> None:
    """A JSON example marked `check: FORMAT` follows the format's schema and refit reads it."""
    schema = json.loads((ROOT / "docs" / "schemas" / f"{block.check}.schema.json").read_text())
    example = json.loads(block.text)
    jsonschema.validate(example, schema)
    path = tmp_path / f"example.{block.check}.json"
    path.write_text(block.text)
    reads = {"cluster": ["topo", "--cluster-file", str(path)],
             "manifest": ["plan", "--manifest", str(path), "--cluster", "cpu-host"]}  # fmt: skip
    done = subprocess.run([str(cli()), *reads[block.check]], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{block.name}: refit refuses the example: {done.stderr}"


def test_every_skipped_block_says_why() -> None:
    skipped = [b for b in ALL_BLOCKS if b.language in RUNNABLE and b.not_run is not None]
    assert all(b.not_run for b in skipped)
    print("\nnot run:\n" + "\n".join(f"  {b.name}: {b.not_run}" for b in skipped))


def test_readme_is_short_and_opens_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= README_MAX_LINES, f"README.md has {len(readme)} lines, more than {README_MAX_LINES}"
    assert [c.text.split()[0] for c in OPENING.commands] == ["./run", "./test"], OPENING.text


def test_readme_links_reach_their_files_and_headings() -> None:
    """The README is not a page of the site, whose build checks every other link: its links to
    files must reach them, and a link to a heading of a page must name one (GitHub's anchors,
    as the site makes them: myst_heading_anchors)."""
    from myst_parser.slugs import github_slugify

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", readme):
        if re.match(r"^[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        file = ROOT / path
        if not file.exists():
            broken.append(f"{target}: no file {path}")
            continue
        if anchor:
            headings = re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), flags=re.M)
            if anchor not in {github_slugify(h) for h in headings}:
                broken.append(f"{target}: no heading '{anchor}' in {path}")
    assert not broken, "README.md links that lead nowhere:\n" + "\n".join(broken)
