"""A setting from the environment that does not validate, said as one line per variable (no traceback)."""

from __future__ import annotations

from pydantic import ValidationError
from pydantic_settings import BaseSettings

from ctxbus import settings as settings_module


def _prefixes() -> dict[str, str]:
    """Each settings class's name and its environment prefix (``CTXBUS_KAFKA_`` ...)."""
    found: dict[str, str] = {}
    for value in vars(settings_module).values():
        if isinstance(value, type) and issubclass(value, BaseSettings) and value is not BaseSettings:
            prefix = value.model_config.get("env_prefix")
            if isinstance(prefix, str):
                found[value.__name__] = prefix
    return found


def explain_settings(exc: ValidationError) -> str | None:
    """What is wrong with which ``CTXBUS_*`` variable, or None when ``exc`` is not about ctxbus's settings."""
    prefix = _prefixes().get(exc.title)
    if prefix is None:
        return None
    problems = []
    for error in exc.errors(include_url=False):
        name = prefix + "_".join(str(part) for part in error["loc"]).upper()
        given = error.get("input")
        shown = f"={given!r}" if isinstance(given, str | int | float) else ""
        problems.append(f"{name}{shown}: {error['msg']}")
    return "invalid setting " + "; ".join(problems) if problems else None
