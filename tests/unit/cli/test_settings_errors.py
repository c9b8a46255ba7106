"""A bad CTXBUS_* variable is one line naming the variable, its value and what is wrong, exit 1, no traceback."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from ctxbus.cli.main import main
from ctxbus.cli.settings_errors import explain_settings


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("CTXBUS_UP_PROCESSES", "5", "less than or equal to 3"),
        ("CTXBUS_INJECTION_MAX_TOKENS", "abc", "valid integer"),
        ("CTXBUS_KAFKA_TOPIC_PARTITIONS", "-1", "greater than"),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_variable(
    variable: str, value: str, says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(variable, value)
    assert main(["up"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"ctxbus: error: invalid setting {variable}='{value}': ") and says in err


def test_other_validation_errors_are_not_called_settings() -> None:
    class Other(BaseModel):
        n: int

    with pytest.raises(ValidationError) as caught:
        Other.model_validate({"n": "x"})
    assert explain_settings(caught.value) is None
