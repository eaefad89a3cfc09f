"""Numbers, flags and names as the compiled part takes them: checked here, naming the argument
and the range it takes, where the binding would refuse a value out of its C++ type's range with
a list of signatures, or take a bool for a number and a string for a list of names."""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Iterable, Optional

from refit._errors import BadInput

__all__ = [
    "INT32_MAX",
    "INT64_MAX",
    "checked_flag",
    "checked_int",
    "checked_ints",
    "checked_list",
    "checked_names",
    "checked_rank",
    "checked_real",
    "checked_seconds",
    "checked_text",
    "optional_callable",
    "optional_int",
    "optional_ints",
    "optional_name",
    "optional_text",
    "rank_problem",
]

#: The largest int32 (ranks, windows, engine indices, threads) and int64 (bytes).
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1


def checked_int(value: Any, what: str, low: int, high: int, unit: str = "") -> int:
    """``value`` as an int in [low, high], or BadInput naming ``what``. A bool is refused: True
    for a count is a mistake, not 1. ``unit`` follows the number in messages (" bytes")."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise BadInput(f"{what}: expected an integer, got {value!r}", "invalid argument")
    number = int(value)
    if number < low:
        below = {0: "is negative", 1: "is not positive"}.get(low, f"is less than {low}")
        raise BadInput(f"{what}: {number}{unit} {below}", "out of range")
    if number > high:
        raise BadInput(f"{what}: {number}{unit} is more than {high}{unit}, the most it takes", "out of range")
    return number


def optional_int(value: Any, what: str, low: int, high: int, unit: str = "") -> Optional[int]:
    """None, or ``value`` checked as :func:`checked_int` checks it."""
    return None if value is None else checked_int(value, what, low, high, unit)


def checked_list(values: Any, what: str, items: str) -> list[Any]:
    """``values`` as a list, refusing one string (which would be read letter by letter) and
    anything that is not a sequence."""
    if isinstance(values, (str, bytes)):
        raise BadInput(f"{what}: a list of {items}, not one string {values!r}", "invalid argument")
    if not isinstance(values, Iterable):
        raise BadInput(f"{what}: a list of {items}, got {type(values).__name__}", "invalid argument")
    return list(values)


def checked_ints(values: Any, what: str, low: int, high: int) -> list[int]:
    """A list of ints in [low, high], each refused naming its place (``members[2]``)."""
    items = checked_list(values, what, "integers")
    return [checked_int(v, f"{what}[{i}]", low, high) for i, v in enumerate(items)]


def optional_ints(values: Any, what: str, low: int, high: int) -> list[int]:
    """None (the default: an empty list, as the compiled part takes it) or a non-empty list of
    ints in [low, high]. An empty list is refused, as the refit command refuses ``--peers ''``:
    the compiled part would read it as the default, which is not what the caller wrote."""
    if values is None:
        return []
    checked = checked_ints(values, what, low, high)
    if not checked:
        raise BadInput(f"{what}: is empty (None for the default)", "invalid argument")
    return checked


def checked_names(values: Any, what: str, kind: str, known: list[str]) -> list[str]:
    """A list of names of a ``kind`` (``strategy``), each one of ``known``."""
    names = checked_list(values, what, f"{kind} names")
    for name in names:
        if not isinstance(name, str):
            raise BadInput(f"{what}: a {kind} name is a str, got {name!r}", "invalid argument")
        if name not in known:
            raise BadInput(f"{what}: unknown {kind} '{name}' (expected {', '.join(known)})", "not found")
    return names


def checked_flag(value: Any, what: str) -> bool:
    """A bool (or 0 and 1, which stand for one), refusing a string such as "yes": any non-empty
    string is true, "no" and "false" too."""
    if isinstance(value, bool) or (isinstance(value, numbers.Integral) and value in (0, 1)):
        return bool(value)
    raise BadInput(f"{what}: expected True or False, got {value!r}", "invalid argument")


def checked_text(value: Any, what: str) -> str:
    """``value`` as the str it must be, or BadInput naming ``what``: bytes and None are refused
    here, where the binding would answer with its list of signatures."""
    if not isinstance(value, str):
        raise BadInput(f"{what}: expected a str, got {value!r}", "invalid argument")
    if "\0" in value:
        raise BadInput(f"{what}: contains a NUL character (at {value.index(chr(0))})", "invalid argument")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate: the binding could not take it either
        raise BadInput(f"{what}: not valid Unicode text (character {e.start} is a lone surrogate)",
                       "invalid argument") from None
    return value


def optional_text(value: Any, what: str) -> Optional[str]:
    """None, or ``value`` checked as :func:`checked_text` checks it."""
    return None if value is None else checked_text(value, what)


def optional_name(value: Any, what: str) -> Optional[str]:
    """None (the default), or a non-empty str: the compiled part reads "" as the default, which is
    not what the caller wrote, and the refit command refuses ``--dtype ''`` as empty."""
    text = optional_text(value, what)
    if text == "":
        raise BadInput(f"{what}: is empty (None for the default)", "invalid argument")
    return text


def optional_callable(value: Any, what: str, arguments: str) -> Optional[Callable[..., Any]]:
    """None, or a callable that takes ``arguments`` (``"(done, total)"``), or TypeError naming
    ``what``: the binding would answer a number with its list of signatures, and Python code
    would fail only when it first calls it."""
    if value is not None and not callable(value):
        raise TypeError(f"{what}: a callable {arguments} or None, got {value!r}")
    return value


def rank_problem(rank: Any, world: int, whose: str) -> Optional[str]:
    """Why ``rank`` is not one of ``whose`` ``world`` ranks (``whose``: "the plan's"), or None."""
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        return f"rank: expected a plan rank (an int), got {rank!r}"
    if not 0 <= rank < world:
        return f"rank {int(rank)} is not in {whose} {world} ranks"
    return None


def checked_rank(rank: Any, world: int, whose: str) -> int:
    """``rank`` as one of ``whose`` ``world`` ranks, or BadInput saying why not."""
    problem = rank_problem(rank, world, whose)
    if problem is not None:
        raise BadInput(problem, "out of range")
    return int(rank)


def checked_real(
    value: Any, what: str, high: float, kind: str = "a number", unit: str = "", note: str = ""
) -> float:
    """A finite number (of ``kind``, as messages call it) in (0, high], or BadInput naming ``what``
    with ``unit`` after the number and ``note`` after the range. A bool is refused: True for a
    size is a mistake, not 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise BadInput(f"{what}: expected {kind}, got {value!r}", "invalid argument")
    number = float(value)
    if not (math.isfinite(number) and 0 < number <= high):
        raise BadInput(f"{what}: {number}{unit} is not in (0, {high:g}]{note}", "out of range")
    return number


def checked_seconds(value: Any, what: str, low: float, high: float) -> float:
    """A finite number of seconds in [low, high]: an infinite or a huge wait does not fit the
    clocks that time it (a deadline past 2^63 ns wraps), and one under ``low`` takes a live peer
    the scheduler set aside for an instant for gone."""
    days = f" (a wait of {high / 86400:.1f} days at most)"
    number = checked_real(value, what, high, "a number of seconds", " s", days)
    if number < low:
        raise BadInput(f"{what}: {number} s is under {low:g} s (milliseconds for seconds?)", "out of range")
    return number
