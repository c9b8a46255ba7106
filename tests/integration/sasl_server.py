"""The server side of SASL PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677), for the test front.

Written from the RFCs with ``hashlib``/``hmac`` only; the RFC 7677 example exchange is checked in
``test_secure_front_rfc.py``. The server keeps what a Kafka broker keeps per user (salt, iterations,
StoredKey, ServerKey), never the password, and fails an exchange the way Kafka does: with an error, not an
``e=`` attribute, so the client sees SASL_AUTHENTICATION_FAILED.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's minimum (and the RFC 7677 example's) iteration count
MIN_ITERATIONS = 4096


class AuthFailed(Exception):
    """The exchange failed; the message is what the broker tells the client."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def scram_credential(
    mechanism: str, password: str, *, salt: bytes | None = None, iterations: int = MIN_ITERATIONS
) -> ScramCredential:
    """What the broker stores for a user: SaltedPassword = Hi(password, salt, i), its StoredKey and ServerKey."""
    hash_name = HASHES[mechanism]
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    client_key = _hmac(hash_name, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        iterations=iterations,
        stored_key=hashlib.new(hash_name, client_key).digest(),
        server_key=_hmac(hash_name, salted, b"Server Key"),
    )


def _attributes(message: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1:
            raise AuthFailed(f"malformed SCRAM message: {message!r}")
        attrs[name] = value
    return attrs


def _saslname(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise AuthFailed("malformed SCRAM user name")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramExchange:
    """One SCRAM authentication: ``first`` answers client-first, ``final`` checks the proof and signs."""

    def __init__(
        self, mechanism: str, lookup: Callable[[str], ScramCredential | None], *, server_nonce: str | None = None
    ) -> None:
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._lookup = lookup
        self._server_nonce = server_nonce or secrets.token_urlsafe(18)
        self.user: str | None = None
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def first(self, message: bytes) -> bytes:
        text = message.decode()
        cbind, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        if cbind not in ("n", "y") or (authzid and not authzid.startswith("a=")):
            raise AuthFailed("unsupported SCRAM channel binding or malformed GS2 header")
        self._gs2_header = f"{cbind},{authzid},"
        attrs = _attributes(bare)
        if "m" in attrs or "n" not in attrs or not attrs.get("r"):
            raise AuthFailed("malformed SCRAM client-first message")
        self.user = _saslname(attrs["n"])
        self._credential = self._lookup(self.user)
        if self._credential is None:  # Kafka answers an unknown user like a wrong password
            raise AuthFailed(self.failure_message())
        self._client_first_bare = bare
        self._nonce = attrs["r"] + self._server_nonce
        salt = base64.b64encode(self._credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._credential.iterations}"
        return self._server_first.encode()

    def final(self, message: bytes) -> bytes:
        if self._credential is None:
            raise AuthFailed("SCRAM client-final before client-first")
        text = message.decode()
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise AuthFailed("SCRAM client-final without a proof")
        attrs = _attributes(without_proof)
        if attrs.get("c") != base64.b64encode(self._gs2_header.encode()).decode() or attrs.get("r") != self._nonce:
            raise AuthFailed(self.failure_message())
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self._hash, self._credential.stored_key, auth_message)
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError as exc:
            raise AuthFailed(self.failure_message()) from exc
        if len(proof) != len(signature):
            raise AuthFailed(self.failure_message())
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), self._credential.stored_key):
            raise AuthFailed(self.failure_message())
        server_signature = _hmac(self._hash, self._credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)

    def failure_message(self) -> str:
        return (
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            f"{self.mechanism}"
        )


def check_plain(token: bytes, passwords: dict[str, str]) -> str:
    """RFC 4616: ``[authzid] NUL authcid NUL passwd``; the user name when the password matches."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        raise AuthFailed("Invalid SASL/PLAIN request: expected 3 tokens")
    authzid, user, password = (p.decode() for p in parts)
    expected = passwords.get(user)
    if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
        raise AuthFailed("Authentication failed: Invalid username or password")
    if authzid and authzid != user:
        raise AuthFailed("Authentication failed: Client requested an authorization id that is different from username")
    return user
