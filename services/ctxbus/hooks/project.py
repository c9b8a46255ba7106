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
#: a shortened id: its first HEAD_CHARS, "...", its last characters, "~" and HASH_CHARS hex digits of its sha256
HEAD_CHARS = 120
HASH_CHARS = 16
#: where a project name came from (:func:`project_source`)
SOURCE_ENV = "env"
SOURCE_CONFIG = "ctxbus.json"
SOURCE_REMOTE = "git remote"
SOURCE_PATH = "path"
#: the file that pins a repository's project name, relative to its root
CONFIG_FILE = os.path.join(".claude", "ctxbus.json")


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
        with open(os.path.join(root, CONFIG_FILE), encoding="utf-8") as fh:
            value = json.load(fh).get("project")
    except (OSError, ValueError, AttributeError):
        return None
    return value.strip() if isinstance(value, str) and value.strip() else None


def capture_allowed(cwd: str | None) -> bool:
    """Whether the repository at ``cwd`` allows session capture: not when its ``.claude/ctxbus.json`` says
    ``"capture": false`` (an unreadable file allows it: the global switch is CTXBUS_CAPTURE)."""
    if not cwd:
        return True
    base = os.path.abspath(cwd)
    root = git_root(base) or base
    try:
        with open(os.path.join(root, CONFIG_FILE), encoding="utf-8") as fh:
            value = json.load(fh)
    except (OSError, ValueError):
        return True
    return not (isinstance(value, dict) and value.get("capture") is False)


def shorten_project(project: str) -> str:
    """``project`` itself when it fits MAX_PROJECT_CHARS, else its head, "...", its tail and a hash of the whole:
    readable at both ends, and distinct for distinct ids."""
    if len(project) <= MAX_PROJECT_CHARS:
        return project
    import hashlib  # noqa: PLC0415  (the hook client imports this module; long ids are rare)

    digest = hashlib.sha256(project.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]
    tail = MAX_PROJECT_CHARS - HEAD_CHARS - len("...") - 1 - HASH_CHARS
    return f"{project[:HEAD_CHARS]}...{project[-tail:]}~{digest}"


def project_source(cwd: str | None, env: dict[str, str] | None = None) -> tuple[str, str]:
    """The project of a working directory and where that name came from: ``env`` (CTXBUS_PROJECT),
    ``ctxbus.json`` (the repository's ``.claude/ctxbus.json``), ``git remote`` (``origin``) or ``path``.
    The one answer to "which project is this directory": the hooks, the gateway and every CLI command ask it."""
    env = os.environ if env is None else env  # type: ignore[assignment]
    override = (env or {}).get("CTXBUS_PROJECT", "").strip()
    if override:
        return shorten_project(override), SOURCE_ENV
    base = os.path.abspath(cwd or os.getcwd())
    root = git_root(base) or base
    configured = configured_project(root)
    if configured:
        return shorten_project(configured), SOURCE_CONFIG
    remote = origin_remote(root)
    if remote:
        return shorten_project(remote), SOURCE_REMOTE
    return shorten_project(root), SOURCE_PATH


def project_for(cwd: str | None, env: dict[str, str] | None = None) -> str:
    """The project of a working directory (``env``: whose CTXBUS_PROJECT counts; the gateway passes ``{}``)."""
    return project_source(cwd, env)[0]
