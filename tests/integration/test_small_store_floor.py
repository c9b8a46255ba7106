"""The relevance floor in the store every user starts with: one team's ten conventions, imported from a
markdown file (one item per heading). Paraphrased prompts about a convention get it; prompts about nothing
in the store get nothing (issue 21: the floor fitted on one 364-memory store turned away the clear winner of
a small store, "Fix login after password reset" next to "Password reset must invalidate every session")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ctxbus.api import Memory
from ctxbus.bench.store_sizes import PREVIOUS
from ctxbus.components import floor_policy, retriever_handler
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.core.abstain import Evidence, relevance
from ctxbus.memory.markdown_file import parse_markdown
from ctxbus.observability import Metrics
from ctxbus.retriever.request_scope import profile_for
from ctxbus.settings import Settings

pytestmark = pytest.mark.integration

PROJECT = "acme-web"
CONVENTIONS = """# Acme web team conventions

## Password reset must invalidate every session
When a user resets their password, delete every row of `user_sessions` for that user and revoke their refresh
tokens, so a stolen session cannot outlive the reset. See `app/auth/reset.py`.

## Money is stored as integer cents
Prices, totals and refunds are `int` cents in the database and the API; never floats. Format with
`format_money()` only at the edge.

## Feature flags live in LaunchDarkly, never in env vars
New behaviour ships behind a flag in LaunchDarkly (`flags.py` wraps the client). Remove the flag within two
sprints of full rollout.

## Database migrations are backwards compatible
Every Alembic migration must work with the previous release still running: add columns nullable, backfill in
a separate job, and drop columns one release later.

## Log lines are structured JSON with a request id
Use `structlog` via `app/logging.py`; every line carries `request_id`. No `print` and no f-string messages.

## Background jobs are idempotent
Celery tasks may run twice: guard side effects with an idempotency key stored in Redis for 24 h.

## Public endpoints are rate limited
Every unauthenticated route goes through the `rate_limit` decorator: 60 requests per minute per IP, 429 with
a Retry-After header beyond that.

## Times are UTC in storage and local only in the UI
Store `timestamptz` in UTC; convert to the user's time zone in the React components with `formatInZone`.

## Pull requests need a test for every bug fix
A bug fix PR includes a regression test that fails without the fix; reviewers reject it otherwise.

## Secrets come from Vault
Never commit credentials or put them in `.env` files; read them at start-up from Vault through
`app/secrets.py`.
"""

#: the README's example: the prompt and the convention it needs
EXAMPLE = ("Fix login after password reset", "conventions#password-reset-must-invalidate-every-session")
#: prompts about nothing in the store
UNRELATED = (
    "what's the weather like in Lisbon today?",
    "write a haiku about autumn",
    "explain how quicksort works",
)


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    root = tmp_path_factory.mktemp("small-store")
    conventions = root / "conventions.md"
    conventions.write_text(CONVENTIONS, encoding="utf-8")
    parsed = parse_markdown(conventions, project=PROJECT)
    assert not parsed.errors and len(parsed.items) == 10
    with Memory.open(Settings(data_dir=root / "data")) as opened:
        opened.add(parsed.items)
        yield opened


def test_the_readme_example_gets_its_convention(memory: Memory) -> None:
    prompt, convention = EXAMPLE
    found = memory.search(PROJECT, prompt, k=5, abstain=True)
    assert [hit.id for hit in found.items][:1] == [convention], found.notice


def test_the_floor_fitted_on_one_large_store_turned_it_away(memory: Memory) -> None:
    """The defect: the previous floor (no store size, the margin over a pack that is the whole store held
    against the clear winner) abstained on the example; the same evidence passes the size-aware one."""
    prompt, convention = EXAMPLE
    evidence = _evidence(memory, prompt)
    assert evidence.best_id == convention and evidence.store_size == 10
    previous = relevance(evidence, PREVIOUS)
    current = relevance(evidence, floor_policy(Settings().injection))
    assert previous is not None and not previous.passes
    assert current is not None and current.passes


def _evidence(memory: Memory, prompt: str) -> Evidence:
    request = RetrievalRequested(agent_name="test", prompt=prompt, max_items=5, trigger=Trigger.USER_PROMPT)
    handler = retriever_handler(memory.settings, memory.embedder, memory.store, Topics("t"), Metrics())
    found = handler.retrieve(PROJECT, "s", request, profile_for(request), abstain=True)
    assert found.evidence is not None
    return found.evidence


@pytest.mark.parametrize("prompt", UNRELATED)
def test_a_prompt_about_nothing_in_the_store_gets_nothing(memory: Memory, prompt: str) -> None:
    found = memory.search(PROJECT, prompt, k=5, abstain=True)
    assert [hit.id for hit in found.items] == []
