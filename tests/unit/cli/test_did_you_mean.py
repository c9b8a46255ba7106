"""A mistyped command gets a suggestion at every level (issue 21), exit 2 as argparse's other usage errors."""

from __future__ import annotations

import pytest

from ctxbus.cli.main import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["requets"], "error: unknown command 'requets'; did you mean 'request'?"),
        (["memory", "imprt", "x.md"], "error: unknown command 'memory imprt'; did you mean 'memory import'?"),
        (["bench", "pipelin"], "error: unknown command 'bench pipelin'; did you mean 'bench pipeline'?"),
        (["hooks", "unistall"], "error: unknown command 'hooks unistall'; did you mean 'hooks uninstall'?"),
    ],
)
def test_a_near_miss_is_suggested(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == message


def test_nothing_close_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["zzzzqqq"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "error: unknown command 'zzzzqqq'; commands:" in err and "request" in err and "did you mean" not in err


def test_real_commands_still_parse(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["memory", "import", "--help"])
    assert done.value.code == 0 and "--project" in capsys.readouterr().out
