"""Exceptions raised by refit.

Every error refit reports carries a *code* (the kind of failure) and a message that names the
offending input, exactly as the ``refit`` command prints it after ``refit <command>: error:``.
Bad input (the command's exit code 2) is a :class:`BadInput`, which is a :class:`ValueError`;
failures at run time are a :class:`Failure` (a :class:`RuntimeError`), a bounded wait that ran
out a :class:`Timeout` (also a :class:`TimeoutError`), and a peer that died or failed a
:class:`PeerFailed`.
"""

from __future__ import annotations

__all__ = ["BadInput", "Error", "Failure", "PeerFailed", "Timeout", "make_error"]

#: The codes of bad input, as refit names them.
BAD_INPUT_CODES = frozenset(
    {"invalid argument", "parse", "out of range", "not found", "mismatch", "unsupported"}
)


class Error(Exception):
    """An error refit reported: ``code`` says what kind, the message names the input."""

    code: str

    def __init__(self, message: str, code: str = "runtime") -> None:
        super().__init__(message)
        self.code = code

    @property
    def message(self) -> str:
        """The message, as the refit command prints it."""
        return str(self.args[0]) if self.args else ""


class BadInput(Error, ValueError):
    """Input refit refuses: an unknown name, a malformed file, sizes that do not fit."""


class Failure(Error, RuntimeError):
    """A failure while running: I/O, a transport, a device, or a bug in refit (code 'internal')."""


class Timeout(Failure, TimeoutError):
    """A bounded wait ran out (ExecutorOptions timeout)."""


class PeerFailed(Failure):
    """Another process of the refit died or failed; the message names it."""


def make_error(code: str, message: str) -> Error:
    """The exception for an error code as refit names it ('invalid argument', 'timeout', ...)."""
    if code in BAD_INPUT_CODES:
        return BadInput(message, code)
    if code == "timeout":
        return Timeout(message, code)
    if code == "peer failed":
        return PeerFailed(message, code)
    return Failure(message, code)


def raised(e: BaseException) -> str:
    """An exception in one line, for a refusal: "TypeName: message"."""
    return f"{type(e).__name__}: {e}"
