"""The code blocks of the guide's Markdown pages, as the docs tests run them.

A fenced block's language says what it is: ``sh`` (every line a command), ``console`` (``$ ``
lines are commands, the lines under one what it prints) and ``python`` run; ``text``, ``json``,
``cpp``, ``cmake`` and the rest are shown only. The line right above a fence may say more:
``<!-- not run: why -->`` keeps a runnable block from running (a GPU, a build, an hour-long
campaign), and ``<!-- check: FORMAT -->`` has a ``json`` block validated against
``docs/schemas/FORMAT.schema.json`` and read by refit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

RUNNABLE = ("sh", "console", "python")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,})(?P<info>[^`]*)$")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>not run|check):\s*(?P<text>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Command:
    """A command of a ``sh`` or ``console`` block, and for ``console`` the output shown under it."""

    text: str
    shown: tuple[str, ...] = ()


@dataclass(frozen=True)
class Block:
    """A fenced code block of a page: where it is, its language, its text and its marker."""

    page: Path
    line: int  # of the opening fence, from 1
    language: str
    text: str
    not_run: Optional[str] = None  # why it does not run
    check: Optional[str] = None  # the schema a json block is checked against
    commands: tuple[Command, ...] = field(default=())

    @property
    def name(self) -> str:
        """How a test names it: ``guide/predicting.md:42``."""
        return f"{self.page.parent.name}/{self.page.name}:{self.line}"


def _dedent(lines: list[str], indent: str) -> list[str]:
    """The block's lines without the fence's indentation (a block inside a list item)."""
    return [line[len(indent) :] if line.startswith(indent) else line.lstrip() for line in lines]


def _joined(lines: list[str]) -> list[tuple[str, int]]:
    """Lines with backslash continuations joined, each with the index of its first line."""
    out: list[tuple[str, int]] = []
    pending: Optional[tuple[str, int]] = None
    for i, line in enumerate(lines):
        if pending is not None:
            line = pending[0] + " " + line.strip()
            start = pending[1]
        else:
            start = i
        if line.endswith("\\"):
            pending = (line[:-1].rstrip(), start)
            continue
        pending = None
        out.append((line, start))
    if pending is not None:
        out.append(pending)
    return out


def sh_commands(text: str) -> tuple[Command, ...]:
    """Every command of a ``sh`` block: its non-blank lines that are not comments alone."""
    lines = [line for line, _ in _joined(text.splitlines())]
    return tuple(Command(line.strip()) for line in lines if line.strip() and not line.lstrip().startswith("#"))


def console_commands(text: str) -> tuple[Command, ...]:
    """Every ``$ `` command of a ``console`` block with the output lines shown under it."""
    commands: list[Command] = []
    command: Optional[str] = None
    shown: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            if command is not None:
                commands.append(Command(command, tuple(shown)))
            joined = line[2:]
            while joined.endswith("\\") and i + 1 < len(lines):
                i += 1
                joined = joined[:-1].rstrip() + " " + lines[i].strip()
            command, shown = joined, []
        elif command is not None:
            shown.append(line)
        i += 1
    if command is not None:
        commands.append(Command(command, tuple(shown)))
    return tuple(commands)


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = opening.group("indent"), opening.group("fence")
        language = opening.group("info").strip().split(" ")[0]
        end = i + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        if language.startswith("{"):  # a directive (literalinclude, toctree, eval-rst)
            i = end + 1
            continue
        text = "\n".join(_dedent(lines[i + 1 : end], indent))
        marker = MARKER.match(lines[i - 1]) if i > 0 else None
        kind = marker.group("kind") if marker else None
        block = Block(
            page=page,
            line=i + 1,
            language=language,
            text=text,
            not_run=marker.group("text") if kind == "not run" else None,
            check=marker.group("text") if kind == "check" else None,
            commands=sh_commands(text) if language == "sh" else console_commands(text) if language == "console" else (),
        )
        out.append(block)
        i = end + 1
    return out


def normalized(line: str) -> str:
    """A line with its runs of white space made one space, for comparing output."""
    return " ".join(line.split())


def missing_output(shown: tuple[str, ...], printed: str) -> list[str]:
    """The lines shown under a command that it did not print; a line holding ``...`` stands for
    output left out and is not compared."""
    printed_lines = {normalized(line) for line in printed.splitlines()}
    return [
        line for line in shown if line.strip() and "..." not in line and "…" not in line and normalized(line) not in printed_lines
    ]
