"""``ctxbus hooks install|uninstall``: ctxbus's entries in Claude Code's settings, nothing else touched."""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
from pathlib import Path
from typing import Any

from ctxbus.cli.errors import CliError
from ctxbus.cli.project_pin import PinChange, pin_path, pinned_name, read_text, unpin, write_text
from ctxbus.hooks import launcher
from ctxbus.hooks.install_record import InstallRecord
from ctxbus.hooks.project import git_root
from ctxbus.hooks.settings_file import SECRET_VARIABLE, SettingsFileError, http_url, with_ours, without_ours
from ctxbus.hooks.settings_text import dumps_like
from ctxbus.settings import GatewaySettings, HookSettings, Settings

#: seconds Claude Code gives the hook beyond ctxbus's own timeout (the hook answers within its own)
TIMEOUT_SLACK_S = 1


def register(sub: Any) -> None:
    hooks = sub.add_parser("hooks", help="install or remove ctxbus's Claude Code hooks")
    hsub = hooks.add_subparsers(dest="hooks_command", required=True)
    for name, handler, text in (
        ("install", cmd_install, "merge ctxbus's hooks into Claude Code's settings (.claude/settings.local.json)"),
        (
            "uninstall",
            cmd_uninstall,
            "remove ctxbus's hooks (and only them; the original bytes when nothing else changed)",
        ),
    ):
        p = hsub.add_parser(name, help=text)
        scope = p.add_mutually_exclusive_group()
        scope.add_argument(
            "--local", action="store_true", help="the project's personal .claude/settings.local.json (default)"
        )
        scope.add_argument(
            "--shared",
            action="store_true",
            help="the project's shared (usually committed) .claude/settings.json; the command is a bare `ctxbus` "
            "found on PATH, never this machine's virtualenv path",
        )
        scope.add_argument("--user", action="store_true", help="~/.claude/settings.json")
        p.add_argument("--settings-file", type=Path, help="an explicit settings file")
        p.add_argument("--dry-run", action="store_true", help="print the change as a diff; write nothing")
        p.set_defaults(handler=handler)
        if name == "uninstall":  # the pin of the current repository goes too, if ctxbus wrote it
            p.add_argument("--project", nargs="?", const=True, help=argparse.SUPPRESS)  # the old scope flag
        if name == "install":
            p.add_argument(
                "--project",
                nargs="?",
                const=True,
                metavar="NAME",
                help="pin the repository's project: NAME in its .claude/ctxbus.json, read by the hooks and every "
                "command (uninstall gives back the file's bytes); a bare --project is the old name of --local",
            )
            p.add_argument(
                "--tool-failures",
                action="store_true",
                help="also hook PostToolUseFailure (failed Bash commands, seen at once instead of at Stop); "
                "only for Claude Code versions that know the event, others reject the whole settings file",
            )
            p.add_argument(
                "--http",
                action="store_true",
                help="Claude Code's http hooks: it POSTs to the gateway itself (no process per call); the secret "
                f"comes from ${SECRET_VARIABLE} in Claude Code's environment; no fallback when the gateway is down",
            )


def settings_path(args: argparse.Namespace) -> Path:
    if args.settings_file:
        return Path(args.settings_file)
    if args.user:
        return Path.home() / ".claude" / "settings.json"
    cwd = os.getcwd()
    name = "settings.json" if getattr(args, "shared", False) else "settings.local.json"
    return Path(git_root(cwd) or cwd) / ".claude" / name


def _parse(path: Path, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CliError(f"{path}: not valid JSON ({exc}); not touching it") from exc
    if not isinstance(data, dict):
        raise CliError(f"{path}: the settings are not a JSON object; not touching it")
    return data


def _diff(path: Path, before: str | None, after: str | None) -> str:
    return "".join(
        difflib.unified_diff(
            (before or "").splitlines(keepends=True),
            (after or "").splitlines(keepends=True),
            fromfile=str(path) if before is not None else "/dev/null",
            tofile=str(path) if after is not None else "/dev/null",
        )
    )


def _gateway_url(args: argparse.Namespace) -> str | None:
    """The URL ``--http`` hooks post to: the gateway's configured port (a random one cannot be written down)."""
    if not getattr(args, "http", False):
        return None
    port = GatewaySettings().port
    if port == 0:
        raise CliError(
            "CTXBUS_GATEWAY_PORT=0 picks a new port at every start: an http hook needs a fixed one "
            "(Claude Code takes no variables in a hook's URL); set CTXBUS_GATEWAY_PORT"
        )
    return http_url(port)


def cmd_install(args: argparse.Namespace) -> int:
    name = pinned_name(getattr(args, "project", None))
    pin = PinChange.plan(pin_path(), name) if name is not None else None  # refused before anything is written
    path = settings_path(args)
    timeout_s = math.ceil(HookSettings().timeout_ms / 1000) + TIMEOUT_SLACK_S
    before = read_text(path)
    # a shared file names the `ctxbus` on PATH; a personal one the fast launcher of this installation
    command, script = ("ctxbus", None) if getattr(args, "shared", False) else launcher()
    url = _gateway_url(args)
    try:
        merged = with_ours(
            _parse(path, before), command, timeout_s, tool_failures=args.tool_failures, url=url, launcher=script
        )
    except SettingsFileError as exc:
        raise CliError(f"{path}: {exc}; not touching it") from exc
    after = dumps_like(merged, before)
    if args.dry_run:
        print(_diff(path, before, after) or f"{path}: ctxbus's hooks are installed already; nothing would change")
        if pin is not None:
            print(_diff(pin.path, pin.before, pin.after) or f"{pin.path}: {pin.name!r} is pinned already")
        return 0
    if pin is not None:
        print(pin.apply(Settings().data_dir))
    if after == before:
        print(f"ctxbus hooks already installed in {path}; nothing changed")
        return 0
    record = InstallRecord.load(Settings().data_dir, path)
    if record is None or not record.written(before):  # keep what the file was before ctxbus first touched it
        record = InstallRecord(path=str(path.resolve()), before=before)
    write_text(path, after)
    record.after_sha256 = InstallRecord.digest(after)
    record.save(Settings().data_dir)
    print(f"ctxbus hooks installed in {path}" + (f" (http hooks posting to {url})" if url else ""))
    if url:
        print(
            f"Claude Code must have {SECRET_VARIABLE} in its environment (an http hook cannot read the secret file): "
            f'export {SECRET_VARIABLE}="$(cat {Settings().data_dir / "gateway.secret"})" before starting it'
        )
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    data_dir = Settings().data_dir
    pinned, unpinned, said = unpin(pin_path(), data_dir, dry_run=args.dry_run)
    if said is not None:
        print(_diff(pin_path(), pinned, unpinned) if args.dry_run and pinned != unpinned else said)
    path = settings_path(args)
    current = read_text(path)
    if current is None:
        print(f"nothing to remove: {path} does not exist")
        return 0
    record = InstallRecord.load(data_dir, path)
    after: str | None
    if record is not None and record.written(current):
        after = record.before  # nothing else changed since the install: the original bytes (or no file)
    else:
        keep = record.empty_events() if record is not None else ()
        after = dumps_like(without_ours(_parse(path, current), keep_empty=keep), current)
    if args.dry_run:
        print(_diff(path, current, after) or f"{path}: no ctxbus hooks; nothing would change")
        return 0
    if after is None:
        path.unlink()
    elif after != current:
        write_text(path, after)
    if record is not None:
        record.forget(data_dir)
    print(f"ctxbus hooks removed from {path}")
    return 0
