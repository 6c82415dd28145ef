"""The Workspace conformance suite (tf_fsm.engine.api.RunTree; docs/workspaces.md): what every
tree a ticket's run works in must do, run against each implementation in workspaces.py
(`real_kinds`: the project's own tree and the ticket's git worktree), in real git
repositories, with a real agent process editing real files.

* agents and gates run in `path`: a real directory inside the project holding the project's
  files as the attempt starts, measured against the commit it started from;
* `agent_path` maps every file of the ticket's store under `path`; the agent reads its prompt,
  chain-context.json and the ticket's artifacts there, and what it writes reaches the store,
  redacted on both sides;
* what a phase changed is kept after it; tf_fsm's and tk's bookkeeping (`.tf/`, `.tickets/`)
  never goes into a commit, and stays where it was;
* an interrupted phase's edits, a person's fix for the merge, and a blocked attempt's work
  under a `reset` rollback are never lost (a kept ref is journaled);
* after the outcome a merged ticket leaves nothing behind and an unmerged one keeps its work;
* nothing follows a symlink out of the project, and nothing of the user's is dropped.

Where kinds differ by design (commits, merges, a copy of the ticket's files) each test says
what each kind does, from its `Kind`: nothing is skipped.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conformance.workspaces import (
    FILES,
    PHASES,
    TICKET,
    Agent,
    Attempts,
    Kind,
    committed_paths,
    holding,
    kinds,
    make_project,
    new_run,
    set_aside_refs,
    worktrees,
)
from tests.gitrepo import git, isolate, status
from tf_fsm.conformance.stores import API_KEY
from tf_fsm.core import journal as ev
from tf_fsm.engine.api import OutcomeStatus, RunTree
from tf_fsm.engine.orchestrator import TicketRun
from tf_fsm.errors import TfFsmError

FEATURE = "FEATURE = 'added by the agent'\n"
HALF = "FEATURE = 'half done when the phase was cut off'\n"
KINDS = kinds()


@dataclass
class Setup:
    """One test's project, run and agent; `tree` once the kind opened it."""

    kind: Kind
    root: Path
    start: str  # the commit the project is at when the run begins
    agent: Agent
    run: TicketRun
    attempts: Attempts

    @property
    def tree(self) -> RunTree:
        return self.run.tree

    def feature_in(self, phase: str = "implement", **rule: object) -> None:
        self.agent.edits({"phase": phase, "file": "src/feature.py", "text": FEATURE, **rule})


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> Kind:
    return KINDS[request.param]


@pytest.fixture
def unopened(
    kind: Kind,
    project: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Setup]:
    """pt-1's run in its project, holding the ticket's lock, its tree not yet opened."""
    isolate(monkeypatch)
    start = make_project(project)
    agent = Agent(project, tmp_path_factory.mktemp("agent"), API_KEY)
    run = new_run(project, agent)
    with run.store.lock("the workspace conformance suite"):
        yield Setup(kind, project, start, agent, run, Attempts(run))


@pytest.fixture
def ws(unopened: Setup) -> Setup:
    unopened.run.tree = unopened.kind.open(unopened.run)
    return unopened


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory outside the project, which nothing may write to or read from."""
    directory = tmp_path_factory.mktemp("outside")
    (directory / "secret.txt").write_text("outside the project\n")
    return directory


def within(path: Path, boundary: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(boundary))


def started_head(run: TicketRun, attempt: int) -> str | None:
    starts = [e for e in run.store.read_events().events if isinstance(e, ev.AttemptStarted)]
    return next(e.head for e in starts if e.attempt == attempt)


def branch_of(ws: Setup) -> str:
    return git(ws.tree.path, "symbolic-ref", "HEAD")


def no_bookkeeping_committed(ws: Setup) -> set[str]:
    paths = committed_paths(ws.root, ws.start)
    assert not [p for p in paths if p.startswith((".tf/", ".tickets/"))], paths
    return paths


# -- where the agents run, and what they see -----------------------------------------------


def test_agent_path_maps_every_file_of_the_store_under_the_tree(ws: Setup) -> None:
    store, tree = ws.run.store, ws.tree
    view = tree.agent_path(store.dir)
    for name in (
        "implementation.md",
        "prompts/attempt-1/implement-worker.md",
        "chain-context.json",
        "logs/attempt-1/implement-worker.log",
    ):
        seen = tree.agent_path(store.dir / name)
        assert seen == view / name
        assert within(seen, tree.path), seen
    # a copy inside the tree (a worktree), or the store itself (the project's tree)
    assert (view != store.dir) is ws.kind.mirrors


def test_the_tree_is_a_directory_of_the_project_holding_its_files_as_the_attempt_starts(
    ws: Setup,
) -> None:
    ws.attempts.begin()
    tree = ws.tree
    assert tree.path.is_dir() and within(tree.path, ws.root)
    for name in ("src/app.py", "README.md"):
        assert (tree.path / name).read_text(encoding="utf-8") == FILES[name]
    head = started_head(ws.run, 1)
    if ws.kind.commits:  # a checkout of its own, at the commit the attempt starts from
        assert git(tree.path, "rev-parse", "--show-toplevel") == os.path.realpath(tree.path)
        assert head == git(tree.path, "rev-parse", "HEAD") == ws.start
    else:  # no commits of its own: what it starts from is the tree as it is
        assert head is None
    assert tree.base_commit() == ws.start


def test_the_agent_reads_its_prompt_and_the_tickets_files_and_its_output_reaches_the_store(
    ws: Setup,
) -> None:
    store, tree = ws.run.store, ws.tree
    store.write_artifact("research.md", "# Research: pt-1\n\nThe parser recurses.\n")
    attempt = ws.attempts.begin()
    # the fake agent exits 9 (a failure) unless the prompt file it is given holds its stdin
    # and chain-context.json names its attempt and model
    ws.attempts.phase(attempt, "implement")
    view = tree.agent_path(store.dir)
    assert (view / "research.md").read_text() == store.read_artifact("research.md")
    prompt = "prompts/attempt-1/implement-worker.md"
    assert (view / prompt).read_bytes() == (store.dir / prompt).read_bytes()
    written = store.read_artifact(PHASES["implement"][1])
    assert written is not None and written.startswith(f"# Implementation: {TICKET}")
    assert API_KEY not in written and "[REDACTED" in written
    assert (view / PHASES["implement"][1]).read_text() == written  # no secret on either side


def test_the_agents_view_of_the_ticket_leads_nowhere_out_of_the_project(
    ws: Setup, outside: Path
) -> None:
    store, tree = ws.run.store, ws.tree
    view = tree.agent_path(store.dir)
    if not ws.kind.mirrors:  # the store itself: its paths are the Store suite's
        assert view == store.dir
        return
    call = ws.attempts.phase(ws.attempts.begin(), "implement")
    # the agent leaves a link to a file out of the project among its files
    (view / "notes.md").symlink_to(outside / "secret.txt")
    with suppress(TfFsmError):
        tree.after_invocation(ws.run, call)
    taken = [
        p for p in store.dir.rglob("*") if p.is_file() and "outside the project" in p.read_text()
    ]
    assert taken == []
    # the ticket's directory in the tree now leads out: nothing may be written through it
    shutil.rmtree(view)
    view.symlink_to(outside, target_is_directory=True)
    with suppress(TfFsmError):
        tree.before_invocation(ws.run, call)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


# -- what a phase leaves -------------------------------------------------------------------


def test_what_a_phase_changed_is_kept_after_it_and_the_base_is_untouched(ws: Setup) -> None:
    ws.agent.edits(
        {"phase": "implement", "file": "src/feature.py", "text": FEATURE},
        {"phase": "implement", "file": "src/app.py", "text": "def answer():\n    return 43\n"},
    )
    ws.attempts.phase(ws.attempts.begin(), "implement")
    tree = ws.tree
    for name, text in (
        ("src/feature.py", FEATURE),
        ("src/app.py", "def answer():\n    return 43\n"),
    ):
        places = holding(ws.root, tree, name, text)
        if ws.kind.commits:  # a checkpoint on the ticket's own branch, the tree clean
            assert branch_of(ws) in places and "refs/heads/main" not in places, places
        else:  # nothing committed: it stays in the tree
            assert places == ["tree"]
    if ws.kind.commits:
        assert git(tree.path, "status", "--porcelain", "--", ":!.tf", ":!.tickets") == ""
    else:
        assert committed_paths(ws.root, ws.start) == set()
    assert git(ws.root, "rev-parse", "refs/heads/main") == ws.start
    assert tree.base_commit() == ws.start  # the gate's baseline stays the attempt's start


def test_bookkeeping_never_goes_into_a_commit_and_stays_where_it_was(ws: Setup) -> None:
    tk_edit = "---\nid: pt-1\nstatus: open\n---\n# Edited by the agent\n"
    ws.agent.edits(
        {"phase": "implement", "file": "src/feature.py", "text": FEATURE},
        {"phase": "implement", "file": ".tf/agent-notes.md", "text": "my notes\n"},
        {"phase": "implement", "file": ".tickets/pt-1.md", "text": tk_edit},
    )
    ws.attempts.phase(ws.attempts.begin(), "implement")
    paths = no_bookkeeping_committed(ws)
    assert ("src/feature.py" in paths) is ws.kind.commits
    assert (ws.tree.path / ".tf/agent-notes.md").read_text() == "my notes\n"
    assert (ws.tree.path / ".tickets/pt-1.md").read_text() == tk_edit


# -- work that must never be lost ----------------------------------------------------------


def test_an_interrupted_phases_edits_are_kept_and_the_attempt_resumes_at_its_last_phase(
    ws: Setup,
) -> None:
    ws.agent.edits(
        {"phase": "implement", "file": "src/feature.py", "text": FEATURE},
        {"phase": "review", "file": "src/feature.py", "text": HALF},
        {"phase": "review", "file": "src/half.py", "text": "half = True\n"},
    )
    attempt = ws.attempts.begin()
    ws.attempts.phase(attempt, "implement")
    ws.attempts.phase(attempt, "review", completed=False)  # killed before it was recorded
    head = ws.tree.resume_attempt(ws.run, attempt.number, finished=False)
    journaled = set_aside_refs(ws.run)
    for name, text in (("src/feature.py", HALF), ("src/half.py", "half = True\n")):
        places = holding(ws.root, ws.tree, name, text)
        assert places, f"{name}: the interrupted phase's edit is lost"
        kept = [p for p in places if p.startswith("refs/tf/")]
        assert set(kept) <= journaled, (kept, journaled)
    if ws.kind.commits:  # set aside: the phase runs again from the implement checkpoint
        assert head == git(ws.tree.path, "rev-parse", "HEAD") != ws.start
        assert (ws.tree.path / "src/feature.py").read_text() == FEATURE
        assert not (ws.tree.path / "src/half.py").exists()
    else:  # nothing to go back to: the tree is as the phase left it
        assert head is None
    no_bookkeeping_committed(ws)


def test_a_persons_fix_for_the_merge_is_kept_when_the_attempt_resumes_at_it(ws: Setup) -> None:
    attempt = ws.attempts.begin()
    ws.attempts.phase(attempt, "implement")
    ws.attempts.phase(attempt, "review")
    fixed = "def answer():\n    return 'fixed by hand'\n"
    (ws.tree.path / "src/app.py").write_text(fixed)
    head = ws.tree.resume_attempt(ws.run, attempt.number, finished=True)
    places = holding(ws.root, ws.tree, "src/app.py", fixed)
    if ws.kind.commits:  # committed on the branch, so that the merge takes it
        assert branch_of(ws) in places
        assert head == git(ws.tree.path, "rev-parse", "HEAD")
    else:
        assert places == ["tree"] and head is None


def test_a_reset_rollback_keeps_the_blocked_attempts_work(ws: Setup) -> None:
    ws.feature_in(attempt=1)
    first = ws.attempts.begin()
    ws.attempts.phase(first, "implement")
    (ws.tree.path / "src/wip.py").write_text("wip = 1\n")  # never committed
    ws.attempts.block()
    ws.attempts.begin()  # attempt 2: `workspace.rollback: reset`
    feature = holding(ws.root, ws.tree, "src/feature.py", FEATURE)
    wip = holding(ws.root, ws.tree, "src/wip.py", "wip = 1\n")
    assert feature and wip, (feature, wip)
    if ws.kind.commits:  # back at attempt 1's start, its commits under the ref its prompts name
        assert git(ws.tree.path, "rev-parse", "HEAD") == ws.start == started_head(ws.run, 2)
        assert not (ws.tree.path / "src/feature.py").exists()
        assert ws.tree.kept in feature and ws.tree.kept in set_aside_refs(ws.run)
        assert {p for p in wip if p.startswith("refs/tf/")} <= set_aside_refs(ws.run)
    else:  # no commits to go back to: attempt 2 continues in the blocked attempt's tree
        assert feature == wip == ["tree"] and ws.tree.kept is None
    no_bookkeeping_committed(ws)


# -- after the outcome ---------------------------------------------------------------------


def test_after_the_outcome_a_passed_ticket_leaves_nothing_behind(ws: Setup) -> None:
    ws.feature_in()
    attempt = ws.attempts.begin()
    ws.attempts.phase(attempt, "implement")
    assert ws.tree.merges is ws.kind.merges
    if ws.kind.merges:
        assert ws.run.merge(attempt, "no blocking findings") is None
    ws.tree.after_outcome(ws.run, "closed")
    if ws.kind.merges:  # on the base branch; no worktree, branch or kept ref; nothing to commit
        assert git(ws.root, "show", "refs/heads/main:src/feature.py") + "\n" == FEATURE
        # its worktree waits in the pool for the next ticket, detached: no branch held there
        pooled = ws.tree.path.with_name(".pool-1")
        assert worktrees(ws.root) == [Path(os.path.realpath(p)) for p in (ws.root, pooled)]
        assert git(pooled, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"
        assert not ws.tree.path.exists()
        refs = git(ws.root, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/tf")
        assert refs.splitlines() == ["refs/heads/main"]
        assert status(ws.root) == ""
    else:  # the work stays where it was made, for the person to commit
        assert holding(ws.root, ws.tree, "src/feature.py", FEATURE) == ["tree"]
        assert git(ws.root, "rev-parse", "refs/heads/main") == ws.start


@pytest.mark.parametrize("outcome", ["blocked", "exhausted"])
def test_after_the_outcome_an_unmerged_ticket_keeps_its_work(
    ws: Setup, outcome: OutcomeStatus
) -> None:
    ws.feature_in()
    ws.attempts.phase(ws.attempts.begin(), "implement")
    (ws.tree.path / "src/wip.py").write_text("wip = 1\n")
    ws.tree.after_outcome(ws.run, outcome)
    feature = holding(ws.root, ws.tree, "src/feature.py", FEATURE)
    # still in the tree, or on a branch it can be merged from
    assert [p for p in feature if p == "tree" or p.startswith("refs/heads/tf/")], feature
    assert holding(ws.root, ws.tree, "src/wip.py", "wip = 1\n")
    assert git(ws.root, "rev-parse", "refs/heads/main") == ws.start


def test_nothing_of_the_users_is_dropped(ws: Setup) -> None:
    readme, notes = ws.root / "README.md", ws.root / "my-notes.txt"
    readme.write_text("# The demo project\n\nmy own edit, not committed\n")
    notes.write_text("mine\n")
    ws.feature_in()
    attempt = ws.attempts.begin()
    ws.attempts.phase(attempt, "implement")
    if ws.kind.merges:
        assert ws.run.merge(attempt, "no blocking findings") is None
    ws.tree.after_outcome(ws.run, "closed")
    assert readme.read_text() == "# The demo project\n\nmy own edit, not committed\n"
    assert notes.read_text() == "mine\n"


# -- opening the tree ----------------------------------------------------------------------


def test_opening_the_tree_follows_no_symlink_out_of_the_project(
    unopened: Setup, outside: Path
) -> None:
    (unopened.root / ".tf" / "ralph").symlink_to(outside, target_is_directory=True)
    with suppress(TfFsmError):  # refusing is fine; making anything out there is not
        unopened.run.tree = unopened.kind.open(unopened.run)
        assert within(unopened.tree.path, unopened.root)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
