"""Doxygen's INPUT_FILTER for refit's public headers (docs/Doxyfile).

The headers follow the house style: plain ``//`` comments above a declaration, or after it on the
same line, and a block after ``#pragma once`` that says what the file holds. Doxygen reads only
its own comment markers, so this filter hands it each header with those comments marked as
documentation (``///``, ``///<`` and ``@file``), line for line, without changing the sources.
"""

from __future__ import annotations

import re
import sys

WHOLE_LINE = re.compile(r"^(\s*)//(?!/)\s?(.*)$")
# Code, then a comment after it: the comment documents that declaration (a member, an enumerator).
TRAILING = re.compile(r"^(\s*[^\s/#}].*?\S)(\s+)//(?!/)\s?(.*)$")


def trailing_column(line: str) -> int | None:
    """The column of the ``//`` of a comment that follows code on `line`, if any."""
    match = TRAILING.match(line)
    return len(match.group(1)) + len(match.group(2)) if match else None


def filtered(lines: list[str]) -> list[str]:
    """`lines` of a header with its comments turned into Doxygen's, one output line per input line."""
    out: list[str] = []
    in_file_comment = False
    previous_trailing: int | None = None
    for line in lines:
        whole = WHOLE_LINE.match(line)
        if line.startswith("#pragma once"):
            # The block that follows says what the file holds; Doxygen needs no include guard.
            out.append("/// @file")
            in_file_comment = True
            continue
        if in_file_comment and whole:
            out.append("/// " + whole.group(2))
            continue
        in_file_comment = False
        if whole and previous_trailing is not None and len(whole.group(1)) == previous_trailing:
            out.append(f"{whole.group(1)}///< {whole.group(2)}")
            continue
        previous_trailing = None
        if whole:
            out.append(f"{whole.group(1)}/// {whole.group(2)}")
            continue
        match = TRAILING.match(line)
        if match and not line.lstrip().startswith("#"):
            previous_trailing = trailing_column(line)
            out.append(f"{match.group(1)}{match.group(2)}///< {match.group(3)}")
            continue
        out.append(line)
    return out


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as header:
        lines = header.read().splitlines()
    sys.stdout.write("\n".join(filtered(lines)) + "\n")


if __name__ == "__main__":
    main()
