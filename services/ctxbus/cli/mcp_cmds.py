"""``ctxbus mcp``: the MCP server (stdio by default, streamable HTTP with ``serve --http``), and ``ctxbus mcp
install|uninstall``: ctxbus's entry in the project's ``.mcp.json``, every other byte of the file kept (the way
``ctxbus hooks install`` edits Claude Code's settings: ``--dry-run`` prints the diff, uninstall gives back the
original bytes while nothing else changed the file)."""

from __future__ import annotations

import argparse
import asyncio
import difflib
import os
import sys
from pathlib import Path
from typing import Any

from ctxbus.cli.errors import CliError
from ctxbus.cli.project_option import add_project_option, project_of
from ctxbus.cli.project_pin import read_text, write_text
from ctxbus.hooks.install_record import InstallRecord
from ctxbus.hooks.project import git_root
from ctxbus.mcpserver.config_file import McpFileError, server_entry, with_server, without_server
from ctxbus.mcpserver.stack import DEFAULT_TIMEOUT_S
from ctxbus.settings import Settings

#: the file Claude Code reads a project's MCP servers from, at the repository's root
MCP_FILE = ".mcp.json"


def _serve_options(parser: Any) -> None:
    add_project_option(parser, "the tools' default project and the resources' project")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds a tool waits for the pipeline's answer"
    )


def register(sub: Any) -> None:
    mcp = sub.add_parser(
        "mcp",
        help="the MCP server for agents (stdio; `serve --http` for streamable HTTP) and its .mcp.json entry",
        description="Without a sub-command: serve MCP on stdio (what .mcp.json's entry runs).",
    )
    _serve_options(mcp)
    mcp.set_defaults(handler=cmd_serve, http=False, host="127.0.0.1", port=0)
    msub = mcp.add_subparsers(dest="mcp_command", required=False, metavar="SUBCOMMAND")
    serve = msub.add_parser("serve", help="serve MCP on stdio (default) or streamable HTTP (--http)")
    _serve_options(serve)
    how = serve.add_mutually_exclusive_group()
    how.add_argument("--stdio", dest="http", action="store_false", help="on stdin/stdout (default)")
    how.add_argument(
        "--http", dest="http", action="store_true", help="streamable HTTP at /mcp, behind the gateway's secret"
    )
    serve.add_argument("--host", default="127.0.0.1", help="--http: the address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=9471, help="--http: the port (default 9471; 0 picks one)")
    serve.set_defaults(handler=cmd_serve, http=False)  # the two switches' defaults disagree: stdio
    for name, handler, text in (
        ("install", cmd_install, f"add ctxbus's MCP server to the project's {MCP_FILE} (nothing else touched)"),
        ("uninstall", cmd_uninstall, f"remove it again (the original bytes when nothing else changed {MCP_FILE})"),
    ):
        p = msub.add_parser(name, help=text)
        p.add_argument("--file", type=Path, help=f"an explicit file (default: {MCP_FILE} at the repository's root)")
        p.add_argument("--dry-run", action="store_true", help="print the change as a diff; write nothing")
        p.set_defaults(handler=handler)
        if name == "install":
            p.add_argument(
                "--portable",
                action="store_true",
                help="run a bare `ctxbus` found on PATH (for a committed file), not this installation's path",
            )
            p.add_argument("--project", help="pin the server's project (default: the directory's, when it starts)")


# -- serving ------------------------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    from ctxbus.mcpserver.stack import StackClient, new_session_id  # noqa: PLC0415
    from ctxbus.mcpserver.tools import build_server  # noqa: PLC0415
    from ctxbus.observability import configure_logging  # noqa: PLC0415

    if not args.timeout > 0:
        raise CliError(f"--timeout must be positive, got {args.timeout:g}")
    settings = Settings()
    configure_logging("WARNING", settings.log_format)  # stderr only: on stdio, stdout is the protocol's
    stack = StackClient(settings, session_id=new_session_id(), timeout_s=args.timeout)
    server = build_server(stack, project_of(args))
    if not args.http:
        asyncio.run(server.run_stdio_async())
        return 0
    from ctxbus.mcpserver.http import serve  # noqa: PLC0415

    try:
        asyncio.run(serve(server, settings, args.host, args.port))
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc}", 1) from exc
    return 0


# -- .mcp.json ------------------------------------------------------------------------------------------------


def mcp_file(args: argparse.Namespace) -> Path:
    if args.file:
        return Path(args.file)
    cwd = os.getcwd()
    return Path(git_root(cwd) or cwd) / MCP_FILE


def entry(portable: bool, project: str | None) -> dict[str, Any]:
    """The server's entry: this installation's ``ctxbus`` (or a bare one on PATH) running ``mcp``."""
    args = ["mcp"] + (["--project", project] if project else [])
    if portable:
        return server_entry("ctxbus", args)
    script = Path(sys.executable).parent / "ctxbus"
    if script.exists():
        return server_entry(str(script), args)
    return server_entry(sys.executable, ["-m", "ctxbus.cli.main", *args])


def _diff(path: Path, before: str | None, after: str | None) -> str:
    return "".join(
        difflib.unified_diff(
            (before or "").splitlines(keepends=True),
            (after or "").splitlines(keepends=True),
            fromfile=str(path) if before is not None else "/dev/null",
            tofile=str(path) if after is not None else "/dev/null",
        )
    )


def cmd_install(args: argparse.Namespace) -> int:
    path = mcp_file(args)
    project = (args.project or "").strip() or None
    before = read_text(path)
    try:
        after = with_server(before, entry(args.portable, project), where=str(path))
    except McpFileError as exc:
        raise CliError(f"{exc}; not touching it") from exc
    if args.dry_run:
        print(_diff(path, before, after) or f"{path}: ctxbus's MCP server is installed already; nothing would change")
        return 0
    if after == before:
        print(f"ctxbus's MCP server is already in {path}; nothing changed")
        return 0
    data_dir = Settings().data_dir
    record = InstallRecord.load(data_dir, path)
    if record is None or not record.written(before):  # keep what the file was before ctxbus first touched it
        record = InstallRecord(path=str(path.resolve()), before=before)
    write_text(path, after)
    record.after_sha256 = InstallRecord.digest(after)
    record.save(data_dir)
    print(f"ctxbus's MCP server added to {path} (Claude Code asks to approve a project's servers on its next start)")
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    path = mcp_file(args)
    current = read_text(path)
    if current is None:
        print(f"nothing to remove: {path} does not exist")
        return 0
    data_dir = Settings().data_dir
    record = InstallRecord.load(data_dir, path)
    after: str | None
    if record is not None and record.written(current):
        after = record.before  # nothing else changed since the install: the original bytes (or no file)
    else:
        try:
            after = without_server(current, where=str(path))
        except McpFileError as exc:
            raise CliError(f"{exc}; not touching it") from exc
    if args.dry_run:
        print(_diff(path, current, after) or f"{path}: no ctxbus MCP server; nothing would change")
        return 0
    if after == current and record is None:
        print(f"{path} has no ctxbus MCP server; nothing changed")
        return 0
    if after is None:
        path.unlink()
    elif after != current:
        write_text(path, after)
    if record is not None:
        record.forget(data_dir)
    print(f"ctxbus's MCP server removed from {path}")
    return 0
