"""What a project's sync has to do, and what the last one did: the files' digest, the patterns and documents read,
the state kept per project under ``DATA_DIR/pattern-sync/`` (the gateway's SessionStart sync and ``ctxbus memory
sync`` share it). File reads only: the sending is the caller's (:mod:`ctxbus.gateway.pattern_sync` through the bus,
``ctxbus memory sync`` into its own store when no stack runs)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ctxbus.adapters.file_refs import with_files
from ctxbus.hooks.fallback import HOME_PATTERNS
from ctxbus.hooks.project import git_root
from ctxbus.memory.model import MemoryItem
from ctxbus.memory.pattern_file import ParsedPatterns, PatternFileError, merge_pattern_files
from ctxbus.memory.project_docs import DocsPlan, ProjectDocs, find_project_docs, parse_project_docs, plan_docs
from ctxbus.private_dir import make_private_dirs


def files_digest(
    project_file: Path, home_file: Path, root: Path | None = None, docs: Sequence[Path] = ()
) -> str | None:
    """sha256 of the pattern files' bytes (a missing file counts as absent) and of the project documents ``docs``
    (paths relative to ``root``: their names and bytes); None when none of them exists."""
    digest = hashlib.sha256()
    present = False
    named = [(b"project", project_file), (b"home", home_file)]
    if root is not None:
        named += [(b"doc:" + doc.as_posix().encode(), root / doc) for doc in docs]
    for label, path in named:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            digest.update(label + b"\0absent\0")
            continue
        present = True
        digest.update(label + b"\0" + str(len(data)).encode() + b"\0" + data)
    return digest.hexdigest() if present else None


def state_file(state_dir: Path, project: str) -> Path:
    """Where the digest last synced for ``project`` is kept (one small JSON file per project)."""
    return state_dir / f"{hashlib.sha256(project.encode()).hexdigest()[:32]}.json"


@dataclass(frozen=True, slots=True)
class Pending:
    """A change to sync: the files, their digest, the patterns read from them (or why they cannot be), and what
    the project's documents ask for (items to store, items to retire)."""

    project_file: Path
    home_file: Path
    digest: str
    parsed: ParsedPatterns | None
    unreadable: str | None = None
    docs: ProjectDocs | None = None
    plan: DocsPlan | None = None

    @property
    def items(self) -> list[MemoryItem]:
        """The items stored as usual: the patterns, then the documents' sections (not those coming back)."""
        return [*(self.parsed.items if self.parsed else ()), *(self.plan.items if self.plan else ())]


def root_of(cwd: str | None) -> Path:
    """The repository root of ``cwd`` (the directory itself outside a repository)."""
    base = cwd or str(Path.cwd())
    return Path(git_root(base) or base)


class SyncState:
    """A data directory's sync state: which files a project's sync reads and what the last sync recorded."""

    def __init__(self, state_dir: Path, patterns_file: str, home: Path) -> None:
        self.state_dir = state_dir
        self.patterns_file = patterns_file
        self.home_file = home / HOME_PATTERNS

    def state(self, project: str) -> dict[str, Any]:
        try:
            state = json.loads(state_file(self.state_dir, project).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return state if isinstance(state, dict) else {}

    def recorded(self, project: str) -> str | None:
        digest = self.state(project).get("digest")
        return digest if isinstance(digest, str) else None

    def record(self, project: str, pending: Pending, **facts: Any) -> None:
        make_private_dirs(self.state_dir)
        state = {
            "project": project,
            "digest": pending.digest,
            "files": [str(pending.project_file), str(pending.home_file)],
            "synced_at": datetime.now(UTC).isoformat(),
            **facts,
        }
        if pending.plan is not None:
            state |= {"doc_ids": pending.plan.ids_by_doc, "retired": pending.plan.retired}
        else:  # keep what the documents' last sync recorded
            state |= {k: v for k, v in self.state(project).items() if k in ("doc_ids", "retired")}
        path = state_file(self.state_dir, project)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2), encoding="utf-8")
        tmp.replace(path)

    def pending(self, cwd: str | None, project: str) -> Pending | None:
        """What there is to sync for the project at ``cwd``: None when no file exists or nothing changed. The
        items name the repository's files they mention, with their hashes (what staleness checks later)."""
        root = root_of(cwd)
        project_file = root / self.patterns_file
        docs = find_project_docs(root)
        digest = files_digest(project_file, self.home_file, root, docs)
        state = self.state(project)
        if digest is None and not state.get("doc_ids"):
            return None
        digest = digest or "absent"
        if digest == state.get("digest"):
            return None
        parsed_docs = parse_project_docs(root, project=project)
        recorded = state.get("doc_ids")
        previous: dict[str, list[str]] = recorded if isinstance(recorded, dict) else {}
        retired = set(state.get("retired") or ())
        plan = plan_docs(parsed_docs, previous, retired)
        plan = replace(plan, items=with_files(plan.items, root), returning=with_files(plan.returning, root))
        try:
            parsed = merge_pattern_files(project_file, self.home_file, project=project)
            parsed = replace(parsed, items=with_files(parsed.items, root))
        except PatternFileError as exc:
            return Pending(project_file, self.home_file, digest, None, str(exc), parsed_docs, plan)
        return Pending(project_file, self.home_file, digest, parsed, None, parsed_docs, plan)
