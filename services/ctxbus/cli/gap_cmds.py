"""``ctxbus gap``: detect a context gap in an agent state file and inject context into it.

``--detect-only`` prints the assessment (the gap as JSON, or why there is none) without
touching the bus; otherwise the updated state is printed (or written to ``--output``). With no broker
(no running stack, no cluster configured) the gap is filled from the state's own sources alone (seed 000:
the memory store is optional), and the summary line says so.
A bad file (missing, not JSON, not a state) is one clear error line, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from ctxbus.cli.errors import CliError
from ctxbus.cli.project_option import here
from ctxbus.core.agent_state import AgentState, StateError, parse_state
from ctxbus.core.gaps import GapPolicy
from ctxbus.gaps.inject import DEFAULT_TIMEOUT_S, GapInjectionTimeout, GapInputError, assess, fill_gap
from ctxbus.observability import configure_logging
from ctxbus.settings import Settings

#: Largest state file read, in bytes.
MAX_STATE_BYTES = 20_000_000


def register(sub: Any) -> None:
    gap = sub.add_parser("gap", help="detect a context gap in an agent state and inject context into it")
    gap.add_argument("--state", required=True, type=Path, help="the agent state document (JSON)")
    gap.add_argument(
        "--project",
        help="the project to search (default: the state's project, else the current directory's, as the hooks "
        "derive it)",
    )
    gap.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help=f"seconds to wait (default {DEFAULT_TIMEOUT_S:g})"
    )
    gap.add_argument("--detect-only", action="store_true", help="print the gap as JSON; publish nothing")
    gap.add_argument("--output", type=Path, help="write the JSON here (default: stdout)")
    gap.set_defaults(handler=cmd_gap)


def load_state(path: Path) -> tuple[dict[str, Any], AgentState]:
    """The raw state document and its validated reading; CliError naming what is wrong."""
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise CliError(f"{path}: not a file")
        if size > MAX_STATE_BYTES:
            raise CliError(f"{path}: {size} bytes, more than the {MAX_STATE_BYTES} a state may have")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise CliError(f"{path}: no such file") from exc
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{path}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    try:
        parsed = parse_state(raw)
    except StateError as exc:
        raise CliError(f"{path}: {exc}") from exc
    return raw, parsed


def _emit(document: dict[str, Any], output: Path | None) -> None:
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(output)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise CliError(f"{output}: cannot write: {exc.strerror or exc}", 1) from exc


def cmd_gap(args: argparse.Namespace) -> int:
    if not args.timeout > 0:
        raise CliError(f"--timeout must be positive, got {args.timeout}")
    if args.project is not None and not args.project.strip():
        raise CliError("--project must not be blank")
    raw, parsed = load_state(args.state)
    project = args.project if args.project is not None or parsed.project else here()[0]
    settings = Settings()
    if not structlog.is_configured():  # logs go to stderr: stdout is the JSON document
        configure_logging(settings.log_level, settings.log_format)
    from ctxbus.components import open_embedder  # noqa: PLC0415  (loads the model)

    embedder = open_embedder(settings)
    if args.detect_only:
        assessment = assess(parsed, GapPolicy(), embedder, now=datetime.now(UTC))
        _emit(
            {
                "gap": assessment.gap.to_dict() if assessment.gap else None,
                "confidence": round(assessment.confidence, 4),
                "indicators": [i.to_dict() for i in assessment.indicators],
                "why": assessment.why,
            },
            args.output,
        )
        return 0
    try:
        result = asyncio.run(
            fill_gap(raw, settings=settings, embedder=embedder, timeout_s=args.timeout, project=project)
        )
    except GapInjectionTimeout as exc:
        raise CliError(str(exc), 1) from exc
    except GapInputError as exc:
        hint = "; pass --project or add it to the state" if "project" in exc.missing else ""
        raise CliError(f"{args.state}: {exc}{hint}") from exc
    except ValueError as exc:  # a request the contract refuses (an over-long project or session id ...)
        raise CliError(f"{args.state}: cannot request context: {exc}") from exc
    _emit(result.state, args.output)
    sources = ", ".join(f"{k} {v}" for k, v in result.sources.items() if v)
    print(
        f"-- {result.status.value}: {result.why} ({result.context_chars} chars, {result.context_bytes} bytes"
        f"{'; ' + sources if sources else ''}; {result.duration_ms:.0f} ms)",
        file=sys.stderr,
    )
    return 0
