"""Memory claims: which memory each live prepared plan of this process reads or writes, so that
ranks run as threads of one process never share memory one of them writes (see _CLAIMS)."""

from __future__ import annotations

import contextlib
import itertools
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Optional

from refit import _refit
from refit._errors import raised

__all__ = ["Claim", "claiming", "claims_of", "memory", "release"]


def memory(buffer: Any) -> Optional[tuple[int, int]]:
    """(address, bytes) of a torch tensor's or numpy array's memory; None for other arrays."""
    if hasattr(buffer, "data_ptr") and hasattr(buffer, "untyped_storage"):
        return int(buffer.data_ptr()), int(buffer.nbytes)
    interface = getattr(buffer, "__array_interface__", None)
    if isinstance(interface, dict):
        return int(interface["data"][0]), int(buffer.nbytes)
    return None


@dataclass(frozen=True)
class Claim:
    """Memory a rank prepared: [start, end), whether the rank writes it (an inference rank), and
    the token of the thread that prepared it (:func:`_thread_token`)."""

    rank: int
    start: int
    end: int
    written: bool
    thread: int


@dataclass(frozen=True)
class _Held:
    """The claims of one prepare, and (weakly) the executor it prepared on."""

    executor: "weakref.ref[object]"
    claims: list[Claim]


# The memory this process's prepared plans use, by the token of each prepare; a claim lives as
# long as the Prepared it was made for (weakref.finalize), or until its prepare raised. Ranks run
# as threads of one process may not share memory one of them writes while both plans live: the
# writer's bytes would land in the other's buffers, or under what it sends, silently. A prepare
# claims its memory, waits until every rank of the prepare has entered it (a barrier: a rank's plan
# of the step before, dropped before it prepares again, is gone by then), then compares its claims
# with every other live one, and the refusal goes through the collective prepare. Two live plans
# prepared by one thread (or on one executor, which runs one execution at a time) are one
# process's plans run in turn (a peer engine's weights, which its refit writes and a join then
# sends from), which may share memory. The lock is re-entrant: a finalizer may run inside it.
_CLAIMS: dict[int, _Held] = {}
_LOCK = threading.RLock()
_TOKENS = itertools.count(1)
_THREAD = threading.local()


def _thread_token() -> int:
    """This thread's token: unlike ``threading.get_ident()``, which Python gives a new thread once
    another ended, never another thread's."""
    token: Optional[int] = getattr(_THREAD, "token", None)
    if token is None:
        token = _THREAD.token = next(_TOKENS)
    return token


def release(token: int) -> None:
    """Gives up the claims of the prepare with ``token`` (its Prepared is gone, or it raised)."""
    with _LOCK:
        _CLAIMS.pop(token, None)


#: No memory lies in an address space's first page (the compiled part's): a buffer whose bytes
#: start there has none (a torch storage freed with ``untyped_storage().resize_(0)``, a DTensor, a
#: FakeTensor), which the compiled part refuses naming it; it claims nothing.
_FIRST_PAGE: int = _refit.FIRST_PAGE_BYTES


def claims_of(rank: int, written: bool, buffers: Mapping[str, Any]) -> tuple[list[Claim], str]:
    """This rank's claims on the memory of `buffers` (arrays whose memory Python can see), and
    why a buffer's memory cannot be read ("" when every one's can): a torch sparse tensor has no
    data pointer, an object may claim an ``__array_interface__`` it does not have."""
    thread = _thread_token()
    claims = []
    for name, buffer in buffers.items():
        try:
            span = memory(buffer)
        except Exception as e:  # noqa: BLE001 - whatever it raised, this rank refuses with it, agreed by all
            return [], f"buffer '{name}': its memory cannot be read ({raised(e)})"
        if span is not None and span[1] > 0 and span[0] >= _FIRST_PAGE:  # below: no memory, refused
            claims.append(Claim(rank, span[0], span[0] + span[1], written, thread))
    return claims, ""


def _conflict(owner: object, mine: list[Claim]) -> str:
    """What a claim of a live plan prepared on another executor shares with `mine` where either
    writes, or ""; the caller holds _LOCK."""
    for held in list(_CLAIMS.values()):
        if held.executor() is owner:
            continue
        for a in mine:
            for b in held.claims:
                if a.thread != b.thread and a.start < b.end and b.start < a.end and (a.written or b.written):
                    return (
                        f"a buffer it {'writes' if a.written else 'reads'} shares memory with one that rank "
                        f"{b.rank} (prepared in this process) {'writes' if b.written else 'reads'}: ranks "
                        f"must not share memory one of them writes (pass separate arrays)"
                    )
    return ""


@contextlib.contextmanager
def claiming(owner: object, claims: list[Claim], barrier: Callable[[], None]) -> Iterator[tuple[str, int]]:
    """Claims memory for the prepare inside the block on executor `owner`, giving what it shares
    with a live plan of another executor once every rank has entered the prepare (`barrier`,
    collective), as a refusal ("" when nothing), and the token the block's Prepared holds the
    claims by; a prepare that raises gives them up."""
    token = next(_TOKENS)
    with _LOCK:
        _CLAIMS[token] = _Held(weakref.ref(owner), claims)
    try:
        barrier()
        with _LOCK:
            shared = _conflict(owner, claims)
        yield shared, token
    except BaseException:
        release(token)
        raise
