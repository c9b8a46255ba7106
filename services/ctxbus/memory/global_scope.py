"""Writing to the global scope needs an explicit flag (pure).

Every project reads ``__global__``: an item written there shapes every project's context. So no path writes one
by accident: the CLI needs ``ctxbus memory import --global``, the Python API ``allow_global=True``, and an upsert
arriving on the bus is only taken for the global scope when its record carries the producer's marker header
(``ctxbus-global-write: 1``), which only those flagged paths set. The store's owner answers an unmarked global
item as ``rejected`` in ``memory.stored``, with the reason.

The marker is a statement of intent, not an authentication: whoever may produce to the bus can set it (the bus's
own security, SASL/TLS, is what keeps strangers off it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem

GLOBAL_WRITE_HEADER = "ctxbus-global-write"
GLOBAL_WRITE_VALUE = b"1"
#: how each path is told to write global items
CLI_FLAG = "--global"
API_FLAG = "allow_global=True"
BUS_MARKER = f"the producer's {GLOBAL_WRITE_HEADER} header (ctxbus memory import {CLI_FLAG})"


class GlobalWriteRefused(ValueError):
    """Items for the global scope without the flag that allows them."""


def refusal(flag: str) -> str:
    return f"writes to {GLOBAL_PROJECT!r} (the scope every project reads) need {flag}"


def global_items(items: Iterable[MemoryItem]) -> list[MemoryItem]:
    return [i for i in items if i.project == GLOBAL_PROJECT]


def check_allowed(items: Sequence[MemoryItem], allowed: bool, flag: str = API_FLAG) -> None:
    """Raise GlobalWriteRefused (naming the items) when ``items`` hold global ones and ``allowed`` is false."""
    if allowed:
        return
    refused = global_items(items)
    if refused:
        ids = ", ".join(repr(i.id) for i in refused[:10]) + (
            f" and {len(refused) - 10} more" if len(refused) > 10 else ""
        )
        raise GlobalWriteRefused(f"{refusal(flag)}: {ids}")


def split(items: Sequence[MemoryItem], allowed: bool) -> tuple[list[MemoryItem], list[MemoryItem]]:
    """(the items that may be written, the global ones refused because ``allowed`` is false), in order."""
    if allowed:
        return list(items), []
    return [i for i in items if i.project != GLOBAL_PROJECT], global_items(items)


def marked(headers: Iterable[tuple[str, bytes]]) -> bool:
    """Whether a record's headers carry the marker that allows global writes."""
    return any(key == GLOBAL_WRITE_HEADER and value == GLOBAL_WRITE_VALUE for key, value in headers)


def marker() -> tuple[str, bytes]:
    return GLOBAL_WRITE_HEADER, GLOBAL_WRITE_VALUE
