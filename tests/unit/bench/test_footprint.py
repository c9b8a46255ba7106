"""The footprint benchmark's process readings (/proc) and its argument checks."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxbus.bench.footprint import cpu_seconds, directory_mib
from ctxbus.cli.errors import CliError
from ctxbus.cli.footprint_cmds import cmd_bench_footprint
from ctxbus.cli.main import build_parser

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")


def test_cpu_seconds_grow_with_work_and_not_with_sleep() -> None:
    before = cpu_seconds(os.getpid())
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    busy = cpu_seconds(os.getpid()) - before
    assert 0.2 <= busy <= 1.0
    before = cpu_seconds(os.getpid())
    time.sleep(0.3)
    assert cpu_seconds(os.getpid()) - before < 0.1


def test_resident_memory_follows_what_the_process_holds() -> None:
    """Read in a fresh process: a long-lived test worker may hand the 64 MiB out of memory it already holds
    resident (freed by earlier tests), and then its RSS does not move."""
    code = (
        "import json, os\n"
        "from ctxbus.bench.footprint import proc_status\n"
        "before = proc_status(os.getpid())\n"
        "held = bytearray(64 * 1024 * 1024)\n"
        "for i in range(0, len(held), 4096):\n"
        "    held[i] = 1\n"
        "print(json.dumps([before, proc_status(os.getpid())]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    before, after = json.loads(done.stdout)
    assert 0 < before["VmRSS"] <= before["VmHWM"]
    assert after["VmRSS"] - before["VmRSS"] >= 60
    assert after["VmHWM"] >= after["VmRSS"]


def test_directory_size_counts_every_file(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 1024 * 1024)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"y" * 512 * 1024)
    assert directory_mib(tmp_path) == pytest.approx(1.5)


@pytest.mark.parametrize(
    "argv",
    [["--memories", "0"], ["--requests", "-1"], ["--rate", "0"]],
)
def test_bad_arguments_are_a_clear_error(argv: list[str]) -> None:
    args: argparse.Namespace = build_parser().parse_args(["bench", "footprint", *argv])
    assert args.handler is cmd_bench_footprint
    with pytest.raises(CliError, match="must be positive"):
        cmd_bench_footprint(args)
