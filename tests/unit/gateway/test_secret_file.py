"""The per-installation secret (issue 10, finding 4): made once, mode 0600 in a 0700 data dir, or from the env."""

from __future__ import annotations

import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from ctxbus.gateway.secret_file import SecretFileError, ensure_secret_file, gateway_secret
from ctxbus.settings import GatewaySettings, Settings


def test_made_once_private_and_reused(tmp_path: Path) -> None:
    data = tmp_path / "new" / "ctxbus"
    secret = ensure_secret_file(str(data))
    path = data / "gateway.secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert len(secret) >= 40 and path.read_text().strip() == secret
    assert ensure_secret_file(str(data)) == secret
    assert [p.name for p in data.iterdir()] == ["gateway.secret"]  # no temporary file left


def test_starters_racing_agree_on_one_secret(tmp_path: Path) -> None:
    with ThreadPoolExecutor(8) as pool:
        secrets = set(pool.map(lambda _: ensure_secret_file(str(tmp_path)), range(16)))
    assert len(secrets) == 1


def test_a_file_others_could_read_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "gateway.secret"
    path.write_text("an-old-secret-of-mine\n")
    os.chmod(path, 0o644)
    assert ensure_secret_file(str(tmp_path)) == "an-old-secret-of-mine"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_empty_secret_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "gateway.secret").write_text("\n")
    with pytest.raises(SecretFileError, match="delete it"):
        ensure_secret_file(str(tmp_path))


def test_the_environment_replaces_the_file(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, gateway=GatewaySettings(secret=SecretStr("x" * 32)))
    assert gateway_secret(settings) == "x" * 32
    assert not (tmp_path / "gateway.secret").exists()
    assert gateway_secret(Settings(data_dir=tmp_path)) == (tmp_path / "gateway.secret").read_text().strip()


@pytest.mark.parametrize("bad", ["short", "has a space in it ok", "tab\there-and-long-enough", "é" * 20])
def test_a_weak_or_unsendable_env_secret_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="CTXBUS_GATEWAY_SECRET"):
        GatewaySettings(secret=SecretStr(bad))


def test_allowed_hosts_parse() -> None:
    assert GatewaySettings(allowed_hosts=" 127.0.0.1:19470, Ctxbus.Internal ,").allowed_host_list == (
        "127.0.0.1:19470",
        "ctxbus.internal",
    )
