"""Which consumer group each consumer loop of a member is in.

A service's request-path loops (``retriever``, ``injector``, ``recorder``, and ``memory`` on a shared Qdrant
server) share one group per loop: the members split the partitions, each record is handled once. The loops that
build a member's own state from a topic (learning, attempts and task closures, curation, the embedded store's
copy) are each in a group of one, named after the state file's id: every member reads every record and reaches
the same state, and a state file that is new (a new member, a lost data directory) is a new group that reads its
topic from the start (docs/fleet.md).
"""

from __future__ import annotations

from ctxbus.adapters.attempt_store import AttemptStore
from ctxbus.adapters.curation_ledger import CurationLedger
from ctxbus.adapters.learning_ledger import LearningLedger
from ctxbus.settings import Settings


def consumer_group(topic_prefix: str, loop: str) -> str:
    """The consumer group of a service's consumer loop: every process running it is a member (the loop named
    like its service, ``retriever`` or ``injector``, is the one that consumes the service's main input)."""
    return f"{topic_prefix}.{loop}"


def state_group(topic_prefix: str, loop: str, state_id: str) -> str:
    """The consumer group of a loop that builds a member's own state from a whole topic (learning, attempts,
    curation, an embedded store's copy): a group of one, so every member reads every record and reaches the same
    state; named after the state file's id (``ctxbus.adapters.sqlite.state_id``), so the group's offsets live as
    long as the state they describe (docs/fleet.md)."""
    return f"{topic_prefix}.{loop}.{state_id}"


def member_groups(settings: Settings) -> dict[str, str]:
    """Loop -> consumer group, for a member on the data directory of ``settings`` (its state files are opened to
    read their ids, and made when missing): for tools and tests that watch a member's loops."""
    p = settings.topic_prefix
    groups = {loop: consumer_group(p, loop) for loop in ("retriever", "injector", "recorder", "memory")}
    ledger, curation, attempts = (
        LearningLedger(settings.learning_db),
        CurationLedger(settings.curation_db),
        AttemptStore(settings.attempts_db),
    )
    try:
        groups |= {loop: state_group(p, loop, ledger.state_id) for loop in ("learning-injections", "learning-outcomes")}
        groups["memory-curation"] = state_group(p, "memory-curation", curation.state_id)
        if not settings.qdrant.url:  # every embedded copy takes every upsert
            groups["memory"] = state_group(p, "memory", curation.state_id)
        groups |= {loop: state_group(p, loop, attempts.state_id) for loop in ("attempts", "task-outcomes")}
    finally:
        ledger.close()
        curation.close()
        attempts.close()
    return groups
