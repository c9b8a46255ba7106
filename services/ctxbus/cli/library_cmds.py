"""``ctxbus search`` and ``ctxbus prime``: the Python API from the shell, JSON in and out.

Both open the store themselves when no stack runs (or a Qdrant server is configured), and go
through the running stack's gateway (the process that owns the embedded store) when it does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxbus.api import MAX_K, MODES, Memory, QueryError
from ctxbus.cli.errors import CliError
from ctxbus.cli.project_option import add_project_option, project_of
from ctxbus.contract.payloads import TaskType
from ctxbus.gateway.library import MAX_QUERIES, result_line
from ctxbus.hooks.wire import read_secret
from ctxbus.observability import configure_logging
from ctxbus.ports import StoreBusy, StoreModelMismatch
from ctxbus.runtime import read_runtime
from ctxbus.settings import Settings

#: seconds one gateway call may take (a batch of up to MAX_QUERIES queries)
GATEWAY_TIMEOUT_S = 300.0
_SWITCHES = (
    ("principles", "principles"),
    ("patterns", "patterns"),
    ("learnings", "learnings"),
    ("warnings", "warnings"),
    ("approach", "suggested_approach"),
)


def register(sub: Any) -> None:
    search = sub.add_parser(
        "search",
        help="batch search: JSON lines of {id, query} in, {id, items: [{id, score}], ms} out, best first",
    )
    add_project_option(search)
    search.add_argument("--queries", required=True, type=Path, help="JSON-lines file of {id, query} ('-': stdin)")
    search.add_argument("--k", type=int, default=10, help=f"items per query (1..{MAX_K}, default 10)")
    search.add_argument("--mode", choices=MODES, default="ranked", help="ranked (default) | hybrid | dense | sparse")
    search.add_argument("--domain", help="ranked: a ranking signal (a filter with --strict-domain); others: a filter")
    search.add_argument("--strict-domain", action="store_true", help="ranked, with --domain: only items of that domain")
    search.add_argument("--role", default="implementer", help="agent profile for ranked search")
    search.set_defaults(handler=cmd_search)
    prime = sub.add_parser("prime", help="seed 001's prime_context: the assembled context for a task, as JSON")
    prime.add_argument("description", help="what the task is")
    add_project_option(prime)
    prime.add_argument("--task-type", choices=[t.value for t in TaskType])
    prime.add_argument("--domain", help="the task's domain (a ranking signal; detected when not given)")
    prime.add_argument("--strict-domain", action="store_true", help="with --domain: only items of that domain")
    prime.add_argument("--role", default="implementer")
    prime.add_argument("--max-tokens", type=int, default=2_000)
    prime.add_argument("--max-chars", type=int, default=10_000)
    prime.add_argument("--max-items", type=int, default=10)
    for flag, _ in _SWITCHES:
        prime.add_argument(f"--no-{flag}", action="store_true", help=f"leave out {flag}")
    prime.set_defaults(handler=cmd_prime)


def gateway_post(settings: Settings, path: str, body: dict[str, Any]) -> Any:
    runtime = read_runtime(settings)
    if runtime is None:
        raise CliError("the memory store is in use by another process and no running ctxbus stack was found", 1)
    host = "127.0.0.1" if settings.gateway.host in ("0.0.0.0", "::", "") else settings.gateway.host
    url = f"http://{host}:{runtime.gateway_port}{path}"
    secret = read_secret(dict(os.environ), str(settings.data_dir))
    if secret is None:
        raise CliError(
            f"no gateway secret in {settings.data_dir} (nor CTXBUS_GATEWAY_SECRET): is this the stack's data dir?", 1
        )
    data = json.dumps(body).encode()
    headers = {"content-type": "application/json", "authorization": f"Bearer {secret}"}
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=GATEWAY_TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        with contextlib.suppress(ValueError, AttributeError):
            detail = json.loads(detail).get("error", detail)
        raise CliError(f"the running stack refused: {detail}", 1) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise CliError(f"cannot reach the running stack's gateway at {url}: {exc}", 1) from exc


def _open(settings: Settings) -> Memory | None:
    """The store in this process, or None when the running stack owns it."""
    # the services' log lines go to stderr (stdout is the JSON output), warnings and worse only
    configure_logging("WARNING", settings.log_format)
    try:
        return Memory.open(settings)
    except StoreBusy:
        return None
    except StoreModelMismatch as exc:
        raise CliError(str(exc), 1) from exc


def _query_lines(path: Path) -> Iterator[tuple[Any, str | None, str | None]]:
    """(id, query, error) per non-blank input line."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{path}: cannot read: {exc}") from exc
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except ValueError as exc:
            yield None, None, f"line {number}: not JSON: {exc}"
            continue
        if not isinstance(raw, dict) or not isinstance(raw.get("query"), str):
            qid = raw.get("id") if isinstance(raw, dict) else None
            yield qid, None, f"line {number}: must be an object with a string 'query'"
            continue
        yield raw.get("id"), raw["query"], None


def _check_strict(args: argparse.Namespace) -> None:
    if args.strict_domain and not (args.domain and args.domain.strip()):
        raise CliError("--strict-domain needs --domain")


def cmd_search(args: argparse.Namespace) -> int:
    if not 1 <= args.k <= MAX_K:
        raise CliError(f"--k must be from 1 to {MAX_K}")
    _check_strict(args)
    settings = Settings()
    project = project_of(args)
    lines = list(_query_lines(args.queries))
    failed = sum(1 for _, _, err in lines if err)
    memory = _open(settings)
    results: list[dict[str, Any]] = []
    if memory is not None:
        with memory:
            for qid, query, err in lines:
                if err or query is None:
                    results.append({"id": qid, "error": err})
                    continue
                try:
                    found = memory.search(
                        project,
                        query,
                        k=args.k,
                        mode=args.mode,
                        domain=args.domain,
                        agent_role=args.role,
                        strict_domain=args.strict_domain,
                    )
                except QueryError as exc:
                    results.append({"id": qid, "error": str(exc)})
                    failed += 1
                    continue
                results.append(result_line(qid, found))
    else:
        good = [(qid, q) for qid, q, err in lines if not err and q is not None]
        answered: list[dict[str, Any]] = []
        for start in range(0, len(good), MAX_QUERIES):
            chunk = good[start : start + MAX_QUERIES]
            body = {
                "project": project,
                "queries": [{"id": i, "query": q} for i, q in chunk],
                "k": args.k,
                "mode": args.mode,
                "domain": args.domain,
                "strict_domain": args.strict_domain,
                "agent_role": args.role,
            }
            answered.extend(gateway_post(settings, "/v1/search", body)["results"])
        failed += sum(1 for r in answered if "error" in r)
        it = iter(answered)
        results = [{"id": qid, "error": err} if err or q is None else next(it) for qid, q, err in lines]
    for line in results:
        print(json.dumps(line), flush=True)
    return 3 if failed else 0


def cmd_prime(args: argparse.Namespace) -> int:
    _check_strict(args)
    settings = Settings()
    project = project_of(args)
    include = {section: False for flag, section in _SWITCHES if getattr(args, f"no_{flag}")}
    options: dict[str, Any] = {
        "task_type": args.task_type,
        "domain": args.domain,
        "include": include,
        "max_tokens": args.max_tokens,
        "max_chars": args.max_chars,
        "max_items": args.max_items,
        "agent_role": args.role,
        "strict_domain": args.strict_domain,
    }
    memory = _open(settings)
    if memory is None:
        document = gateway_post(settings, "/v1/prime", {"project": project, "description": args.description, **options})
    else:
        with memory:
            try:
                document = memory.prime(project, args.description, **options)
            except QueryError as exc:
                raise CliError(str(exc)) from exc
    print(json.dumps(document, indent=2, ensure_ascii=False))
    return 0
