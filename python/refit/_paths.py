"""Paths and JSON as the compiled part takes them: checked here, where Python can say what is
wrong, instead of being cut short or failing deep inside."""

from __future__ import annotations

import json
import math
import os
from typing import Any, Iterable, Mapping, Optional, Union

from refit import _refit
from refit._errors import BadInput

__all__ = ["FilePath", "json_text", "output_file", "path_text"]

#: What names a file: text, the bytes of a name, or a path object (``pathlib.Path``, any
#: ``os.PathLike``).
FilePath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


def path_text(path: FilePath, what: str) -> str:
    """``path`` as text, as ``os.fsdecode`` spells it: a name that is not UTF-8 keeps its bytes
    surrogate-escaped, which the compiled part turns back into them. A NUL byte is refused, as
    ``open()`` refuses it: the compiled part would read the path only up to it, and so open
    another file; so is an empty path."""
    try:
        text = os.fspath(path)
    except TypeError:
        raise TypeError(f"{what}: expected a path, got {type(path).__name__}") from None
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not isinstance(text, str):
        raise TypeError(f"{what}: expected a path, got {type(path).__name__}")
    if "\0" in text:
        raise BadInput(f"{what}: embedded null byte in path {text!r}", "invalid argument")
    if not text:
        raise BadInput(f"{what}: an empty path", "invalid argument")
    return text


def output_file(path: FilePath, what: str) -> _refit.OutputFile:
    """``path`` created (or truncated) for writing, as ``Plan.save`` and ``refit simulate
    --trace`` open the files they write: a folder, a device, a FIFO that no process reads or a
    folder that does not exist is refused now, naming ``what``, before the work whose result the
    file will hold. ``.write(data)`` writes its bytes once and closes it."""
    return _refit.OutputFile(path_text(path, what), what)


def _plain(value: Any) -> Any:
    """What JSON has no type for, as the JSON value it stands for: numpy integers and floats,
    and mappings that are not dicts."""
    if isinstance(value, Mapping):
        return dict(value)
    if hasattr(value, "__index__"):
        return int(value)
    if hasattr(value, "__float__"):
        return float(value)
    raise TypeError(f"a {type(value).__name__} is not a JSON value")


#: Where json.dumps stopped: a JSON path, and the nan or infinity there (None: a loop).
_Stop = tuple[str, Optional[float]]


def _not_json(value: Any, path: str, open_: frozenset[int] = frozenset()) -> Optional[_Stop]:
    """Where ``json.dumps`` stopped on ``value``, in the order it writes it: the JSON path
    (``tensors[0].shape[0]``) and the number of the first nan or infinity, or the path and None
    for a structure met again inside itself (``open_``: the ids of those being walked); None
    when there is neither."""
    items: Iterable[tuple[str, Any]]
    if isinstance(value, Mapping):
        items = ((f"{path}.{key}" if path else str(key), item) for key, item in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{path}[{i}]", item) for i, item in enumerate(value))
    elif hasattr(value, "__index__") or not hasattr(value, "__float__"):
        return None  # an integer, text, or what json.dumps refuses by its type
    else:
        number = float(value)
        return None if math.isfinite(number) else (path, number)
    if id(value) in open_:
        return (path, None)
    inside = open_ | {id(value)}
    for where, item in items:
        found = _not_json(item, where, inside)
        if found is not None:
            return found
    return None


def json_text(value: Any, what: str) -> str:
    """``value`` (a manifest built in Python) as JSON text for the compiled parser, or BadInput
    saying why it is not JSON: a nan or an infinity (named by its path, as the compiled part
    names a number that is no integer: a manifest's numbers are all integers), a value JSON has
    no type for, a structure that contains itself, or nesting too deep to walk."""
    try:
        return json.dumps(value, default=_plain, allow_nan=False)
    except TypeError as e:
        raise BadInput(f"{what}: {e}", "invalid argument") from None
    except ValueError as e:  # a circular reference, or a nan or an infinity
        path, number = _not_json(value, "") or ("", None)
        if number is not None:
            raise BadInput(f"{path}: expected an integer, got {number}", "invalid argument") from None
        raise BadInput(f"{what}: {e} (the manifest contains itself)", "invalid argument") from None
    except RecursionError:
        raise BadInput(f"{what}: nested too deep to read", "invalid argument") from None
