"""The agent state document an orchestrator holds about a running agent, read tolerantly (pure).

Messages, decisions, cycle analysis, health metrics with cycle times, quality-gate results, the
agent's output flags, a pending handoff and architecture/sprint hints; unknown keys are kept, every
section is optional, and :func:`parse_state` names the field when something is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeFloat,
    ValidationError,
    field_validator,
    model_validator,
)

from ctxbus.contract.payloads import TaskType

#: The state key written when no handoff is pending and the state names no target.
DEFAULT_TARGET = "injected_context"
#: The state key written before a pending handoff (the receiving agent reads it).
HANDOFF_TARGET = "handoff_context"
#: The state key holding the audit trail of injections.
INJECTION_LOG_KEY = "injection_log"
#: Message roles that are not the agent speaking.
USER_ROLES = frozenset({"user", "human"})
OTHER_ROLES = frozenset({"system", "tool"})
#: The retrieval request's bound on mentioned files.
MAX_MENTIONED_FILES = 200
#: Errors quoted when a state is rejected.
MAX_ERRORS_SHOWN = 3


class StateError(ValueError):
    """The state document cannot be read; the message names the offending field."""


# --- the state document ------------------------------------------------------------------------


def _list_or_empty(value: Any) -> Any:
    return [] if value is None else value


def _as_list(value: Any) -> Any:
    return [] if value is None else value if isinstance(value, list) else [value]


def needs(value: bool | str | list[str]) -> tuple[bool, tuple[str, ...]]:
    """A ``missing_context`` value (flag, text or list) as (flagged, what is missing)."""
    if isinstance(value, bool):
        return value, ()
    items = (value,) if isinstance(value, str) else tuple(value)
    items = tuple(i.strip() for i in items if i.strip())
    return bool(items), items


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class Message(_Section):
    role: str = "agent"
    agent: str | None = None
    content: str = ""
    clarification_needed: bool = False

    @model_validator(mode="before")
    @classmethod
    def _tolerate_shapes(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"content": value}
        if isinstance(value, dict) and isinstance(value.get("content"), list):  # content blocks
            texts = [b.get("text", "") for b in value["content"] if isinstance(b, dict) and b.get("type") == "text"]
            return {**value, "content": "\n".join(t for t in texts if isinstance(t, str))}
        return value

    @property
    def from_agent(self) -> bool:
        return self.role.strip().lower() not in USER_ROLES | OTHER_ROLES


class CycleAnalysis(_Section):
    circular_detected: bool = False
    topic: str | None = None


class HealthMetrics(_Section):
    #: seconds of the agent's current (latest) cycle, by agent
    agent_cycle_times: dict[str, NonNegativeFloat] = Field(default_factory=dict)
    #: the usual cycle time, by agent
    baseline_cycle_times: dict[str, NonNegativeFloat] = Field(default_factory=dict)
    #: the usual cycle time of any agent, when no per-agent baseline is known
    average_cycle_time: NonNegativeFloat | None = Field(
        default=None, validation_alias=AliasChoices("average_cycle_time", "baseline_cycle_time")
    )


class GateResult(_Section):
    gate: str = Field(default="gate", validation_alias=AliasChoices("gate", "gate_name", "name"))
    passed: bool = True
    reason: str = ""
    missing_context: bool | str | list[str] = False

    @property
    def lacks_context(self) -> tuple[bool, tuple[str, ...]]:
        flagged, items = needs(self.missing_context)
        return flagged or self.reason.strip().lower() == "missing_context", items


class AgentOutput(_Section):
    agent: str | None = None
    missing_context: bool | str | list[str] = False


class Handoff(_Section):
    pending: bool = False
    status: str | None = None
    to_agent: str | None = Field(default=None, validation_alias=AliasChoices("to_agent", "target_agent"))

    @property
    def is_pending(self) -> bool:
        return self.pending or (self.status or "").strip().lower() == "pending"


class Hints(_Section):
    """Architecture or sprint hints: what the retrieval should look near."""

    domain: str | None = None
    files: list[str] = Field(default_factory=list)
    components: list[str] = Field(default_factory=list)
    current_story: str | None = None


MessageList = Annotated[list[Message], BeforeValidator(_list_or_empty)]
Gates = Annotated[list[GateResult], BeforeValidator(_list_or_empty)]
#: the state's decisions: texts or objects (``summary``/``decision``/``title``..., ``agent``), any shape kept
Decisions = Annotated[list[Any], BeforeValidator(_as_list)]


class AgentState(_Section):
    """The agent state document; unknown keys are kept, every section may be missing."""

    project: str | None = None
    session_id: str | None = None
    current_agent: str | None = None
    agent_role: str | None = None
    task: str | None = Field(default=None, validation_alias=AliasChoices("task", "current_task"))
    task_type: TaskType | None = None
    domain: str | None = None
    messages: MessageList = Field(default_factory=list)
    decisions: Decisions = Field(default_factory=list)
    cycle_analysis: CycleAnalysis | None = None
    health_metrics: HealthMetrics | None = Field(
        default=None, validation_alias=AliasChoices("health_metrics", "health_status")
    )
    gate_results: Gates = Field(default_factory=list)
    agent_output: AgentOutput | None = None
    handoff: Handoff | None = None
    architecture: Hints | None = None
    sprint: Hints | None = None
    injection_target: str | None = Field(default=None, min_length=1, max_length=200)

    @field_validator("gate_results", mode="before")
    @classmethod
    def _gates_by_name(cls, value: Any) -> Any:
        if isinstance(value, dict):  # {"name": {...}} as well as [{"gate": "name", ...}]
            return [{"gate": k, **v} if isinstance(v, dict) else v for k, v in value.items()]
        return value

    @field_validator("injection_target")
    @classmethod
    def _not_a_section(cls, value: str | None) -> str | None:
        if value is not None and value.strip() in RESERVED_KEYS:
            raise ValueError(f"{value!r} is a state section, not an injection target")
        return value.strip() if value is not None else None


#: Keys the injection must never overwrite: the sections read here (and their aliases) and the log.
RESERVED_KEYS = frozenset(
    {name for name in AgentState.model_fields if name != "injection_target"}
    | {"current_task", "health_status", INJECTION_LOG_KEY}
)


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the state)"


def parse_state(raw: object) -> AgentState:
    """Validate a decoded state document; :class:`StateError` names what is wrong."""
    if not isinstance(raw, Mapping):
        raise StateError(f"the agent state must be a JSON object, not {type(raw).__name__}")
    try:
        return AgentState.model_validate(dict(raw))
    except ValidationError as exc:
        errors = exc.errors()
        shown = "; ".join(f"{_where(tuple(e['loc']))}: {e['msg']}" for e in errors[:MAX_ERRORS_SHOWN])
        more = f" (and {len(errors) - MAX_ERRORS_SHOWN} more)" if len(errors) > MAX_ERRORS_SHOWN else ""
        raise StateError(f"invalid agent state: {shown}{more}") from exc
