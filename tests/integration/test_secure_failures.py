"""What a user with wrong security settings sees: one clear line naming the cause, exit 1, no traceback.

``ctxbus topics create`` and ``ctxbus request`` run as processes with only ``CTXBUS_*`` variables set,
against the test front (``secure_front``): a wrong password (SCRAM and PLAIN), a mechanism the broker does
not enable, a CA the client does not trust, a certificate for another host name, a missing client
certificate where one is required, and a CA file that does not exist.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from .secure_env import PASSWORD, USERS, front_env, needs_openssl
from .secure_front import SecureFront, server_tls
from .tls_material import TlsMaterial

pytestmark = [pytest.mark.integration, needs_openssl]

CTXBUS = str(Path(sys.executable).with_name("ctxbus"))
TOPICS = ("topics", "create")
REQUEST = ("request", "--project", "acme/web", "--timeout", "5", "how do we rotate the signing keys?")


async def ctxbus(env: Mapping[str, str], args: tuple[str, ...], data_dir: Path) -> tuple[int, str]:
    """Run the CLI with ``env`` as its only ``CTXBUS_*`` settings; (exit code, stderr)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    proc = await asyncio.create_subprocess_exec(
        CTXBUS,
        *args,
        env={**base, **env, "CTXBUS_DATA_DIR": str(data_dir)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


def assert_one_clear_line(code: int, stderr: str, *expected: str) -> str:
    """Exit 1, no traceback, no leaked client; the last line is ctxbus's error and holds every ``expected``."""
    assert code == 1, stderr
    assert "Traceback" not in stderr and "Unclosed" not in stderr, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("ctxbus: error: "), stderr
    for text in expected:
        assert text in last, last
    return last


@pytest.mark.parametrize("args", [TOPICS, REQUEST], ids=["topics-create", "request"])
async def test_a_wrong_scram_password(args: tuple[str, ...], tls_material: TlsMaterial, tmp_path: Path) -> None:
    async with SecureFront(tls=server_tls(tls_material.server), mechanisms=("SCRAM-SHA-256",), users=USERS) as f:
        env = front_env(f, "SASL_SSL", mechanism="SCRAM-SHA-256", password="wrong", cafile=tls_material.ca)
        code, err = await ctxbus(env, args, tmp_path)
    last = assert_one_clear_line(code, err, "SASL authentication failed", "SCRAM-SHA-256", "ctxbus")
    assert "wrong" not in last and PASSWORD not in err


async def test_a_wrong_plain_password(tmp_path: Path) -> None:
    async with SecureFront(mechanisms=("PLAIN",), users=USERS) as f:
        code, err = await ctxbus(front_env(f, "SASL_PLAINTEXT", mechanism="PLAIN", password="wrong"), TOPICS, tmp_path)
    assert_one_clear_line(code, err, "SASL authentication failed", "PLAIN", "Invalid username or password")


async def test_a_mechanism_the_broker_does_not_enable(tmp_path: Path) -> None:
    async with SecureFront(mechanisms=("PLAIN",), users=USERS) as f:
        env = front_env(f, "SASL_PLAINTEXT", mechanism="SCRAM-SHA-512")
        code, err = await ctxbus(env, TOPICS, tmp_path)
    assert_one_clear_line(code, err, "SCRAM-SHA-512", "CTXBUS_KAFKA_SASL_MECHANISM")


@pytest.mark.parametrize("args", [TOPICS, REQUEST], ids=["topics-create", "request"])
async def test_an_untrusted_ca(args: tuple[str, ...], tls_material: TlsMaterial, tmp_path: Path) -> None:
    async with SecureFront(tls=server_tls(tls_material.untrusted)) as f:
        code, err = await ctxbus(front_env(f, "SSL", cafile=tls_material.ca), args, tmp_path)
    assert_one_clear_line(code, err, "certificate", "not trusted", "CTXBUS_KAFKA_SSL_CAFILE")


async def test_a_certificate_for_another_host(tls_material: TlsMaterial, tmp_path: Path) -> None:
    async with SecureFront(tls=server_tls(tls_material.wrong_host)) as f:
        code, err = await ctxbus(front_env(f, "SSL", cafile=tls_material.ca), TOPICS, tmp_path)
    assert_one_clear_line(code, err, "not valid for '127.0.0.1'", "CTXBUS_KAFKA_BOOTSTRAP_SERVERS")


async def test_a_missing_client_certificate(tls_material: TlsMaterial, tmp_path: Path) -> None:
    async with SecureFront(tls=server_tls(tls_material.server, client_ca=tls_material.ca)) as f:
        code, err = await ctxbus(front_env(f, "SSL", cafile=tls_material.ca), TOPICS, tmp_path)
    assert_one_clear_line(code, err, "closed the connection", "CTXBUS_KAFKA_SSL_CERTFILE")


@pytest.mark.parametrize("args", [TOPICS, REQUEST], ids=["topics-create", "request"])
async def test_a_ca_file_that_does_not_exist(args: tuple[str, ...], tmp_path: Path) -> None:
    env = {
        "CTXBUS_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9",
        "CTXBUS_KAFKA_SECURITY_PROTOCOL": "SSL",
        "CTXBUS_KAFKA_SSL_CAFILE": str(tmp_path / "no-such-ca.pem"),
    }
    code, err = await ctxbus(env, args, tmp_path)
    assert_one_clear_line(code, err, "CTXBUS_KAFKA_SSL_CAFILE", "no-such-ca.pem")


async def test_a_tls_client_on_a_plaintext_listener(tls_material: TlsMaterial, tmp_path: Path) -> None:
    async with SecureFront(mechanisms=("PLAIN",), users=USERS) as f:
        code, err = await ctxbus(front_env(f, "SSL", cafile=tls_material.ca), TOPICS, tmp_path)
    assert_one_clear_line(code, err, "TLS handshake", "CTXBUS_KAFKA_SECURITY_PROTOCOL=SSL")
