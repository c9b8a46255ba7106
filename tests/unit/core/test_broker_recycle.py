"""When ``up`` recycles its embedded broker: enough records in one partition, and a quiet stack."""

from __future__ import annotations

import pytest

from ctxbus.core.broker_recycle import RecyclePolicy
from ctxbus.settings import KafkaSettings


def test_due_only_when_a_partition_is_full_enough_and_the_stack_is_quiet() -> None:
    policy = RecyclePolicy(max_records=2_000, idle_s=300.0)
    assert policy.due(1_999, 10_000.0) is None  # quiet, but not full enough
    assert policy.due(50_000, 299.9) is None  # full, but something was written 5 minutes ago
    reason = policy.due(2_000, 300.0)
    assert reason is not None and "2000 records" in reason and "300 s" in reason


def test_zero_records_never_recycles() -> None:
    policy = RecyclePolicy(max_records=0, idle_s=1.0)
    assert not policy.enabled
    assert policy.due(10**9, 10**9) is None


@pytest.mark.parametrize(("records", "idle"), [(-1, 1.0), (10, 0.0), (10, -5.0)])
def test_nonsense_is_refused(records: int, idle: float) -> None:
    with pytest.raises(ValueError, match="must"):
        RecyclePolicy(max_records=records, idle_s=idle)


def test_the_settings_defaults_recycle_after_two_thousand_records_and_five_quiet_minutes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("CTXBUS_KAFKA_EMBEDDED_RECYCLE_RECORDS", "CTXBUS_KAFKA_EMBEDDED_RECYCLE_IDLE_S"):
        monkeypatch.delenv(name, raising=False)
    settings = KafkaSettings()
    assert (settings.embedded_recycle_records, settings.embedded_recycle_idle_s) == (2_000, 300.0)
    monkeypatch.setenv("CTXBUS_KAFKA_EMBEDDED_RECYCLE_RECORDS", "0")
    assert KafkaSettings().embedded_recycle_records == 0
