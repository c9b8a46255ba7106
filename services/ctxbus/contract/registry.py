"""Schema ids and parsed Avro schemas, read from ``schemas/`` (the source of truth).

``schemas/registry.json`` lists every schema id ever used: id, event type,
version and file. The newest version of an event type is the one written; every
listed version can be read (old files live under ``schemas/archive/``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import fastavro.schema

#: Where the schemas are: ``ctxbus/schemas`` is a link to the repository's ``schemas/``.
DEFAULT_SCHEMAS_DIR = Path(__file__).resolve().parent.parent / "schemas"


class UnknownSchema(LookupError):
    """A schema id or event type that schemas/registry.json does not list."""


@dataclass(frozen=True, slots=True)
class SchemaEntry:
    schema_id: int
    event_type: str
    version: int
    path: Path
    schema: dict[str, Any]


def _load(path: Path) -> dict[str, Any]:
    schema = fastavro.schema.load_schema(str(path))
    if not isinstance(schema, dict):
        raise UnknownSchema(f"{path} is not a named Avro record schema")
    return schema


class SchemaRegistry:
    """Id <-> schema lookups over one ``schemas/`` directory."""

    def __init__(self, schemas_dir: Path = DEFAULT_SCHEMAS_DIR) -> None:
        self.schemas_dir = schemas_dir
        index_path = schemas_dir / "registry.json"
        try:
            index = json.loads(index_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UnknownSchema(f"cannot read the schema index {index_path}: {exc}") from exc
        self._by_id: dict[int, SchemaEntry] = {}
        self._current: dict[str, SchemaEntry] = {}
        for row in index["schemas"]:
            path = schemas_dir / row["file"]
            entry = SchemaEntry(
                schema_id=int(row["id"]),
                event_type=str(row["event_type"]),
                version=int(row["version"]),
                path=path,
                schema=_load(path),
            )
            if entry.schema_id in self._by_id:
                raise UnknownSchema(f"schema id {entry.schema_id} is listed twice in {index_path}")
            self._by_id[entry.schema_id] = entry
            current = self._current.get(entry.event_type)
            if current is None or entry.version > current.version:
                self._current[entry.event_type] = entry

    def by_id(self, schema_id: int) -> SchemaEntry:
        try:
            return self._by_id[schema_id]
        except KeyError:
            raise UnknownSchema(f"unknown schema id {schema_id}") from None

    def current(self, event_type: str) -> SchemaEntry:
        try:
            return self._current[event_type]
        except KeyError:
            raise UnknownSchema(f"no schema for event type {event_type!r}") from None

    def learn(self, entry: SchemaEntry) -> bool:
        """Know a schema id published by another producer (the schemas topic), to read its records with.

        Never changes what this code writes (``current``), and never replaces an id it already knows.
        Returns whether the id was new.
        """
        if entry.schema_id in self._by_id:
            return False
        self._by_id[entry.schema_id] = entry
        return True

    def has_id(self, schema_id: int) -> bool:
        return schema_id in self._by_id

    def knows(self, event_type: str) -> bool:
        """Whether this code has a schema for ``event_type`` (an unknown id of a known type is a newer one)."""
        return event_type in self._current

    def entries(self) -> list[SchemaEntry]:
        return sorted(self._by_id.values(), key=lambda e: e.schema_id)


@cache
def default_registry() -> SchemaRegistry:
    return SchemaRegistry()
