"""A time budget for the pure functions on the request path, and adversarial text to spend it on.

Every such function handles ``SIZE`` (100,000) characters of adversarial text within ``BUDGET_S``
(50 ms). The check is meant to hold on a loaded 2-core machine: it measures the CPU time of the
calling thread (other processes' work does not count), takes the best of up to ``RUNS`` runs with
the garbage collector paused, and stops at the first run within budget. A machine shared with other
work still runs a thread slower (a busy sibling core, a lower clock, a hypervisor's steal): each run
is divided by how much slower than on an unloaded machine a small reference workload runs right after
it (at most ``MAX_STRETCH`` times). A super-linear function misses the budget by orders of magnitude
(a quadratic regex took 30 s here), a linear one meets it with room to spare, so the check does not
need a tight margin to tell them apart.

The texts: a small unit drawn by hypothesis (a hex blob, a long token, runs of dots, slashes or
underscores, repeated punctuation, path-like garbage, lone surrogates and combining marks, mixed
blanks, words that regular expressions look for) laid out to ``SIZE`` characters (repeated into one
token, spaced, one per line, nested in brackets or JSON, a long run ending in something else, or a
long run after a line start that a pattern looks for, such as a heading or a list entry).

How the tests use them (docs/development.md), so that the suite stays quick and holds on a busy machine:

- **Known-worst texts, at growing sizes** (``assert_scales_linearly``): a check runs on a fixed worst-case
  text at each of ``SIZES`` (2,500, 10,000 and 40,000 characters, each ``RATIO`` times the one before); each
  function it times is timed at each (the best CPU time of up to ``RUNS`` runs), and must take at most
  ``RATIO_LIMIT`` (2.5 × RATIO) times as long as at the size before: linear work takes about RATIO times as
  long, quadratic work RATIO² (16) times. The sizes are measured within moments of each other, so a load
  slows them alike.
- **Shapes drawn by hypothesis, small** (``SHAPE_SETTINGS``, ``shapes_only``): the same checks on
  ``SHAPE_SIZE`` characters of generated text, for a few examples, assert what the functions answer (no
  traceback, the documented errors only), not how fast.
- **The fixed budget at SIZE characters over many generated texts** moved to the shipped benchmark
  ``ctxbus bench adversarial --functions`` (ctxbus.bench.text_budget), where absolute times belong.

``assert_within_budget`` and ``assert_linear`` called outside those two (a single case of a test) keep the
original absolute check at SIZE characters.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import re
import string
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from ctxbus.bench.text_budget import CUE_WORDS, FRAMES, KNOWN_WORST_MAKERS, PATH_LIKE, layout

SIZE = 100_000
BUDGET_S = 0.050
RUNS = 3
#: the CPU time of the reference workload (``_reference``) on an unloaded machine of this project's kind
REFERENCE_S = 0.003
#: a loaded machine may stretch the budget by at most this factor
MAX_STRETCH = 3.0
#: how long a measured slowdown is used before it is measured again
SLOWDOWN_TTL_S = 1.0
#: a first run this far over budget is not repeated (it cannot be noise)
HOPELESS = 20.0
#: linear work on 4 times the text takes about 4 times as long; quadratic work 16 times
LINEAR_SLACK = 8.0

#: the sizes of a known-worst text (assert_scales_linearly), each RATIO times the one before: below and above
#: the request path's bounds on what is read (core/bounds.py: 10,000 characters at most), so that super-linear
#: work shows both within a bound and beyond one
RATIO = 4
SIZES = (2_500, 10_000, 40_000)
#: how much longer the larger text may take: linear is RATIO, quadratic RATIO ** 2
RATIO_LIMIT = 2.5 * RATIO
#: a function within this much per character of the larger text (1 µs: twice BUDGET_S per SIZE characters)
#: passes whatever its ratio: timer noise on quick calls, and bounds (a function that does little below a bound
#: and its linear work above it, or all its work below one and none above: core/bounds.py, the memory model's
#: 20,000 characters, assembly's default budget). A quadratic function passing it at 10,000 characters fails at
#: 40,000 unless it is within a few times BUDGET_S at SIZE
FLOOR_PER_CHAR_S = 2 * BUDGET_S / SIZE
#: the size of the texts hypothesis draws for the shapes (correctness, not time)
SHAPE_SIZE = 2_000

#: hypothesis settings for the shapes: a few small examples, asserting what the functions answer, not their time
SHAPE_SETTINGS = settings(
    max_examples=15,
    deadline=None,
    database=None,
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example),
)

NESTING = (("(", ")"), ("[", "]"), ("{", "}"), ('{"a":', "}"), ('{"a":[', "]}"), ("<", ">"), ('"', '"'), ("`", "`"))
LAYOUTS = ("repeat", "spaced", "lines", "nested", "tail", "framed")

UNITS = st.one_of(
    st.text(alphabet="0123456789abcdef", min_size=1, max_size=16),
    st.text(alphabet=string.ascii_letters + string.digits, min_size=1, max_size=8),
    st.text(alphabet="./_-*~+:@#", min_size=1, max_size=4),
    st.text(alphabet=string.punctuation, min_size=1, max_size=4),
    st.sampled_from(PATH_LIKE),
    st.text(alphabet=st.characters(categories=("Cs", "Mn", "Lo", "So", "Zs")), min_size=1, max_size=3),
    st.sampled_from(CUE_WORDS),
    st.text(alphabet=" \t\r\u00a0\u3000", min_size=1, max_size=4),
    st.text(min_size=1, max_size=6),
)


Maker = Callable[[int], str]


@st.composite
def adversarial_makers(draw: st.DrawFn) -> Maker:
    """A maker of adversarial text of any size (see the module docstring)."""
    unit, how, other = draw(UNITS), draw(st.sampled_from(LAYOUTS)), draw(UNITS)
    nesting, frame = draw(st.sampled_from(NESTING)), draw(st.sampled_from(FRAMES))
    return functools.partial(_laid_out, unit, how, other, nesting, frame)


def _laid_out(unit: str, how: str, other: str, nesting: tuple[str, str], frame: str, size: int) -> str:
    return layout(unit, how, size, other=other, nesting=nesting, frame=frame)


def adversarial_texts(size: int = SIZE) -> st.SearchStrategy[str]:
    """``size`` characters of adversarial text (see the module docstring)."""
    return adversarial_makers().map(lambda make: make(size))


#: those texts at SIZE characters
KNOWN_WORST: dict[str, str] = {name: make(SIZE) for name, make in KNOWN_WORST_MAKERS.items()}


def valid_unicode(text: str) -> str:
    """``text`` with lone surrogates replaced (what the models accept; the hook replaces them before sending)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _thread_seconds(
    fn: Callable[..., Any],
    *args: Any,
    expect: tuple[type[BaseException], ...] = (),
    collect: bool = True,
    **kwargs: Any,
) -> float:
    if collect:
        gc.collect()
    gc.disable()
    try:
        started = time.thread_time()
        with contextlib.suppress(*expect):
            fn(*args, **kwargs)
        return time.thread_time() - started
    finally:
        gc.enable()


_REFERENCE_TEXT = "the quick brown fox jumps over 13 lazy dogs; " * 2_000
_REFERENCE_WORD = re.compile(r"[A-Za-z0-9]+")


def _reference() -> int:
    """A reference workload like the ones measured: a regular expression and a Python loop over 90,000 characters."""
    total = 0
    for word in _REFERENCE_WORD.findall(_REFERENCE_TEXT):
        total += len(word) if word.isalpha() else 1
    return total


_measured: list[tuple[float, float]] = []  # (when, slowdown) of the last measure


def slowdown() -> float:
    """How much slower than REFERENCE_S this machine runs the reference workload now (1 to MAX_STRETCH; measured
    again after SLOWDOWN_TTL_S)."""
    now = time.monotonic()
    if not _measured or now - _measured[-1][0] > SLOWDOWN_TTL_S:
        best = min(_thread_seconds(_reference) for _ in range(3))
        _measured[:] = [(now, min(MAX_STRETCH, max(1.0, best / REFERENCE_S)))]
    return _measured[-1][1]


def cpu_seconds(
    fn: Callable[..., Any], *args: Any, expect: tuple[type[BaseException], ...] = (), **kwargs: Any
) -> float:
    """The best CPU time of this thread over up to RUNS calls of ``fn`` (stops at the first within budget), each
    divided by the machine's slowdown measured right after it (see the module docstring).

    ``expect``: exceptions that are a proper answer to bad input (they count as finishing).
    """
    best = math.inf
    for _ in range(RUNS):
        spent = _thread_seconds(fn, *args, expect=expect, **kwargs)
        best = min(best, spent / slowdown())
        if best <= BUDGET_S or best > HOPELESS * BUDGET_S:
            break
    return best


@dataclass
class _Mode:
    """How ``assert_within_budget`` and ``assert_linear`` act now: ``budget`` (the absolute check at SIZE),
    ``shapes`` (run, no timing), or ``record`` (time and keep, for ``assert_scales_linearly``)."""

    kind: str = "budget"
    size: int = SIZE
    times: list[tuple[str, float]] = field(default_factory=list)
    #: the times at the smaller size, while the larger one is recorded (a run stops once within the limit)
    reference: list[tuple[str, float]] | None = None


_mode = _Mode()


def current_size() -> int:
    """The size a check makes its text at: SIZE, or the one ``shapes_only`` or ``assert_scales_linearly`` set."""
    return _mode.size


@contextlib.contextmanager
def _switched(mode: _Mode) -> Iterator[_Mode]:
    global _mode  # noqa: PLW0603
    previous, _mode = _mode, mode
    try:
        yield mode
    finally:
        _mode = previous


@contextlib.contextmanager
def shapes_only(size: int = SHAPE_SIZE) -> Iterator[None]:
    """Within: the budget checks only run their function (its exceptions, but for ``expect``, fail the test)."""
    with _switched(_Mode("shapes", size)):
        yield


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", fn))


def _record(fn: Callable[..., Any], *args: Any, expect: tuple[type[BaseException], ...], **kwargs: Any) -> None:
    # the smaller text: the best of RUNS runs; the larger: stop at the first run within the limit that gives
    index, best = len(_mode.times), math.inf
    limit = 0.0 if _mode.reference is None else _limit(_mode.reference[index][1], _mode.size)
    for _ in range(RUNS):
        best = min(best, _thread_seconds(fn, *args, expect=expect, collect=False, **kwargs))
        if _mode.reference is not None and (best <= limit or best > HOPELESS * limit):
            break
    _mode.times.append((_name(fn), best))


def _limit(before_s: float, size: int) -> float:
    return max(RATIO_LIMIT * before_s, FLOOR_PER_CHAR_S * size)


def traced() -> bool:
    """Whether a tracer (``make coverage``'s) runs: it adds a cost per line executed that is not the code's own, so
    the time checks then only run their functions (the suite without coverage times them)."""
    return sys.gettrace() is not None or (
        getattr(sys, "monitoring", None) is not None
        and any(sys.monitoring.get_tool(tool) == "coverage.py" for tool in range(6))
    )


def assert_scales_linearly(check_at: Callable[[int], Any], sizes: tuple[int, ...] = SIZES) -> None:
    """``check_at(size)`` runs a check on a text of ``size`` characters; every function it times (by
    ``assert_within_budget`` or ``assert_linear``) takes at most RATIO_LIMIT times as long at each size of
    ``sizes`` as at the one before (RATIO times smaller), or is within FLOOR_PER_CHAR_S per character: linear,
    not quadratic (see the module docstring). Each size but the last is timed as the best of RUNS runs; the last
    stops at the first run within the limit. Under a tracer the check runs once, untimed (:func:`traced`)."""
    if traced():
        with _switched(_Mode("shapes", sizes[-1])):
            check_at(sizes[-1])
        return
    slow: list[str] = []
    previous: _Mode | None = None
    for n, size in enumerate(sizes):
        last = n == len(sizes) - 1
        with _switched(_Mode("record", size, reference=previous.times if previous and last else None)) as now:
            check_at(size)
        if previous is not None:
            assert len(previous.times) == len(now.times), "the check timed different functions at two sizes"
            slow += [
                f"{name}: {before * 1000:.2f} ms at {previous.size:,} characters, {after * 1000:.2f} ms at {size:,}"
                for (name, before), (_, after) in zip(previous.times, now.times, strict=True)
                if after > _limit(before, size)
            ]
        previous = now
    assert not slow, f"more than {RATIO_LIMIT:g} times as long on {RATIO} times the text: " + "; ".join(slow)


def assert_linear(fn: Callable[[str], Any], make: Maker, *, expect: tuple[type[BaseException], ...] = ()) -> None:
    """``fn`` takes linear time on the texts ``make`` makes: within BUDGET_S at SIZE characters, or at most
    LINEAR_SLACK times as long as at a quarter of the size (a quadratic function takes 16 times as long).

    For functions whose work is per line or per item (parsers that make an error or an item per line).
    Within ``shapes_only`` or ``assert_scales_linearly``: see those.
    """
    if _mode.kind != "budget" or traced():
        assert_within_budget(fn, make(_mode.size), expect=expect)
        return
    large = cpu_seconds(fn, make(SIZE), expect=expect)
    if large <= BUDGET_S:
        return
    small = cpu_seconds(fn, make(SIZE // 4), expect=expect)
    assert large <= LINEAR_SLACK * max(small, BUDGET_S / 16), (
        f"{getattr(fn, '__qualname__', fn)} took {large * 1000:.1f} ms on {SIZE} characters, "
        f"{small * 1000:.1f} ms on {SIZE // 4}: not linear"
    )


def assert_within_budget(
    fn: Callable[..., Any], *args: Any, expect: tuple[type[BaseException], ...] = (), **kwargs: Any
) -> None:
    """``fn(*args, **kwargs)`` finishes within BUDGET_S of CPU time (best of up to RUNS runs). Within
    ``shapes_only``: it runs and raises nothing but ``expect``; within ``assert_scales_linearly``: it is timed."""
    if _mode.kind == "shapes" or (_mode.kind == "budget" and traced()):
        with contextlib.suppress(*expect):
            fn(*args, **kwargs)
        return
    if _mode.kind == "record":
        _record(fn, *args, expect=expect, **kwargs)
        return
    spent = cpu_seconds(fn, *args, expect=expect, **kwargs)
    sizes = [len(a) for a in args if isinstance(a, str | bytes)]
    assert spent <= BUDGET_S, f"{getattr(fn, '__qualname__', fn)} took {spent * 1000:.1f} ms on inputs of {sizes}"
