"""Who the gateway answers (issue 10, finding 4): no browser, a loopback Host, the secret in constant time."""

from __future__ import annotations

import asyncio
import hmac

import pytest

from ctxbus.core.hosts import split_host
from ctxbus.gateway import admission as admission_module
from ctxbus.gateway.admission import Admission, presented_secret
from ctxbus.gateway.http import HttpError, Request, Response

SECRET = "s3cret-s3cret-s3cret-s3cret"
PORT = 9470


def request(path: str = "/v1/hooks", **headers: str) -> Request:
    base = {"host": f"127.0.0.1:{PORT}", "authorization": f"Bearer {SECRET}"}
    merged = {k.replace("_", "-"): v for k, v in {**base, **headers}.items() if v is not None}
    return Request("POST", path, merged, b"{}")


def refusal(gate: Admission, req: Request) -> int | None:
    try:
        gate.check(req)
    except HttpError as exc:
        return exc.status
    return None


@pytest.fixture
def gate() -> Admission:
    return Admission(SECRET, port=PORT)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:9470", ("127.0.0.1", 9470)),
        ("LOCALHOST", ("localhost", None)),
        ("[::1]:9470", ("[::1]", 9470)),
        ("[::1]", ("[::1]", None)),
        ("[::1", None),
        ("[::1]x", None),
        ("localhost:", None),
        ("localhost:0", None),
        ("localhost:70000", None),
        ("localhost:12a", None),
        ("", None),
    ],
)
def test_host_values_are_split_strictly(value: str, expected: tuple[str, int | None] | None) -> None:
    assert split_host(value) == expected


def test_the_secret_is_required_and_compared(gate: Admission) -> None:
    assert refusal(gate, request()) is None
    assert refusal(gate, request(authorization=None)) == 401
    assert refusal(gate, request(authorization=f"Bearer {SECRET}x")) == 401
    assert refusal(gate, request(authorization=SECRET)) == 401  # no scheme
    assert refusal(gate, request(authorization=f"Basic {SECRET}")) == 401
    assert refusal(gate, request(authorization=f"bearer   {SECRET} ")) is None
    assert refusal(gate, request(authorization=None, x_ctxbus_token=SECRET)) is None
    assert refusal(gate, request(authorization=None, x_ctxbus_token="nope")) == 401
    assert presented_secret({}) is None


def test_the_comparison_is_constant_time(gate: Admission, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(admission_module.hmac, "compare_digest", spy)
    assert refusal(gate, request(authorization="Bearer wrong")) == 401
    assert calls == [(b"wrong", SECRET.encode())]


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:9470"])
def test_any_browser_origin_is_refused_first(gate: Admission, origin: str) -> None:
    assert refusal(gate, request(origin=origin)) == 403
    assert refusal(gate, request(origin=origin, authorization=None)) == 403  # before the secret


@pytest.mark.parametrize(
    ("host", "status"),
    [
        (f"127.0.0.1:{PORT}", None),
        (f"localhost:{PORT}", None),
        (f"[::1]:{PORT}", None),
        ("localhost", None),
        (f"evil.example:{PORT}", 403),
        (f"127.0.0.1:{PORT + 1}", 403),
        ("127.0.0.1.evil.example", 403),
        (f"localhost.:{PORT}", 403),
        (f"127.0.0.2:{PORT}", 403),
        (f"0.0.0.0:{PORT}", 403),
        (None, 403),
    ],
)
def test_only_loopback_hosts_on_the_gateways_port(gate: Admission, host: str | None, status: int | None) -> None:
    assert refusal(gate, request(host=host)) == status
    if status is not None:  # before the secret: a rebound page learns nothing from a 401
        assert refusal(gate, request(host=host, authorization=None)) == status


def test_configured_hosts_are_admitted(gate: Admission) -> None:
    published = Admission(SECRET, port=PORT, allowed_hosts=["127.0.0.1:19470", "ctxbus.internal"])
    assert refusal(published, request(host="127.0.0.1:19470")) is None
    assert refusal(published, request(host="ctxbus.internal:8080")) is None
    assert refusal(published, request(host="CTXBUS.internal")) is None
    assert refusal(published, request(host="127.0.0.1:19471")) == 403
    assert refusal(gate, request(host="127.0.0.1:19470")) == 403


def test_healthz_needs_no_secret_but_a_local_host(gate: Admission) -> None:
    assert refusal(gate, request("/healthz", authorization=None)) is None
    assert refusal(gate, request("/healthz", authorization=None, origin="http://evil.example")) == 403


def test_wrap_refuses_before_the_handler_runs(gate: Admission) -> None:
    handled: list[Request] = []

    async def handler(req: Request) -> Response:
        handled.append(req)
        return Response(200, {})

    wrapped = gate.wrap(handler)
    with pytest.raises(HttpError):
        asyncio.run(wrapped(request(authorization=None)))
    assert handled == []
    assert asyncio.run(wrapped(request())).status == 200 and len(handled) == 1


def test_an_empty_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        Admission("")
