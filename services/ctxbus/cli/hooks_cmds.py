"""``ctxbus hooks install|uninstall``: ctxbus's entries in Claude Code's settings, nothing else touched."""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from ctxbus.cli.errors import CliError
from ctxbus.hooks.project import git_root
from ctxbus.hooks.settings_file import SettingsFileError, with_ours, without_ours
from ctxbus.settings import HookSettings

#: seconds Claude Code gives the hook beyond ctxbus's own timeout (the hook answers within its own)
TIMEOUT_SLACK_S = 1


def register(sub: Any) -> None:
    hooks = sub.add_parser("hooks", help="install or remove ctxbus's Claude Code hooks")
    hsub = hooks.add_subparsers(dest="hooks_command", required=True)
    for name, handler, text in (
        ("install", cmd_install, "merge ctxbus's hooks into .claude/settings.json"),
        ("uninstall", cmd_uninstall, "remove ctxbus's hooks (and only them)"),
    ):
        p = hsub.add_parser(name, help=text)
        scope = p.add_mutually_exclusive_group()
        scope.add_argument("--project", action="store_true", help="the project's .claude/settings.json (default)")
        scope.add_argument("--user", action="store_true", help="~/.claude/settings.json")
        p.add_argument("--settings-file", type=Path, help="an explicit settings file")
        p.set_defaults(handler=handler)
        if name == "install":
            p.add_argument(
                "--tool-failures",
                action="store_true",
                help="also hook PostToolUseFailure (failed Bash commands, seen at once instead of at Stop); "
                "only for Claude Code versions that know the event, others reject the whole settings file",
            )


def settings_path(args: argparse.Namespace) -> Path:
    if args.settings_file:
        return Path(args.settings_file)
    if args.user:
        return Path.home() / ".claude" / "settings.json"
    cwd = os.getcwd()
    return Path(git_root(cwd) or cwd) / ".claude" / "settings.json"


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError) as exc:
        raise CliError(f"{path}: not valid JSON ({exc}); not touching it") from exc
    if not isinstance(data, dict):
        raise CliError(f"{path}: the settings are not a JSON object; not touching it")
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.ctxbus-tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def executable() -> str:
    found = shutil.which("ctxbus")
    return found or str(Path(sys.executable).with_name("ctxbus"))


def cmd_install(args: argparse.Namespace) -> int:
    path = settings_path(args)
    timeout_s = math.ceil(HookSettings().timeout_ms / 1000) + TIMEOUT_SLACK_S
    try:
        merged = with_ours(_read(path), executable(), timeout_s, tool_failures=args.tool_failures)
    except SettingsFileError as exc:
        raise CliError(f"{path}: {exc}; not touching it") from exc
    _write(path, merged)
    print(f"ctxbus hooks installed in {path}")
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    path = settings_path(args)
    if not path.exists():
        print(f"nothing to remove: {path} does not exist")
        return 0
    _write(path, without_ours(_read(path)))
    print(f"ctxbus hooks removed from {path}")
    return 0
