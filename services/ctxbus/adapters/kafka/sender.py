"""What a consumer loop sends besides its handler's outputs: records sent again with retries, and dead letters
(the whole original, or its truncated form when a broker refuses the size)."""

from __future__ import annotations

import asyncio

import structlog
from aiokafka.errors import KafkaError, MessageSizeTooLargeError
from aiokafka.structs import ConsumerRecord

from ctxbus.adapters.kafka.dead_letter import DeadLetterRecord, dead_letter_for, dead_letter_forms
from ctxbus.adapters.kafka.limits import RecordTooLarge
from ctxbus.adapters.kafka.publisher import EventPublisher, PreparedRecord
from ctxbus.observability import Metrics
from ctxbus.settings import ServiceSettings

log = structlog.get_logger("ctxbus.runner")


def backoff_s(settings: ServiceSettings, attempt: int) -> float:
    """The exponential backoff before retry ``attempt`` (1, 2, ...), capped."""
    base = settings.retry_backoff_ms * (2 ** (attempt - 1))
    return float(min(base, settings.retry_backoff_max_ms)) / 1000.0


class DeadLetterSender:
    """Sends a consumer loop's records with bounded retries, and its dead letters."""

    def __init__(
        self,
        publisher: EventPublisher,
        dead_letter_topic: str,
        *,
        group: str,
        service: str,
        topic: str,
        settings: ServiceSettings,
        metrics: Metrics,
    ) -> None:
        self._publisher = publisher
        self._dlq = dead_letter_topic
        self._group = group
        self.name = service
        self._topic = topic
        self._settings = settings
        self._metrics = metrics

    def _backoff(self, attempt: int) -> float:
        return backoff_s(self._settings, attempt)

    async def publish_with_retries(self, record: PreparedRecord) -> None:
        attempts = 0
        while True:
            attempts += 1
            try:
                await self._publisher.send(record)
                return
            except MessageSizeTooLargeError:
                raise  # the broker's limit: trying again cannot help
            except KafkaError as exc:
                if attempts > self._settings.max_retries:
                    raise  # not committed: the input is redelivered after restart
                delay = self._backoff(attempts)
                log.warning("publish_retry", topic=record.topic, attempt=attempts, delay_s=delay, error=repr(exc))
                await asyncio.sleep(delay)

    async def send(
        self, msg: ConsumerRecord[bytes, bytes], error: BaseException, *, attempts: int, reason: str
    ) -> None:
        record = dead_letter_for(msg, group=self._group, error=error, attempts=attempts, reason=reason)
        forms = dead_letter_forms(
            msg,
            record,
            reason,
            max_bytes=self._publisher.max_record_bytes,
            prefix_bytes=self._settings.dead_letter_prefix_bytes,
        )
        letter = next(forms)
        while True:
            try:
                await self.publish_with_retries(
                    self._publisher.prepare_raw(self._dlq, letter.value, letter.key, letter.headers)
                )
                break
            except (RecordTooLarge, MessageSizeTooLargeError) as exc:  # a broker with a lower limit than ours
                smaller = next(forms, None)
                if smaller is None:
                    raise
                log.warning(
                    "dead_letter_refused", offset=msg.offset, error=repr(exc), kept_bytes=len(smaller.value or b"")
                )
                letter = smaller
        if letter.truncated:
            self._log_truncated(msg, letter)
        self._metrics.consumed.labels(self.name, self._topic, "dead_lettered").inc()
        self._metrics.dead_letters.labels(self.name, self._topic, reason).inc()
        log.warning(
            "dead_lettered",
            topic=msg.topic,
            partition=msg.partition,
            offset=msg.offset,
            reason=reason,
            error_class=record.error_class,
            error=record.error_message,
        )

    def _log_truncated(self, msg: ConsumerRecord[bytes, bytes], letter: DeadLetterRecord) -> None:
        log.warning(
            "dead_letter_truncated",
            topic=msg.topic,
            partition=msg.partition,
            offset=msg.offset,
            original_bytes=len(msg.value or b""),
            kept_bytes=len(letter.value or b""),
        )
