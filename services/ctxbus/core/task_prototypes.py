"""Prototype task descriptions per task type, and ``build_classifier`` that embeds them once.

The prototypes are plain data: short, typical descriptions of each kind of task, written to span
several stacks (web, backend, data, infra, mobile, CLI) so that the semantic signal is about the
kind of work rather than the technology. ``general`` has prototypes too: conversation that is not
a task (greetings, acknowledgements, "go on").
"""

from __future__ import annotations

from collections.abc import Mapping

from ctxbus.contract.payloads import TaskType
from ctxbus.core.classify import ClassifierPolicy, TaskClassifier
from ctxbus.ports import Embedder

PROTOTYPES: Mapping[TaskType, tuple[str, ...]] = {
    TaskType.FEATURE: (
        "Add a new feature so users can do something they could not do before",
        "Implement a new API endpoint that returns the data",
        "Build a settings page where people can change their preferences",
        "Create a command line option to export results",
        "Support a new payment provider in checkout",
        "Add a button to the mobile app that shares the current screen",
        "Introduce email notifications when a job finishes",
    ),
    TaskType.BUGFIX: (
        "Fix the bug that makes the app crash on startup",
        "The request fails with a 500 error, find the cause and fix it",
        "This function returns the wrong result for empty input",
        "The login page is broken after the last deploy",
        "Tests are failing with an exception in the parser",
        "The page does not load and the console shows an error",
        "Memory leak: the worker process grows until it is killed",
    ),
    TaskType.REFACTOR: (
        "Refactor this module to make it easier to read without changing behaviour",
        "Clean up the duplicated code and extract a shared helper",
        "Split this large class into smaller focused classes",
        "Rename the confusing variables and functions",
        "Move the database access behind a repository interface",
        "Simplify the nested conditionals in this function",
        "Reorganize the project structure into separate packages",
    ),
    TaskType.REVIEW: (
        "Review my pull request and point out problems",
        "Take a look at this diff and give me feedback",
        "Check this code for security issues before we merge",
        "Is this implementation correct? Anything I missed?",
        "Do a code review of the changes in this branch",
        "Audit the error handling in this module and list concerns",
        "Critique this design proposal",
    ),
    TaskType.EXPLORE: (
        "How does the authentication flow work in this codebase?",
        "Explain what this module does",
        "Where is the configuration loaded?",
        "Walk me through the architecture of the service",
        "Find where the orders are written to the database",
        "Help me understand how requests are routed",
        "Give me an overview of the repository layout",
    ),
    TaskType.GENERAL: (
        "hey there",
        "thanks, that's great",
        "ok, let's continue",
        "any opinion on that?",
        "carry on",
        "alright, got it",
        "hmm, not sure",
    ),
}


def build_classifier(embedder: Embedder, policy: ClassifierPolicy | None = None) -> TaskClassifier:
    """A ``TaskClassifier`` whose prototypes are ``PROTOTYPES`` embedded with ``embedder`` (in one batch)."""
    order = [(task_type, text) for task_type, texts in PROTOTYPES.items() for text in texts]
    vectors = embedder.embed([text for _, text in order])
    grouped: dict[TaskType, list[list[float]]] = {t: [] for t in PROTOTYPES}
    for (task_type, _), vector in zip(order, vectors, strict=True):
        grouped[task_type].append(vector)
    return TaskClassifier(grouped, policy)
