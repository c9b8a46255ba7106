"""The files an item names, recorded with their hashes and commit in a real git repository, and looked at again:
a deleted or rewritten file makes the item stale, a restored one fresh, an edit leaves it as it is."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ctxbus.adapters import file_refs
from ctxbus.adapters.file_refs import refs_for, relative, restamped, with_files
from ctxbus.memory.model import MemoryItem, MemoryKind

AT = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
CODE = "".join(f"def step_{n}(x):\n    return x + {n}\n\n" for n in range(10))


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "app" / "auth").mkdir(parents=True)
    (root / "app" / "auth" / "reset.py").write_text(CODE)
    (root / "app" / "money.py").write_text("CENTS = 100\n")
    git(root, "init", "-q")
    git(root, "-c", "user.email=t@example.com", "-c", "user.name=t", "add", ".")
    git(root, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "init")
    return root


def item(content: str) -> MemoryItem:
    return MemoryItem(id="reset", project="acme/web", kind=MemoryKind.PRINCIPLE, content=content)


def test_an_imported_item_names_the_existing_files_it_mentions_with_hash_and_commit(repo: Path) -> None:
    (repo / "app" / "money.py").write_text("CENTS = 100  # edited, not committed\n")
    (stamped,) = with_files(
        [item("The reset flow lives in app/auth/reset.py; cents in app/money.py; not x/y.py")], repo
    )
    refs = {r.path: r for r in stamped.files}
    assert set(refs) == {"app/auth/reset.py", "app/money.py"}  # x/y.py does not exist: not named
    assert refs["app/auth/reset.py"].commit == git(repo, "rev-parse", "HEAD")
    assert refs["app/money.py"].commit is None  # changed since the commit: its hash only
    assert all(r.sha256 and len(r.sha256) == 64 for r in refs.values())
    assert with_files([item("no paths here")], repo)[0].files == ()


def test_deleting_a_named_file_makes_the_item_stale_and_restoring_it_fresh(repo: Path) -> None:
    (stamped,) = with_files([item("see app/auth/reset.py")], repo)
    assert restamped([stamped], repo, AT) == []
    (repo / "app" / "auth" / "reset.py").unlink()
    (stale,) = restamped([stamped], repo, AT)
    assert stale.stale == "deleted: app/auth/reset.py" and stale.stale_since == AT
    assert restamped([stale], repo, AT) == []  # already marked: nothing to send again
    (repo / "app" / "auth" / "reset.py").write_text(CODE)
    (fresh,) = restamped([stale], repo, AT)
    assert fresh.stale is None and fresh.stale_since is None


def test_a_rewrite_past_recognition_is_stale_and_an_edit_is_not(repo: Path) -> None:
    (stamped,) = with_files([item("see app/auth/reset.py")], repo)
    target = repo / "app" / "auth" / "reset.py"
    target.write_text(CODE.replace("return x + 3", "return x + 33"))  # an edit: most lines remain
    assert restamped([stamped], repo, AT) == []
    target.write_text("class Reset:\n    pass\n")  # rewritten
    (stale,) = restamped([stamped], repo, AT)
    assert stale.stale is not None and stale.stale.startswith("rewritten: app/auth/reset.py (")


def test_paths_outside_the_root_are_not_named(repo: Path, tmp_path: Path) -> None:
    assert relative(str(repo / "app" / "money.py"), repo) == "app/money.py"
    assert relative(str(tmp_path / "elsewhere.py"), repo) is None
    assert relative("../secrets.py", repo) is None
    assert refs_for(["/etc/hostname", "../x.py"], repo) == ()


def test_a_file_many_items_name_is_read_once_in_a_pass(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (stamped,) = with_files([item("see app/auth/reset.py and app/money.py")], repo)
    many = [stamped.model_copy(update={"id": f"reset-{n}"}) for n in range(50)]
    reads: list[Path] = []
    real = file_refs._read

    def counting(path: Path) -> bytes | None:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(file_refs, "_read", counting)
    (repo / "app" / "money.py").write_text("import decimal\n" * 40)  # rewritten past recognition
    changed = restamped(many, repo, AT)
    assert len(changed) == 50 and all(i.stale == changed[0].stale for i in changed)
    assert sorted(p.name for p in reads) == ["money.py", "reset.py"]
