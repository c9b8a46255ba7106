"""How every ``ctxbus bench ...`` command prints its figures."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any


def emit(args: argparse.Namespace, result: dict[str, Any], report: Callable[[dict[str, Any]], None]) -> None:
    """A benchmark's figures: JSON with ``--json``, else its report for people."""
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        report(result)
