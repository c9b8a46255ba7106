"""Child processes that die with the process that started them, even when it is SIGKILLed.

Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``) is set in the child between fork and exec
(``preexec_fn``) or in a pool worker's initializer: when the parent dies, however it dies, the kernel
sends the child the signal. Two caveats, both handled by the callers: the signal follows the *thread*
that forked, so children must be started from a thread that lives as long as they should (the main
thread); and a parent that died before the child set it would be missed, so the child checks its
parent is still the one that started it. Elsewhere than Linux nothing is set (docs/commands.md, `ctxbus up`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable

#: prctl option numbers from <linux/prctl.h>
_PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[[int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    fn = getattr(libc, "prctl", None)
    if fn is None:
        return None

    def call(option: int, value: int) -> int:
        return int(fn(option, value, 0, 0, 0))

    return call


_PRCTL = _prctl()


def supported() -> bool:
    """Whether this platform can tie a child's life to its parent's."""
    return _PRCTL is not None


def die_with_parent(parent_pid: int, sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``preexec_fn`` / pool initializer that makes the child receive ``sig`` when ``parent_pid`` dies.

    Runs in the child: only async-signal-safe work (one syscall, a getppid and a kill).
    """

    def arm() -> None:
        if _PRCTL is None:
            return
        _PRCTL(_PR_SET_PDEATHSIG, int(sig))
        if os.getppid() != parent_pid:  # the parent died before the signal was armed
            os.kill(os.getpid(), sig)

    return arm


def lifeline(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """``die_with_parent`` for a child started now from this process, or None where it cannot hold.

    None off the main thread: the parent-death signal would fire when the starting thread ends,
    not when the process does, killing a child that should live on.
    """
    if _PRCTL is None or threading.current_thread() is not threading.main_thread():
        return None
    return die_with_parent(os.getpid(), sig)
