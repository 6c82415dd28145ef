"""What a real run fsyncs: the journal once per phase, the tk file's data, one syncfs at the
end; no view (retry state, chain context, reports, copies) is fsynced on its own.

os.fsync, os.replace and tf_fsm.fs.atomic.sync_filesystem are wrapped to *record* the calls
(the real calls still run, on real files): a lifecycle through the orchestrator is then
checked against the store's rule (docs/retry-state.md, "Durability").
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.test_orchestrator import MAJOR_HARD, run, setup, state, store
from tf_fsm.core.journal import PhaseCompleted, ViewSaved, ViewsSynced
from tf_fsm.fs import atomic

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir(), reason="needs /proc to name an fd"
)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """("fsync" | "rename" | "syncfs", path), in the order the process made them."""
    seen: list[tuple[str, str]] = []
    real_fsync, real_replace, real_syncfs = os.fsync, os.replace, atomic.sync_filesystem

    def fsync(fd: int) -> None:
        seen.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: Any, dst: Any, **kw: Any) -> None:
        real_replace(src, dst, **kw)
        seen.append(("rename", os.path.realpath(dst)))

    def syncfs(path: Path) -> None:
        seen.append(("syncfs", os.path.realpath(path)))
        real_syncfs(path)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(atomic, "sync_filesystem", syncfs)
    return seen


def test_only_the_journal_is_fsynced_while_the_run_works(
    project: Path, calls: list[tuple[str, str]]
) -> None:
    setup(project, {"findings": [MAJOR_HARD]})
    outcome = run(project)
    assert (outcome.status, outcome.attempts_run) == ("closed", 2)
    ticket_dir = os.path.realpath(store(project).dir)
    journal = os.path.join(ticket_dir, "events.jsonl")
    tk_file = os.path.realpath(project / ".tickets/pt-1.md")
    fsynced = [path for kind, path in calls if kind == "fsync"]
    # directories only where the journal was created (its entry must be findable)
    dirs = {p for p in fsynced if os.path.isdir(p)}
    assert dirs <= {ticket_dir, os.path.dirname(ticket_dir)}
    others = [p for p in fsynced if p not in dirs and p != journal]
    # the tk file is the user's text: its data (the temp file) is fsynced before each rename,
    # at the start and at the close
    assert len(others) == 2 and all(
        os.path.dirname(p) == os.path.dirname(tk_file)
        and os.path.basename(p).startswith(".pt-1.md.")
        for p in others
    ), others
    phases = sum(isinstance(e, PhaseCompleted) for e in store(project).read_events().events)
    assert fsynced.count(journal) <= phases + 3  # one per phase, and the first images
    # views were written: renamed, never fsynced
    renamed = {os.path.basename(p) for kind, p in calls if kind == "rename"}
    assert {"retry-state.json", "chain-context.json", "review.md"} <= renamed
    assert not any(os.path.basename(p).startswith(".retry-state.json") for p in fsynced)
    # a durable point at each attempt's end, before the journal says it ended (nothing re-makes
    # an ended attempt's files: the next attempt stands on its implementation.md), and one at
    # the end, after every write
    syncs = [i for i, (kind, _) in enumerate(calls) if kind == "syncfs"]
    assert len(syncs) == outcome.attempts_run + 1
    last_rename = max(i for i, (kind, _) in enumerate(calls) if kind == "rename")
    assert syncs[-1] > last_rename and calls[syncs[-1]] == ("syncfs", ticket_dir)
    closing_tk = max(i for i, (kind, p) in enumerate(calls) if kind == "rename" and p == tk_file)
    assert syncs[-2] < closing_tk  # the close's reports were durable before the tk file closed
    second_prompt = next(
        i for i, (kind, p) in enumerate(calls) if kind == "rename" and "/prompts/attempt-2/" in p
    )
    assert syncs[0] < second_prompt  # attempt 1's files were durable before attempt 2 began


def test_the_journal_holds_the_views_and_ends_with_the_durable_point(project: Path) -> None:
    setup(project, {"findings": [MAJOR_HARD]})
    run(project)
    events = store(project).read_events().events
    assert isinstance(events[-1], ViewsSynced)
    images = [e for e in events if isinstance(e, ViewSaved)]
    last = {e.file: e.content for e in images}
    assert last["retry-state.json"] == state(project).to_json_dict()
    chain = (store(project).dir / "chain-context.json").read_text()
    assert last["chain-context.json"]["attempt"] == 2 and '"attempt": 2' in chain
    # every phase's completion names the files it wrote, with their sha256
    review = [e for e in events if isinstance(e, PhaseCompleted) and e.phase == "review"]
    assert review and review[-1].files and "review.md" in review[-1].files
    assert any(name.startswith("prompts/attempt-2/") for name in review[-1].files)


def test_an_unflushed_event_is_visible_at_once_and_durable_by_the_end_of_the_batch(
    project: Path, calls: list[tuple[str, str]]
) -> None:
    from datetime import UTC, datetime

    from tf_fsm.core.journal import PhaseStarted, timestamp

    s = store(project)
    event = PhaseStarted(
        ts=timestamp(datetime.now(UTC)), ticket="pt-1", attempt=1, phase="review", roles=[]
    )
    with s.lock(), s.batch():
        s.append_event(event, durable=False)
        assert [e.event for e in s.read_events().events] == ["PhaseStarted"]  # status sees it
        journal = os.path.realpath(s.journal_path)
        assert ("fsync", journal) not in calls
        assert not any(kind == "syncfs" for kind, _ in calls)
    assert ("syncfs", os.path.realpath(s.dir)) in calls  # the batch's end made it durable
    assert [e.event for e in s.read_events().events] == ["PhaseStarted", "ViewsSynced"]


def test_the_first_image_of_each_view_is_on_disk_before_the_view(
    project: Path, calls: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A view on disk always has an image a power cut cannot take: when the run first writes
    retry-state.json and chain-context.json, a journal fsync has covered an image of each (an
    attempt's start saves both, and one fsync covers the two)."""
    setup(project, {})
    journal = os.path.realpath(store(project).journal_path)
    durable: set[str] = set()  # views with an image in the journal as last fsynced
    first_write: dict[str, set[str]] = {}  # view -> the views durable when it was first written
    recording_fsync, recording_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        recording_fsync(fd)
        if os.readlink(f"/proc/self/fd/{fd}") == journal:
            lines = Path(journal).read_text().splitlines()
            durable.update(json.loads(ln)["file"] for ln in lines if '"ViewSaved"' in ln)

    def replace(src: Any, dst: Any, **kw: Any) -> None:
        recording_replace(src, dst, **kw)
        first_write.setdefault(os.path.basename(dst), set(durable))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    assert run(project).status == "closed"
    journal_fsyncs = [i for i, (kind, p) in enumerate(calls) if (kind, p) == ("fsync", journal)]
    for view in ("chain-context.json", "retry-state.json"):
        assert view in first_write[view], view
        first = next(i for i, (kind, p) in enumerate(calls) if p.endswith("/" + view))
        assert journal_fsyncs[0] < first, view
