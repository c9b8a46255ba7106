"""What a released schema id means can never change, and every version evolves from the one before.

Each id is pinned to the SHA-256 of its schema's Parsing Canonical Form (how its bytes are encoded) and
to a hash of the whole resolved schema without docs (defaults and enum defaults included: what readers
do with it). Editing a released schema file, or pointing an id at another file, fails here: a change is
a new version with a new id (schemas/README.md). When you add an id, add its pin.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import fastavro
import fastavro.schema
import pytest

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = ROOT / "schemas"

#: schema id -> (PCF SHA-256, resolved-schema SHA-256)
PINNED: dict[int, tuple[str, str]] = {
    1: (
        "7add7cfca7320af805a36da13815f66d3c0cc310afb628199336e233a2cedd1f",
        "89e01a26a94995d42ad2024f3a5906f9cbe695b1286799174b1c7bee2818cc14",
    ),
    2: (
        "b1a26bf976d80b3eb477272e8961e1711c9efcebbabb0f9cc16b08b0b0816298",
        "7e2eb3736231d9e029927ca82917bb9a3bd5d5fadee4f682853597056f6a008e",
    ),
    3: (
        "2e478629b43f37fafe23270229e06623bfeccd92a028e7ecb83c8b295b9a2e7a",
        "bb32b02f3359dc652dcc9b81f7fedee960b2cb0a6abef6e7ffe88077b05e1b24",
    ),
    4: (
        "bad7ad67082cbbd08e9657e9a9e1512665154efaf9f39e8921ebc18e7162b83e",
        "1aca5cbf704de3cb856fffd24e518ea287c5789d47b00c40298d17e8ae3d8d71",
    ),
    5: (
        "651d5c6761de47ea7d38474f73187e44a397e8510622bf8039bb605b2682c68c",
        "eae4fa051e0531968cb5106d64003fd5a6d3c3c4a2a947d6c02c0d3a3d367310",
    ),
    6: (
        "9df7a67fc46ffc59bde7f85f563782279cf4241078ff87cd458a62f2335a0c53",
        "1c2dfe4248d1765461112d1dffa9c8d90e77e05e78c9dadcf4aa7105cb3cdda5",
    ),
    7: (
        "cb75851eb9f5d721f3303cfd437a3fe0a876452790b6a370883fc92147178a47",
        "b4c08d05c14d06195f0318fb464433fa641965b0eb15367bdaa21a122f1dd8b0",
    ),
    8: (
        "3a2ab6244ed65cd6646eed1a37a7b76f9be03a9366a59d0edc2ec931c2cb98ff",
        "98fe3324a6a51f62ad22ab4cc491a271db64c013cb37ef3f42cd61a9279752e5",
    ),
    9: (
        "ff5bbe2495646023d7cf4160d9954da82fc34ad42cf07dfe66c9940b547cca65",
        "51edd1052fab8771c9c2af03fc9da5ba3709c5cb50df189059f7349872366aa7",
    ),
    10: (
        "3dbd2ed8c75b520399a5a260a935cb52d91f0df2ad14769957ffb8fc92cf778c",
        "27dad515a9160ddfb1f510c13139ec42d0ded8d9f104a1c4263b8cfc392dedab",
    ),
    11: (
        "6d7abbcdac086fe5e5d6a8f5010a5675fe045e9d270dea27e00ec0dacf4d050c",
        "cb1d3a41e01c4e761f9502a8c17820ed575f3043f1894e10bac037158601629a",
    ),
    12: (
        "d300c60ec391dc2c165d6efbbba7cfcfd2826b4498f8353e82dcb8aa970506c9",
        "8e33141395f17ad994dac361db736a99f608ac17de142530735dac1a050c7db9",
    ),
    13: (
        "4a62b00d9e84d1c43a35b83ea2c62efc91f77b1f1f09aed0abe2676a6ef292ea",
        "2cf54d5d13f6bf59f72cff7e3a7c46b7637ef05a236570aabf84dd5e41484a49",
    ),
    14: (
        "b663b55eff9224c8b95f5d3c0d16c97b270cadb52527067747b70c250c9c2b5e",
        "dbca2860a66f89abe81e8106b4b310a074c3806e3b2b91afaef3e8b994af4299",
    ),
    15: (
        "3dbd2ed8c75b520399a5a260a935cb52d91f0df2ad14769957ffb8fc92cf778c",
        "41971d8330be1918ac8b26391be122644b098521bcb6d187582cc6577176be64",
    ),
    16: (
        "9df7a67fc46ffc59bde7f85f563782279cf4241078ff87cd458a62f2335a0c53",
        "dfd6a52d8e63819c3abcf3ef0711afb455dc0386c5ff85b5eadd0313d7d08f51",
    ),
    17: (
        "f924a6b9afebf6fe05c98f62333a8580fe9871f87a94ddfb553b6c0e55c4bbd5",
        "a30d3d0efb7cac3e8d75702ea838878bb4729800b1f01045539bd8e60da8d4b4",
    ),
    18: (
        "ac15f42c08e92d32cd1eeb393a7a8621c97f91b9b440070cd578156e0b3a4bb4",
        "847999d200568e4348ff55ea892ed55880643a0531fd3dba88935b29ef94909a",
    ),
    19: (
        "a1baa6cec840b8cfaec87e29e748ddc47fcc1d6987117ae95fd0e7ae4625e964",
        "e4acb9cb0007eacf5c2fb07065376d90ca87e095dd0e5d0dcfb0c2a5130c363e",
    ),
}


def _index() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads((SCHEMAS / "registry.json").read_text())["schemas"]
    return rows


def _schema(row: dict[str, Any]) -> Any:
    return fastavro.schema.load_schema(str(SCHEMAS / row["file"]))


def _without_docs(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_docs(v) for k, v in node.items() if k != "doc"}
    if isinstance(node, list):
        return [_without_docs(v) for v in node]
    return node


def fingerprints(schema: Any) -> tuple[str, str]:
    pcf = fastavro.schema.to_parsing_canonical_form(schema)
    resolved = hashlib.sha256(json.dumps(_without_docs(schema), sort_keys=True).encode()).hexdigest()
    return fastavro.schema.fingerprint(pcf, "SHA-256"), resolved


@pytest.mark.parametrize("row", _index(), ids=lambda r: f"id{r['id']}")
def test_every_schema_id_keeps_the_schema_it_was_released_with(row: dict[str, Any]) -> None:
    assert row["id"] in PINNED, f"schema id {row['id']} has no pin: add it to PINNED when you release it"
    assert fingerprints(_schema(row)) == PINNED[row["id"]], (
        f"schema id {row['id']} ({row['file']}) no longer means what it meant: make a new version with a new id"
    )


def test_no_pin_is_left_without_its_id() -> None:
    assert set(PINNED) == {row["id"] for row in _index()}


def _enums(node: Any, found: dict[str, dict[str, Any]]) -> None:
    if isinstance(node, dict):
        if node.get("type") == "enum":
            found[node["name"]] = node
        for value in node.values():
            _enums(value, found)
    elif isinstance(node, list):
        for value in node:
            _enums(value, found)


def test_every_current_enum_has_a_default_symbol() -> None:
    """Appending a symbol must not break an older reader: it reads the default instead (rule 3)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(SCHEMAS.glob("*.avsc")):
        _enums(json.loads(path.read_text()), found)
    assert found
    missing = sorted(name for name, enum in found.items() if enum.get("default") not in enum["symbols"])
    assert not missing, f"enums without a default symbol: {missing}"


def named_types(node: Any, found: dict[str, Any]) -> dict[str, Any]:
    """Every named type defined anywhere in ``node``, by name and by full name."""
    if isinstance(node, dict):
        if isinstance(node.get("type"), str) and node["type"] in {"record", "enum", "fixed"}:
            found[node["name"]] = node
            if "namespace" in node:
                found[f"{node['namespace']}.{node['name']}"] = node
        for value in node.values():
            named_types(value, found)
    elif isinstance(node, list):
        for value in node:
            named_types(value, found)
    return found


def sample(schema: Any, named: dict[str, Any], *, variant: int) -> Any:
    """A datum of ``schema`` with every field set (``variant`` picks union branches and enum symbols)."""
    if isinstance(schema, str):
        primitive = {
            "null": None,
            "boolean": True,
            "int": 7,
            "long": 1_700_000_000_000_000,
            "float": 1.5,
            "double": 2.5,
            "bytes": b"\x00\x01",
            "string": "text",
        }
        if schema in primitive:
            return primitive[schema]
        return sample(named[schema], named, variant=variant)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"] or schema
        return sample(branches[variant % len(branches)], named, variant=variant) if variant % 3 else None
    kind = schema["type"]
    if schema.get("logicalType") == "uuid":
        return "3f2b8c1e-9a4d-4f6e-8b7a-1c2d3e4f5a6b"
    if kind == "record":
        return {f["name"]: sample(f["type"], named, variant=variant + i) for i, f in enumerate(schema["fields"])}
    if kind == "enum":
        return schema["symbols"][variant % len(schema["symbols"])]
    if kind == "array":
        return [sample(schema["items"], named, variant=variant + i) for i in range(2)]
    if kind == "map":
        return {f"k{i}": sample(schema["values"], named, variant=variant + i) for i in range(2)}
    if kind == "fixed":
        return b"\x00" * schema["size"]
    return sample(kind, named, variant=variant)


def _pairs() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in _index():
        by_type[row["event_type"]].append(row)
    pairs = []
    for rows in by_type.values():
        ordered = sorted(rows, key=lambda r: r["version"])
        pairs.extend(itertools.pairwise(ordered))
    return pairs


def _roundtrip(writer: Any, reader: Any, datum: Any) -> Any:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, writer, datum)
    return fastavro.schemaless_reader(io.BytesIO(buf.getvalue()), writer, reader)


@pytest.mark.parametrize(("older", "newer"), _pairs(), ids=lambda r: f"id{r['id']}")
@pytest.mark.parametrize("variant", [0, 1, 2])
def test_each_version_reads_the_one_before_and_the_one_before_reads_it(
    older: dict[str, Any], newer: dict[str, Any], variant: int
) -> None:
    """Full compatibility, checked by fastavro's resolution both ways for every consecutive pair."""
    old, new = _schema(older), _schema(newer)
    assert _roundtrip(old, new, sample(old, named_types(old, {}), variant=variant))  # backward: new reads old
    assert _roundtrip(new, old, sample(new, named_types(new, {}), variant=variant))  # forward: old reads new
