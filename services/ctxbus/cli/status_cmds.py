"""``ctxbus status``: what ctxbus sees from the current directory, in one place.

- the project (the one the hooks and every ``--project`` default derive here) and where its name came from;
- its item count: through the running stack's gateway (the store's owner), else from the store opened here,
  else unknown (another process owns the store);
- whether the stack runs (its runtime file, its readiness);
- which settings files hold ctxbus's hooks (the project's shared and personal files, the user's).

Always exits 0: it reports, it never fails on what it finds.
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ctxbus.cli.errors import CliError
from ctxbus.cli.library_cmds import gateway_post
from ctxbus.cli.project_option import here
from ctxbus.hooks.project import CONFIG_FILE, SOURCE_CONFIG, SOURCE_ENV, SOURCE_REMOTE, git_root
from ctxbus.hooks.settings_file import is_ours
from ctxbus.memory.model import GLOBAL_PROJECT
from ctxbus.ports import StoreBusy, StoreModelMismatch
from ctxbus.runtime import RuntimeInfo, read_runtime
from ctxbus.settings import Settings

#: seconds a readiness probe of the running stack may take
PROBE_TIMEOUT_S = 2.0


def register(sub: Any) -> None:
    status = sub.add_parser(
        "status",
        help="the current directory's project (and where its name comes from), its item count, whether the stack "
        "runs, and where ctxbus's hooks are installed",
    )
    status.add_argument("--json", action="store_true", help="print it as one JSON object")
    status.set_defaults(handler=cmd_status)


def project_facts(cwd: str) -> dict[str, Any]:
    project, source = here()
    root = git_root(cwd) or cwd
    where = {
        SOURCE_ENV: "CTXBUS_PROJECT",
        SOURCE_CONFIG: os.path.join(root, CONFIG_FILE),
        SOURCE_REMOTE: f"origin of {root}",
    }.get(source, root)
    return {"project": project, "source": source, "from": where, "directory": cwd}


def _count_in_store(settings: Settings, project: str) -> dict[str, Any]:
    from ctxbus.components import open_built_store  # noqa: PLC0415  (the store engine: only on this path)

    try:
        store = open_built_store(settings)
    except StoreBusy:
        return {"items": None, "global_items": None, "via": "unknown (store busy)"}
    except StoreModelMismatch as exc:
        return {"items": None, "global_items": None, "via": f"unknown ({exc})"}
    if store is None:
        return {"items": 0, "global_items": 0, "via": f"no store yet ({settings.store_dir})"}
    try:
        return {"items": store.count(project), "global_items": store.count(GLOBAL_PROJECT), "via": "store"}
    finally:
        store.close()


def item_facts(settings: Settings, project: str, runtime: RuntimeInfo | None) -> dict[str, Any]:
    if runtime is None:
        return _count_in_store(settings, project)
    try:
        answer = gateway_post(settings, "/v1/count", {"project": project})
    except CliError as exc:
        return {"items": None, "global_items": None, "via": f"unknown ({exc})"}
    return {"items": answer.get("items"), "global_items": answer.get("global_items"), "via": "running stack"}


def _ready(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=PROBE_TIMEOUT_S) as response:
            return "ready" if response.status == 200 else f"not ready ({response.status})"
    except urllib.error.HTTPError as exc:
        return f"not ready ({exc.read().decode(errors='replace')[:300]})"
    except (urllib.error.URLError, OSError) as exc:
        return f"not answering ({exc})"


def stack_facts(settings: Settings, runtime: RuntimeInfo | None) -> dict[str, Any]:
    if runtime is None:
        return {"running": False, "runtime_file": str(settings.runtime_file)}
    return {
        "running": True,
        "pid": runtime.pid,
        "gateway_port": runtime.gateway_port,
        "metrics_port": runtime.metrics_port,
        "bootstrap_servers": runtime.bootstrap_servers,
        "health": _ready(runtime.metrics_port),
        "runtime_file": str(settings.runtime_file),
    }


def hooks_in(path: Path) -> dict[str, Any]:
    """Whether ``path`` holds ctxbus's hooks, and for which events."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {"state": "no file", "events": []}
    except (OSError, UnicodeDecodeError) as exc:
        return {"state": f"unreadable ({exc})", "events": []}
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        return {"state": f"not valid JSON ({exc})", "events": []}
    hooks = data.get("hooks") if isinstance(data, dict) else None
    events = [
        event
        for event, groups in (hooks.items() if isinstance(hooks, dict) else ())
        if isinstance(groups, list)
        and any(is_ours(h) for g in groups if isinstance(g, dict) for h in (g.get("hooks") or ()))
    ]
    return {"state": "installed" if events else "not installed", "events": events}


def hook_facts(cwd: str, home: Path) -> list[dict[str, Any]]:
    root = Path(git_root(cwd) or cwd)
    places = (
        ("project, shared", root / ".claude" / "settings.json"),
        ("project, personal", root / ".claude" / "settings.local.json"),
        ("user", home / ".claude" / "settings.json"),
    )
    return [{"scope": scope, "path": str(path), **hooks_in(path)} for scope, path in places]


def status(settings: Settings, cwd: str, home: Path) -> dict[str, Any]:
    facts = project_facts(cwd)
    runtime = read_runtime(settings)
    return {
        **facts,
        **item_facts(settings, facts["project"], runtime),
        "stack": stack_facts(settings, runtime),
        "hooks": hook_facts(cwd, home),
    }


def render(facts: dict[str, Any]) -> str:
    items = facts["items"]
    count = (
        f"{items} in this project, {facts['global_items']} global ({facts['via']})"
        if items is not None
        else facts["via"]
    )
    stack = facts["stack"]
    running = (
        f"running (pid {stack['pid']}, gateway port {stack['gateway_port']}, metrics port {stack['metrics_port']}, "
        f"{stack['health']})"
        if stack["running"]
        else f"not running (no live {stack['runtime_file']})"
    )
    lines = [
        f"project: {facts['project']}",
        f"  from:  {facts['source']} ({facts['from']})",
        f"items:   {count}",
        f"stack:   {running}",
        "hooks:",
    ]
    for hook in facts["hooks"]:
        events = f": {', '.join(hook['events'])}" if hook["events"] else ""
        lines.append(f"  {hook['path']} ({hook['scope']}): {hook['state']}{events}")
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    facts = status(Settings(), os.getcwd(), Path.home())
    print(json.dumps(facts, ensure_ascii=False) if args.json else render(facts))
    return 0
