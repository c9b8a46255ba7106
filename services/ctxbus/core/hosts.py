"""Which ``Host`` a local server answers (standard library only): its loopback names with its own port, or a
name its operator allowed. A web page cannot then reach it through a DNS-rebound name (``evil.example``
resolving to 127.0.0.1): the browser sends that name as the Host."""

from __future__ import annotations

from collections.abc import Iterable

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
#: bind addresses that name no host of their own
WILDCARD_ADDRESSES = frozenset({"", "0.0.0.0", "::", "[::]"})


def split_host(value: str) -> tuple[str, int | None] | None:
    """``name[:port]`` (an IPv6 name in brackets) -> (lower-case name, port or None); None when malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        name, bracket, rest = value.partition("]")
        if not bracket:
            return None
        name += "]"
        if not rest:
            return name, None
        if not rest.startswith(":"):
            return None
        port_text = rest[1:]
    else:
        name, colon, port_text = value.partition(":")
        if not colon:
            return (name, None) if name else None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return name, int(port_text)


def allowed_set(entries: Iterable[str]) -> frozenset[str]:
    """``host`` or ``host:port`` entries, lower case (``host`` alone admits any port)."""
    return frozenset(e.strip().lower() for e in entries if e.strip())


def bound_name(bind: str) -> str | None:
    """The name a server bound to a specific address answers besides loopback (none for a wildcard)."""
    bind = bind.strip().lower()
    if bind in WILDCARD_ADDRESSES or bind in LOOPBACK_NAMES:
        return None
    return f"[{bind}]" if ":" in bind and not bind.startswith("[") else bind


def host_allowed(host: str | None, *, port: int | None, allowed: frozenset[str], bound: str | None = None) -> bool:
    """Whether a request's ``Host`` addresses this server: a loopback name (or the address it is bound to) with
    its port or none, or an allowed entry."""
    if host is None:
        return False
    if host.strip().lower() in allowed:
        return True
    parts = split_host(host)
    if parts is None:
        return False
    name, host_port = parts
    if name in allowed:
        return True
    return (name in LOOPBACK_NAMES or name == bound) and (host_port is None or host_port == port)
