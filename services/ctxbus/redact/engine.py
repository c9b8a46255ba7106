"""Redaction: secrets and ``<private>`` spans out of a text, the text around them kept (pure, linear time).

A :class:`Redactor` holds an ordered tuple of :class:`Rule` (a pattern, the part of its match that is the
secret, an optional check of that part) and a :class:`WordRule` run after them (the default is
:class:`ctxbus.redact.keyword.KeywordRule`: values assigned to, or written right after, a name that says secret,
token, key or password). ``redact`` first replaces every ``<private>…</private>`` span
with ``[private]`` (an unclosed one runs to the end of the text; nested ones end with their outermost close), then
applies the rules in order; each secret becomes ``[REDACTED:<rule name>]``.

Linear time: every pattern either starts with a literal or a bounded run, and each unbounded or long run is
preceded by a look-behind on its own characters, so a run is scanned once, not once per position
(tests/unit/core/test_redact_budget.py checks the scaling on adversarial texts). A rule with ``needles`` runs
only when one of them occurs in the lower-cased text, so most rules cost one substring search.

The rules themselves are data: ctxbus's own in :mod:`ctxbus.redact.rules`, detect-secrets' plugins in
:mod:`ctxbus.redact.default`, which builds the default redactor.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

PRIVATE_MARK = "[private]"
#: shorter strings hold no secret and no ``<private>`` span (``redact_strings`` skips them)
MIN_SECRET_CHARS = 6
#: between the strings of a structure redacted together (``redact_strings``)
JOIN = "\n\n"
MARK_PREFIX = "[REDACTED:"

_PRIVATE_TAG = re.compile(r"<(/?)private\s{0,8}>", re.IGNORECASE)


def marker(name: str) -> str:
    return f"{MARK_PREFIX}{name}]"


def strip_private(text: str) -> str:
    """Every ``<private>…</private>`` span replaced with ``[private]``. Tags nest (the span ends at the close that
    matches the outermost open), an open tag never closed hides everything after it, and a close tag with no open
    one is left as it is (nothing is hidden by it)."""
    if "<" not in text or "private" not in text.lower():
        return text
    out: list[str] = []
    depth = 0
    kept_from = 0
    for tag in _PRIVATE_TAG.finditer(text):
        if tag.group(1):  # a close
            if depth == 0:
                continue
            depth -= 1
            if depth == 0:
                kept_from = tag.end()
        else:
            if depth == 0:
                out.append(text[kept_from : tag.start()])
                out.append(PRIVATE_MARK)
            depth += 1
    if depth == 0:
        out.append(text[kept_from:])
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Rule:
    """One kind of secret: ``pattern``'s group ``group`` is the secret (the rest of the match stays)."""

    name: str
    pattern: re.Pattern[str]
    #: lower-case literals: the rule runs only when one occurs in the lower-cased text (empty: always)
    needles: tuple[str, ...] = ()
    group: int | str = 0
    #: a check on the secret found (False: left as it is); e.g. a JWT's parts must decode
    accept: Callable[[str], bool] | None = None
    #: where the rule comes from (``ctxbus``, ``detect-secrets``), for the docs and the bench
    origin: str = "ctxbus"


def shannon_entropy(data: str) -> float:
    """Bits per character of ``data``'s own character frequencies."""
    if not data:
        return 0.0
    n = len(data)
    return -sum(c / n * math.log2(c / n) for c in Counter(data).values())


class WordRule(Protocol):
    """What runs after the rules: reads names and their values (:class:`ctxbus.redact.keyword.KeywordRule`)."""

    def apply(self, text: str, found: Counter[str]) -> str:
        """``text`` with the secrets it finds replaced, each counted in ``found`` by label."""
        ...


@dataclass
class Redaction:
    """A redacted text and what was found in it, by rule name."""

    text: str
    found: Counter[str] = field(default_factory=Counter)
    private_spans: int = 0


class Redactor:
    """Applies ``rules`` in order, then ``keyword`` (see the module doc)."""

    def __init__(self, rules: tuple[Rule, ...], keyword: WordRule | None = None) -> None:
        self.rules = rules
        self.keyword = keyword
        #: every rule's needles, looked for once per text (bytes: a faster search than str's on non-ASCII text)
        self._needles = tuple(sorted({n.encode() for rule in rules for n in rule.needles}))

    def redact(self, text: str) -> str:
        """``text`` with ``<private>`` spans and every secret replaced (the same object when nothing was found)."""
        return self.run(text).text

    def run(self, text: str) -> Redaction:
        stripped = strip_private(text)
        result = Redaction(stripped, private_spans=stripped.count(PRIVATE_MARK) - text.count(PRIVATE_MARK))
        if stripped is not text:
            result.text = stripped
        lowered = result.text.lower().encode("utf-8", "surrogatepass")
        present = {n.decode() for n in self._needles if n in lowered}
        for rule in self.rules:
            if rule.needles and not any(n in present for n in rule.needles):
                continue
            result.text = _apply(rule, result.text, result.found)
        if self.keyword is not None:
            result.text = self.keyword.apply(result.text, result.found)
        if result.text == text:
            result.text = text
        return result

    def redact_strings(self, data: Any, keep: frozenset[str] = frozenset()) -> int:
        """Redact every string value of a JSON-like ``data`` (dicts and lists, however nested) in place, without
        recursion; returns how many values changed. Keys are left as they are, and the values of keys in ``keep``
        (paths and ids the caller needs as they are); tuples become lists.

        The strings are first redacted together, joined by blank lines (one pass instead of one per string: an
        event's ranked items hold a hundred short strings); only when that finds something is each redacted on its
        own. Whatever a string holds alone, it also holds joined (the blank line is no token character and starts a
        line), so the joined pass finds nothing only when no string holds anything."""
        slots: list[tuple[Any, Any, str]] = []
        stack: list[Any] = [data]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                keys: Any = list(node.keys())
            elif isinstance(node, list):
                keys = range(len(node))
            else:
                continue
            for key in keys:
                value = node[key]
                if isinstance(value, str):
                    if len(value) >= MIN_SECRET_CHARS and key not in keep:
                        slots.append((node, key, value))
                elif isinstance(value, dict | list):
                    stack.append(value)
                elif isinstance(value, tuple):  # a payload's tuples (items, validation errors) become lists
                    node[key] = list(value)
                    stack.append(node[key])
        if not slots:
            return 0
        joined = JOIN.join(value for _, _, value in slots)
        if self.redact(joined) == joined:
            return 0
        changed = 0
        for node, key, value in slots:
            cleaned = self.redact(value)
            if cleaned != value:
                node[key] = cleaned
                changed += 1
        return changed


def _apply(rule: Rule, text: str, found: Counter[str]) -> str:
    mark = marker(rule.name)

    def replace(match: re.Match[str]) -> str:
        secret = match.group(rule.group)
        if not secret or secret.startswith(MARK_PREFIX) or (rule.accept is not None and not rule.accept(secret)):
            return match.group(0)
        found[rule.name] += 1
        start, end = match.span(rule.group)
        whole = match.group(0)
        return whole[: start - match.start()] + mark + whole[end - match.start() :]

    return rule.pattern.sub(replace, text)
