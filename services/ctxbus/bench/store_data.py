"""The stores of ``ctxbus bench retrieval --store-sizes`` and the prompts each is judged on (pure: files in,
store plans out; nothing is embedded or searched here).

Two kinds of store, at every size of :data:`SIZES`:

- **labelled**: memories of one project's scope (the project and the global scope) of the labelled set
  (``data/retrieval/memories.jsonl``), a random subset for the small sizes; from 400 on, the whole scope
  and other teams' memories (``padding.jsonl``, distant domains, relevant to no labelled prompt) to fill.
  A graded query is *on topic* in a store that holds an item it grades 3 (the memory it needs), and its
  relevant items are the ones it grades that the store holds; a graded query none of whose graded items
  is in the store is left out (its neighbours may still be about it: the grades list only the best), and
  so is one with only weaker items in the store. The null prompts of the project (``null_queries*.jsonl``,
  meta prompts aside: they are recognised by rule) are null in every store of it.
- **team**: one team's conventions, imported from its markdown file as a user would (one item per
  heading), with that team's on-topic prompts (paraphrased, graded to the conventions they need) and null
  prompts (``data/stores/<set>/``); at their own size (5-15) and grown with padding to the larger sizes (never
  with padding of the team's own field).

Padding is ungraded: in the large stores a null prompt may meet another team's note that is about it after all
(a chore such as "bump the version" next to another team's note on version bumps), so the false injection rates
of the padded sizes are upper bounds.

Every prompt belongs to a *set*: ``fit`` (what a floor may be fitted on: ``queries.jsonl``,
``null_queries.jsonl`` and the ``fit`` teams) or ``held_out`` (the held-out graded and null files and the
``heldout`` teams, written by others and never tuned on).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxbus.memory.markdown_file import parse_markdown
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem

RETRIEVAL_DIR = Path(__file__).resolve().parent / "data" / "retrieval"
STORES_DIR = Path(__file__).resolve().parent / "data" / "stores"
#: the store sizes judged (a store is reported under the nearest on a log scale: 5-7 items as 5, 8-17 as 10)
SIZES = (5, 10, 30, 100, 400, 2000)
FIT = "fit"
HELD_OUT = "held_out"
#: the team sets (directory under ``data/stores/``) and the set their prompts belong to
TEAM_SETS = {"fit": FIT, "heldout": HELD_OUT}
#: the labelled files of each set
LABELLED_QUERIES = {
    FIT: ("queries.jsonl",),
    HELD_OUT: (
        "queries_heldout.jsonl",
        "queries_heldout2.jsonl",
        "queries_heldout3.jsonl",
        "queries_heldout4.jsonl",
    ),
}
LABELLED_NULLS = {
    FIT: ("null_queries.jsonl",),
    HELD_OUT: ("null_queries_heldout.jsonl", "null_queries_heldout2.jsonl", "null_queries_heldout3.jsonl"),
}
#: random subsets drawn per project and size (small stores vary most from one draw to the next)
DRAWS = {5: 8, 10: 6, 30: 4, 100: 2}
#: the grade that makes a graded query on topic in a store
NEEDED_GRADE = 3


@dataclass(frozen=True, slots=True)
class Prompt:
    id: str
    query: str
    set: str
    #: item ids -> grade (empty: a null prompt)
    relevant: dict[str, int]
    #: near_miss, chore, smalltalk, other_stack, topic ... for null prompts; the query category for graded ones
    category: str = ""


@dataclass(frozen=True, slots=True)
class StorePlan:
    """One store: its items (already under the plan's project) and the prompts it is judged on."""

    name: str
    kind: str
    size: int
    project: str
    items: tuple[MemoryItem, ...]
    prompts: tuple[Prompt, ...] = field(default=())


def size_bucket(n: int) -> int:
    """The size of :data:`SIZES` a store of ``n`` items is reported under (the nearest on a log scale)."""
    return min(SIZES, key=lambda s: (abs(math.log(max(n, 1) / s)), s))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_padding(path: Path = RETRIEVAL_DIR / "padding.jsonl") -> list[MemoryItem]:
    """Other teams' memories (distant domains): filler for the larger stores."""
    if not path.exists():
        return []
    return [MemoryItem.model_validate(raw) for raw in _jsonl(path)]


def _moved(items: Sequence[MemoryItem], project: str) -> list[MemoryItem]:
    """Padding placed under ``project`` (ids kept: they never clash with the labelled or team ids)."""
    return [item.model_copy(update={"project": project}) for item in items]


def labelled_prompts(project: str, data_dir: Path = RETRIEVAL_DIR) -> list[tuple[Prompt, bool]]:
    """The project's graded queries and null prompts of every set; the flag: a null prompt."""
    out: list[tuple[Prompt, bool]] = []
    for which, names in LABELLED_QUERIES.items():
        for name in names:
            for raw in _jsonl(data_dir / name) if (data_dir / name).exists() else ():
                if raw["project"] == project:
                    relevant = {str(k): int(v) for k, v in raw["relevant"].items()}
                    out.append((Prompt(raw["id"], raw["query"], which, relevant, raw.get("category", "")), False))
    for which, names in LABELLED_NULLS.items():
        for name in names:
            for raw in _jsonl(data_dir / name) if (data_dir / name).exists() else ():
                if raw["project"] == project and raw.get("category") != "meta":
                    out.append((Prompt(raw["id"], raw["query"], which, {}, raw.get("category", "topic")), True))
    return out


def judged_in(prompts: Sequence[tuple[Prompt, bool]], held: set[str]) -> tuple[Prompt, ...]:
    """The prompts a store holding ``held`` is judged on: null prompts, and graded queries on topic in it
    (their relevance cut to what the store holds)."""
    out = []
    for prompt, null in prompts:
        if null:
            out.append(prompt)
            continue
        if not any(grade >= NEEDED_GRADE and item in held for item, grade in prompt.relevant.items()):
            continue
        out.append(
            Prompt(
                prompt.id,
                prompt.query,
                prompt.set,
                {i: g for i, g in prompt.relevant.items() if i in held},
                prompt.category,
            )
        )
    return tuple(out)


def labelled_stores(
    memories: Sequence[MemoryItem],
    padding: Sequence[MemoryItem],
    *,
    sizes: Sequence[int] = SIZES,
    seed: int = 21,
    data_dir: Path = RETRIEVAL_DIR,
) -> list[StorePlan]:
    """Stores of one project's scope at every size (random subsets, then the whole scope and padding)."""
    rng = random.Random(seed)
    projects = sorted({m.project for m in memories} - {GLOBAL_PROJECT})
    plans = []
    for project in projects:
        scope = [m for m in memories if m.project in (project, GLOBAL_PROJECT)]
        prompts = labelled_prompts(project, data_dir)
        for size in sizes:
            if size < len(scope):
                draws = [rng.sample(scope, size) for _ in range(DRAWS.get(size, 1))]
            else:
                fill = max(0, size - len(scope))
                draws = [scope + _moved(rng.sample(list(padding), min(fill, len(padding))), project)]
            for number, items in enumerate(draws, start=1):
                held = {m.id for m in items}
                plans.append(
                    StorePlan(
                        f"{project}@{size}#{number}",
                        "labelled",
                        size_bucket(len(items)),
                        project,
                        tuple(items),
                        judged_in(prompts, held),
                    )
                )
    return plans


def team_prompts(directory: Path, which: str) -> dict[str, list[Prompt]]:
    """A team set's prompts, by store (team slug)."""
    by_store: dict[str, list[Prompt]] = {}
    for raw in _jsonl(directory / "prompts.jsonl"):
        relevant = {str(i): NEEDED_GRADE for i in raw.get("relevant", [])} if raw.get("kind") == "on_topic" else {}
        prompt = Prompt(raw["id"], raw["query"], which, relevant, raw.get("category", "on_topic"))
        by_store.setdefault(raw["store"], []).append(prompt)
    return by_store


def _same_field(team: str, project: str) -> bool:
    """A padding project in the team's own field (a word of its name in the team's: ``game-engine`` padding
    for a game engine team), whose notes may well be about the team's prompts: never its padding."""
    return bool(set(team.split("-")) & set(project.split("-")))


def team_stores(
    padding: Sequence[MemoryItem],
    *,
    sizes: Sequence[int] = SIZES,
    seed: int = 27,
    stores_dir: Path = STORES_DIR,
) -> list[StorePlan]:
    """Every team's conventions at their own size, and grown with padding to the sizes above it."""
    rng = random.Random(seed)
    plans = []
    for directory_name, which in TEAM_SETS.items():
        directory = stores_dir / directory_name
        if not (directory / "prompts.jsonl").exists():
            continue
        prompts = team_prompts(directory, which)
        for path in sorted(directory.glob("*.md")):
            if path.name.lower() == "readme.md":
                continue
            team = path.stem
            parsed = parse_markdown(path, project=team)
            if parsed.errors:
                raise ValueError(f"{path}: {parsed.errors[0]}")
            own = list(parsed.items)
            judged = tuple(prompts.get(team, ()))
            filler = [m for m in padding if not _same_field(team, m.project)]
            plans.append(StorePlan(f"{team}@own", "team", size_bucket(len(own)), team, tuple(own), judged))
            for size in sizes:
                if size <= len(own) * 2 or not filler:
                    continue
                fill = _moved(rng.sample(filler, min(size - len(own), len(filler))), team)
                plans.append(
                    StorePlan(f"{team}@{size}", "team", size_bucket(len(own) + len(fill)), team, (*own, *fill), judged)
                )
    return plans
