"""Which project and working directory a hook call is about: the caller's, never the gateway's.

The working directory is the hook input's ``cwd`` (Claude Code sends it), else the lean client's own working
directory (``X-Ctxbus-Cwd``); a relative one counts as none. The project is the client's ``CTXBUS_PROJECT``
(``X-Ctxbus-Project``) when it sent one, else resolved from that directory (``.claude/ctxbus.json``, the
``origin`` remote, the git root: :func:`ctxbus.hooks.project.project_for`) without the gateway's environment.
No directory and no project: no identity, and the hook gets an empty context with the reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ctxbus.gateway.hook_input import clean_text
from ctxbus.hooks.project import project_for, shorten_project
from ctxbus.hooks.wire import CWD_HEADER, PROJECT_HEADER

#: where the gateway keeps a call's resolved project in its hook input (for the outcome inference)
RESOLVED_PROJECT = "ctxbus_project"
NO_CWD = "no_cwd"


@dataclass(frozen=True, slots=True)
class HookIdentity:
    project: str | None
    cwd: str | None
    #: where the project came from ("client", "cwd"), or why there is none
    source: str


def _header(headers: dict[str, str], name: str) -> str | None:
    raw = headers.get(name)
    if not raw:
        return None
    value = clean_text(unquote(raw.strip(), errors="replace")).strip()
    return value or None


def _absolute(path: Any) -> str | None:
    return path if isinstance(path, str) and path.strip() and os.path.isabs(path) else None


def identify(hook_input: dict[str, Any], headers: dict[str, str]) -> HookIdentity:
    cwd = _absolute(hook_input.get("cwd")) or _absolute(_header(headers, CWD_HEADER))
    client_project = _header(headers, PROJECT_HEADER)
    if client_project is not None:
        return HookIdentity(shorten_project(client_project), cwd, "client")
    if cwd is None:
        return HookIdentity(None, None, NO_CWD)
    return HookIdentity(project_for(cwd, env={}), cwd, "cwd")


def resolved(hook_input: dict[str, Any], identity: HookIdentity) -> dict[str, Any]:
    """The hook input with the identity in it: its ``cwd`` the one used, the project under RESOLVED_PROJECT."""
    hook_input["cwd"] = identity.cwd
    hook_input[RESOLVED_PROJECT] = identity.project
    return hook_input


def project_of(hook_input: dict[str, Any]) -> str:
    """The project of a hook input the gateway resolved (else of its absolute ``cwd``, without any environment)."""
    project = hook_input.get(RESOLVED_PROJECT)
    if isinstance(project, str) and project:
        return project
    cwd = _absolute(hook_input.get("cwd"))
    if cwd is None:
        raise ValueError("a hook input without an absolute cwd has no project")
    return project_for(cwd, env={})
