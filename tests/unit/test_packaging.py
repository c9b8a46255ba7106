"""The package's metadata builds without setuptools' deprecation warnings (issue 21: `make setup` printed one)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_license_is_an_spdx_string_and_the_backend_knows_it() -> None:
    data = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    assert data["project"]["license"] == "Apache-2.0"  # a TOML table is deprecated (setuptools >= 77)
    assert not any(c.startswith("License ::") for c in data["project"].get("classifiers", ()))  # refused with it
    (setuptools,) = [Requirement(r) for r in data["build-system"]["requires"] if Requirement(r).name == "setuptools"]
    assert setuptools.specifier.contains("77.0.0") and not setuptools.specifier.contains("76.1.0")
