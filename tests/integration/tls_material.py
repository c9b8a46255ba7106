"""Throwaway TLS material for the secure-transport tests, made by the ``openssl`` command line.

A test CA signs a server certificate for ``127.0.0.1``/``localhost``, a server certificate for another host
name only, and a client certificate; a second CA that nobody trusts signs a server certificate for the right
host. Nothing here is a secret: every file lives in the test's temporary directory.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

OPENSSL = shutil.which("openssl")
#: the SAN of the certificate whose host name does not match the address the clients dial
WRONG_HOST = "broker.invalid"


@dataclass(frozen=True, slots=True)
class CertKey:
    cert: Path
    key: Path


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    ca: Path
    server: CertKey  # SAN IP:127.0.0.1, DNS:localhost; signed by ``ca``
    wrong_host: CertKey  # SAN DNS:broker.invalid; signed by ``ca``
    untrusted: CertKey  # SAN IP:127.0.0.1, DNS:localhost; signed by a CA the clients do not know
    client: CertKey  # a client certificate (extendedKeyUsage clientAuth) signed by ``ca``
    other_ca: Path


def _openssl(*args: str, cwd: Path) -> None:
    assert OPENSSL is not None
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(directory: Path, name: str) -> CertKey:
    key, cert = directory / f"{name}.key", directory / f"{name}.pem"
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN=ctxbus test {name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    return CertKey(cert, key)


def _leaf(directory: Path, name: str, ca: CertKey, extensions: str) -> CertKey:
    key, csr, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.pem"
    ext = directory / f"{name}.ext"
    ext.write_text(extensions + "\nbasicConstraints=CA:FALSE\n")
    _openssl(
        "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key), "-CAcreateserial",
        "-out", str(cert), "-days", "2", "-sha256", "-extfile", str(ext),
        cwd=directory,
    )  # fmt: skip
    return CertKey(cert, key)


def make_tls_material(directory: Path) -> TlsMaterial:
    directory.mkdir(parents=True, exist_ok=True)
    ca, other = _ca(directory, "ca"), _ca(directory, "other-ca")
    server_ext = "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth"
    return TlsMaterial(
        ca=ca.cert,
        server=_leaf(directory, "server", ca, server_ext),
        wrong_host=_leaf(directory, "wrong-host", ca, f"subjectAltName=DNS:{WRONG_HOST}\nextendedKeyUsage=serverAuth"),
        untrusted=_leaf(directory, "untrusted", other, server_ext),
        client=_leaf(directory, "client", ca, "extendedKeyUsage=clientAuth"),
        other_ca=other.cert,
    )
