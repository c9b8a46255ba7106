"""The archive's layout (Kafka Connect's S3 sink naming, hourly windows), retention and its files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from ctxbus.archive.files import PartitionWriter, ReadStats, read_partition, scan
from ctxbus.archive.layout import ArchivedFile, expired, file_path, parse_file, window_of
from ctxbus.archive.state import ArchiveState

T0 = int(datetime(2026, 11, 23, 10, 59, 59, tzinfo=UTC).timestamp() * 1000)


def record(offset: int, at_ms: int, topic: str = "ctxbus.t.v1", partition: int = 1) -> dict[str, object]:
    return {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "timestamp": at_ms,
        "timestamp_type": 0,
        "key": b"k",
        "value": b"\x00\x00\x00\x00\x0cbody",
        "headers": [{"key": "ctxbus-event-type", "value": b"x"}],
    }


def test_paths_follow_the_connect_s3_sink_layout_and_parse_back(tmp_path: Path) -> None:
    window = window_of(T0)
    assert window == datetime(2026, 11, 23, 10, tzinfo=UTC)
    path = file_path(tmp_path, "ctxbus.context.injected.v1", 2, window, 1234)
    rel = path.relative_to(tmp_path).as_posix()
    assert rel == (
        "topics/ctxbus.context.injected.v1/year=2026/month=11/day=23/hour=10/ctxbus.context.injected.v1+2+0000001234.avro"
    )
    parsed = parse_file(path, tmp_path, 10)
    assert parsed is not None and (parsed.topic, parsed.partition, parsed.start_offset) == (
        "ctxbus.context.injected.v1",
        2,
        1234,
    )
    assert parse_file(tmp_path / "topics" / "x" / "notes.txt", tmp_path, 1) is None


def test_a_writer_rolls_over_by_hour_and_a_crashed_tail_is_read_up_to_its_last_block(tmp_path: Path) -> None:
    writer = PartitionWriter(tmp_path, "ctxbus.t.v1", 1)
    writer.append(record(0, T0))
    writer.append(record(1, T0 + 1_000))  # the next hour: a new file
    writer.append(record(2, T0 - 3_600_000))  # an older timestamp stays in the current file
    writer.flush()
    writer.append(record(3, T0 + 2_000))
    writer.close()
    files = scan(tmp_path)
    assert [f.start_offset for f in files] == [0, 1]
    assert [r["offset"] for r in read_partition(files)] == [0, 1, 2, 3]
    last = files[-1].path
    last.write_bytes(last.read_bytes()[:-7])  # a SIGKILL mid-block
    stats = ReadStats()
    kept = [r["offset"] for r in read_partition(scan(tmp_path), stats)]
    assert kept[:2] == [0, 1] and stats.damaged_files == [str(last)]


def _file(tmp: Path, partition: int, start: int, hours_ago: float, size: int, now: datetime) -> ArchivedFile:
    window = (now - timedelta(hours=hours_ago)).replace(minute=0, second=0, microsecond=0)
    return ArchivedFile(file_path(tmp, "t", partition, window, start), "t", partition, start, window, size)


def test_retention_drops_whole_old_files_first_and_never_a_partition_s_newest(tmp_path: Path) -> None:
    now = datetime(2026, 11, 23, 12, tzinfo=UTC)
    files = [
        _file(tmp_path, 0, 0, 24 * 40, 100, now),
        _file(tmp_path, 0, 10, 24 * 10, 100, now),
        _file(tmp_path, 0, 20, 1, 100, now),
        _file(tmp_path, 1, 0, 24 * 50, 100, now),  # old, but partition 1's newest: kept
    ]
    by_age = expired(files, now=now, retention_days=30, retention_bytes=10_000)
    assert [f.start_offset for f in by_age] == [0] and by_age[0].partition == 0
    by_size = expired(files, now=now, retention_days=365, retention_bytes=250)
    assert [(f.partition, f.start_offset) for f in by_size] == [(0, 0), (0, 10)]


def test_state_round_trips_and_a_broken_file_reads_as_empty(tmp_path: Path) -> None:
    state = ArchiveState(bases={"t:0": 7}, groups={"ctxbus.retriever": {"t:0": 12}})
    state.save(tmp_path)
    back = ArchiveState.load(tmp_path)
    assert back.base("t", 0) == 7 and back.base("t", 1) == 0 and back.groups == state.groups
    (tmp_path / "state.json").write_text("{broken")
    assert ArchiveState.load(tmp_path).bases == {}
