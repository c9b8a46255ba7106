"""``--project`` of every command: explicit, or the project of the current directory as the hooks derive it.

One answer to "which project is this directory" (:func:`ctxbus.hooks.project.project_source`): what
``ctxbus memory import`` stores under from a repository is what a hook call from that repository reads.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ctxbus.cli.errors import CliError
from ctxbus.hooks.project import project_source

DEFAULT_HELP = "default: the current directory's project, as the hooks derive it (see `ctxbus status`)"


def add_project_option(parser: Any, what: str = "the project") -> None:
    """``--project P``; left out: :func:`project_of` answers with the current directory's project."""
    parser.add_argument("--project", help=f"{what} ({DEFAULT_HELP})")


def here() -> tuple[str, str]:
    """The current directory's project and where its name came from (env, ctxbus.json, git remote, path)."""
    return project_source(os.getcwd())


def project_of(args: argparse.Namespace) -> str:
    """The explicit ``--project`` (stripped; blank is an error), else the current directory's project."""
    value = getattr(args, "project", None)
    if value is None:
        return here()[0]
    project = str(value).strip()
    if not project:
        raise CliError("--project must not be blank")
    return project
