"""The test front's SASL server against the RFCs, so that a pass through it means something.

RFC 7677 section 3 gives a whole SCRAM-SHA-256 exchange (user "user", password "pencil"); the server must
produce its server-first and server-final messages byte for byte and accept the client proof. aiokafka's own
client authenticator then completes exchanges against the server for both hashes.
"""

from __future__ import annotations

import base64

import pytest
from aiokafka.conn import ScramAuthenticator

from .sasl_server import AuthFailed, ScramExchange, check_plain, scram_credential

RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC7677_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_exchange(password: str = "pencil") -> ScramExchange:
    credential = scram_credential("SCRAM-SHA-256", password, salt=RFC7677_SALT, iterations=4096)
    return ScramExchange("SCRAM-SHA-256", {"user": credential}.get, server_nonce=RFC7677_SERVER_NONCE)


def test_the_rfc_7677_exchange_byte_for_byte() -> None:
    exchange = _rfc_exchange()
    assert exchange.first(RFC7677_CLIENT_FIRST) == RFC7677_SERVER_FIRST
    assert exchange.final(RFC7677_CLIENT_FINAL) == RFC7677_SERVER_FINAL
    assert exchange.user == "user"


def test_a_wrong_password_fails_the_rfc_exchange() -> None:
    exchange = _rfc_exchange(password="pencil2")
    exchange.first(RFC7677_CLIENT_FIRST)
    with pytest.raises(AuthFailed, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        exchange.final(RFC7677_CLIENT_FINAL)


def test_an_unknown_user_and_a_replayed_nonce_fail() -> None:
    with pytest.raises(AuthFailed):
        _rfc_exchange().first(b"n,,n=nobody,r=abc")
    exchange = _rfc_exchange()
    exchange.first(RFC7677_CLIENT_FIRST)
    with pytest.raises(AuthFailed):  # the client's nonce only, not the combined one
        exchange.final(b"c=biws,r=rOprNGfwEbeRWgbNEkqO,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("user", ["ctxbus", "odd,name=x"])
def test_aiokafkas_authenticator_completes_against_the_server(mechanism: str, user: str) -> None:
    credential = scram_credential(mechanism, "s3cret")
    exchange = ScramExchange(mechanism, {user: credential}.get)
    client = ScramAuthenticator(
        loop=None, sasl_plain_username=user, sasl_plain_password="s3cret", sasl_mechanism=mechanism
    )
    steps = client.authenticator_scram()
    client_first, _ = next(steps)
    client_final, _ = steps.send(exchange.first(client_first))
    server_final = exchange.final(client_final)
    assert exchange.user == user
    with pytest.raises(StopIteration):
        steps.send(server_final)  # the client checked the server's signature


def test_plain() -> None:
    assert check_plain(b"\0ctxbus\0s3cret", {"ctxbus": "s3cret"}) == "ctxbus"
    for token in (b"\0ctxbus\0wrong", b"\0nobody\0s3cret", b"ctxbus\0s3cret", b"admin\0ctxbus\0s3cret"):
        with pytest.raises(AuthFailed):
            check_plain(token, {"ctxbus": "s3cret"})
