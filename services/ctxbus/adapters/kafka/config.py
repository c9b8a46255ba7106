"""aiokafka client arguments from :class:`KafkaSettings` (security, idempotence, fetch wait, record size).

Consumers keep aiokafka's fetch sizes: Kafka (fetch v3+) and the embedded Tansu return a whole first
batch even when it is larger than ``max_partition_fetch_bytes``/``fetch_max_bytes``, so a record of any
size the broker holds is read (measured on Tansu: 1.1, 5, 10 and 20 MB records with the defaults).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxbus.adapters.kafka.doorbell import Doorbell, doorbell_for
from ctxbus.adapters.kafka.quiet import Quiet
from ctxbus.adapters.kafka.security import sasl_args, ssl_context
from ctxbus.settings import KafkaSettings

#: Tansu does not wake a waiting fetch when data arrives: poll it often.
EMBEDDED_FETCH_MAX_WAIT_MS = 5
#: A real broker wakes fetches; this only bounds idle polling.
CLUSTER_FETCH_MAX_WAIT_MS = 100
#: Consumers off the request path (``background=True``): a record waits up to this long to be seen, and each
#: idle consumer polls a twentieth as often (idle, nine consumers at 5 ms cost the embedded broker about 40%
#: of a core and the stack about 25%).
EMBEDDED_BACKGROUND_FETCH_MAX_WAIT_MS = 100
CLUSTER_BACKGROUND_FETCH_MAX_WAIT_MS = 500
#: A consumer group's session on the embedded broker. Tansu holds a new group's first join for half the session
#: timeout (measured: 5.0 s at aiokafka's 10 s, 3.0 s at 6 s, 1.0 s at 2 s), and every start of ``ctxbus up`` and
#: every recycle of its broker joins every group anew. 6 s still lets a process stall for seconds without losing
#: its partitions; a cluster keeps aiokafka's 10 s unless CTXBUS_KAFKA_SESSION_TIMEOUT_MS says otherwise.
EMBEDDED_SESSION_TIMEOUT_MS = 6_000
#: the longest fetch of a consumer with the doorbell before it looks again whether to sleep: two fetch waits more
#: (the fetch in flight when it looked last, and one sent after)
DOORBELL_LINGER_MS = 40


class KafkaClientConfig:
    """Resolved connection facts for one process: where the brokers are and how to talk to them."""

    def __init__(
        self, settings: KafkaSettings, bootstrap_servers: str, *, embedded: bool, archive: Path | None = None
    ) -> None:
        """``archive``: the archive root of the ``ctxbus up`` whose embedded broker this is (its publishers keep what
        they send until the archive holds it, and send it again when the broker died first: adapters/kafka/resend.py);
        None: they keep nothing (a cluster, or no archive)."""
        if not bootstrap_servers.strip():
            raise ValueError("no Kafka bootstrap servers: set CTXBUS_KAFKA_BOOTSTRAP_SERVERS or run `ctxbus up`")
        self.settings = settings
        self.bootstrap_servers = bootstrap_servers
        self.embedded = embedded
        self.archive = archive if embedded else None
        # checked here, once per process: a missing file or credential is a KafkaSecurityError now, not later
        self._ssl_context = ssl_context(settings)
        self._sasl = sasl_args(settings)

    def common(self, client_id: str) -> dict[str, Any]:
        s = self.settings
        args: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers,
            "client_id": f"{s.client_id_prefix}-{client_id}",
            "security_protocol": s.security_protocol.value,
        }
        if self._ssl_context is not None:
            args["ssl_context"] = self._ssl_context
        return args | self._sasl

    @property
    def idempotence(self) -> bool:
        if self.settings.enable_idempotence is not None:
            return self.settings.enable_idempotence
        return not self.embedded

    @property
    def fetch_max_wait_ms(self) -> int:
        if self.settings.fetch_max_wait_ms is not None:
            return self.settings.fetch_max_wait_ms
        return EMBEDDED_FETCH_MAX_WAIT_MS if self.embedded else CLUSTER_FETCH_MAX_WAIT_MS

    @property
    def background_fetch_max_wait_ms(self) -> int:
        if self.settings.background_fetch_max_wait_ms is not None:
            return self.settings.background_fetch_max_wait_ms
        return EMBEDDED_BACKGROUND_FETCH_MAX_WAIT_MS if self.embedded else CLUSTER_BACKGROUND_FETCH_MAX_WAIT_MS

    @property
    def doorbell(self) -> Doorbell | None:
        """This process's doorbell for the broker (ctxbus.adapters.kafka.doorbell), or None when it is off
        (``CTXBUS_KAFKA_DOORBELL``; by default on for the embedded broker only)."""
        on = self.settings.doorbell if self.settings.doorbell is not None else self.embedded
        return doorbell_for(self.bootstrap_servers) if on else None

    def quiet(
        self, topics: tuple[str, ...], *, background: bool = False, wake_on: tuple[str, ...] = ()
    ) -> Quiet | None:
        """A consumer's idle waits on the doorbell (None when it is off: the consumer polls as Kafka's consumers
        do); its linger outlasts two of its fetch waits; ``wake_on``: upstream topics whose rings wake it too."""
        bell = self.doorbell
        if bell is None:
            return None
        wait = self.background_fetch_max_wait_ms if background else self.fetch_max_wait_ms
        return Quiet(
            bell,
            topics,
            fallback_s=self.settings.doorbell_fallback_ms / 1000.0,
            linger_ms=max(DOORBELL_LINGER_MS, 2 * wait + DOORBELL_LINGER_MS),
            awake_s=self.settings.doorbell_awake_ms / 1000.0,
            wake_on=wake_on,
        )

    def producer(self, client_id: str) -> dict[str, Any]:
        return {
            **self.common(client_id),
            "acks": "all",
            "enable_idempotence": self.idempotence,
            "linger_ms": 0,
            "request_timeout_ms": self.settings.request_timeout_ms,
            # the same limit the publishers check first (adapters.kafka.limits): the client never refuses
            "max_request_size": self.settings.max_record_bytes,
        }

    @property
    def session_timeout_ms(self) -> int | None:
        """A group member's session (None: aiokafka's default, 10 s)."""
        if self.settings.session_timeout_ms is not None:
            return self.settings.session_timeout_ms
        return EMBEDDED_SESSION_TIMEOUT_MS if self.embedded else None

    def consumer(self, client_id: str, group_id: str | None, *, background: bool = False) -> dict[str, Any]:
        """A consumer's arguments; ``background``: off the request path, it polls an idle broker less often."""
        args = {
            **self.common(client_id),
            "group_id": group_id,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "fetch_max_wait_ms": self.background_fetch_max_wait_ms if background else self.fetch_max_wait_ms,
            "isolation_level": "read_committed" if not self.embedded else "read_uncommitted",
        }
        session = self.session_timeout_ms
        if group_id is not None and session is not None:  # heartbeats well inside the session, as Kafka advises
            # (a sixth of it: a third, tried on the embedded broker to halve an idle stack's heartbeats, cost a sixth
            # of the highest sustained rate, 85-94/s against 102/s in paired `bench pipeline --find-capacity` runs:
            # under load a late heartbeat then ends the member's session sooner; docs/idle.md)
            args |= {"session_timeout_ms": session, "heartbeat_interval_ms": max(100, session // 6)}
        return args
