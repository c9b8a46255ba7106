"""Which project a hook call belongs to, from its working directory (standard library only).

Order: ``CTXBUS_PROJECT``; ``.claude/ctxbus.json`` ``{"project": ...}`` at the repository
root; the repository's ``origin`` remote (normalised: host/owner/name); the absolute
path of the git root (or of the directory itself). Never a bare directory name
that two projects could share.
"""

from __future__ import annotations

import json
import os
import re

_REMOTE = re.compile(r'\[remote "origin"\][^\[]*?url\s*=\s*(\S+)', re.S)
_SCP = re.compile(r"^[\w.-]+@([\w.-]+):(.+)$")
MAX_PROJECT_CHARS = 200


def git_root(start: str) -> str | None:
    """The nearest ancestor holding ``.git`` (directory or worktree file), or None."""
    path = os.path.abspath(start)
    while True:
        if os.path.exists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _git_dir(root: str) -> str | None:
    dot_git = os.path.join(root, ".git")
    if os.path.isdir(dot_git):
        return dot_git
    try:  # a worktree or submodule: "gitdir: <path>"
        with open(dot_git, encoding="utf-8", errors="replace") as fh:
            line = fh.read(4096).strip()
    except OSError:
        return None
    if line.startswith("gitdir:"):
        target = line.split(":", 1)[1].strip()
        gitdir = target if os.path.isabs(target) else os.path.normpath(os.path.join(root, target))
        common = os.path.join(gitdir, "commondir")
        if os.path.exists(common):
            with open(common, encoding="utf-8", errors="replace") as fh:
                return os.path.normpath(os.path.join(gitdir, fh.read().strip()))
        return gitdir
    return None


def normalise_remote(url: str) -> str | None:
    """``git@github.com:acme/web.git`` and ``https://github.com/acme/web`` -> ``github.com/acme/web``."""
    url = url.strip()
    scp = _SCP.match(url)
    if scp:
        host, path = scp.group(1), scp.group(2)
    elif "://" in url:
        rest = url.split("://", 1)[1]
        rest = rest.split("@", 1)[-1]
        host, _, path = rest.partition("/")
        host = host.split(":", 1)[0]
    else:
        return None
    path = path.strip("/").removesuffix(".git")
    if not host or not path:
        return None
    return f"{host.lower()}/{path}"


def origin_remote(root: str) -> str | None:
    gitdir = _git_dir(root)
    if gitdir is None:
        return None
    try:
        with open(os.path.join(gitdir, "config"), encoding="utf-8", errors="replace") as fh:
            match = _REMOTE.search(fh.read(65536))
    except OSError:
        return None
    return normalise_remote(match.group(1)) if match else None


def configured_project(root: str) -> str | None:
    try:
        with open(os.path.join(root, ".claude", "ctxbus.json"), encoding="utf-8") as fh:
            value = json.load(fh).get("project")
    except (OSError, ValueError, AttributeError):
        return None
    return value.strip() if isinstance(value, str) and value.strip() else None


def project_for(cwd: str | None, env: dict[str, str] | None = None) -> str:
    env = os.environ if env is None else env  # type: ignore[assignment]
    override = (env or {}).get("CTXBUS_PROJECT", "").strip()
    if override:
        return override[:MAX_PROJECT_CHARS]
    base = os.path.abspath(cwd or os.getcwd())
    root = git_root(base) or base
    project = configured_project(root) or origin_remote(root) or root
    return project[:MAX_PROJECT_CHARS]
