"""The data plane across hosts: each phase of a ticket run by `run_phase` on one of two clones
of a shared remote (a bare repository), on the files the history holds, published with one
fenced push; the merge by `merge_ticket`, which pushes the merged base."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from temporalio.exceptions import ApplicationError

from tests.conftest import run_cli
from tests.gitrepo import git
from tests.temporal.hosts import TICKET, Hosts, make_hosts, run_activity
from tf_fsm.temporal.fence import owner_ref
from tf_fsm.temporal.knowledge import knowledge_ref
from tf_fsm.temporal.orders import PhaseReport, TicketFiles
from tf_fsm.temporal.workflow import NOT_RETRYABLE

BRANCH = f"refs/heads/tf/{TICKET}"


@pytest.fixture
def hosts(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Hosts:
    return make_hosts(project, tmp_path, monkeypatch)


def phase(hosts: Hosts, clone: Path, files: TicketFiles, activity_id: str) -> PhaseReport:
    report: PhaseReport = run_activity(
        hosts.activities(clone).run_phase, hosts.order(files), activity_id=activity_id
    )
    return report


def events(lines: list[str], kind: str) -> list[dict[str, object]]:
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def remote_refs(hosts: Hosts) -> dict[str, str | None]:
    return {
        ref: hosts.remote_ref(ref) for ref in (BRANCH, knowledge_ref(TICKET), owner_ref(TICKET))
    }


def test_a_phase_on_a_second_host_resumes_at_the_first_hosts_checkpoint(hosts: Hosts) -> None:
    first = phase(hosts, hosts.a, TicketFiles(), "phase-1")
    assert (first.status, first.phase, first.host) == ("paused", "implement", "host-a")
    [checkpoint] = events(first.journal, "CheckpointCommitted")
    assert first.files.branch == checkpoint["sha"] == hosts.remote_ref(BRANCH)
    assert first.files.knowledge == hosts.remote_ref(knowledge_ref(TICKET))
    assert first.files.journal == first.journal  # the first phase: every line is new

    second = phase(hosts, hosts.b, first.files, "phase-2")

    assert (second.status, second.phase, second.host) == ("paused", "review", "host-b")
    assert second.files.journal == first.files.journal + second.journal
    assert events(second.journal, "AttemptResumed")[0]["phase"] == "review"
    # in host B's own worktree, made from the branch at host A's checkpoint
    [ready] = events(second.journal, "WorkspaceReady")
    tree = hosts.b / ".tf/ralph/worktrees" / TICKET
    assert ready["path"] == str(tree)
    assert git(tree, "rev-parse", "HEAD") == checkpoint["sha"]
    assert (tree / "work.txt").exists()  # what host A's implement wrote
    assert dict(hosts.calls()) == {
        (1, "implement", "worker"): 1,
        (1, "review", "reviewer-general"): 1,
    }
    # the artifacts of both phases in one knowledge commit, on top of the first's
    knowledge = second.files.knowledge
    assert knowledge is not None and knowledge == hosts.remote_ref(knowledge_ref(TICKET))
    assert git(hosts.b, "rev-parse", f"{knowledge}^") == first.files.knowledge
    names = git(hosts.b, "ls-tree", "-r", "--name-only", knowledge).splitlines()
    assert {"implementation.md", "review.md"} <= set(names)
    assert not {"events.jsonl", "retry-state.json", "chain-context.json", ".lock"} & set(names)
    assert second.step.action == "resume"  # verify runs next


def test_a_stale_try_pushes_nothing_and_fails(hosts: Hosts) -> None:
    first = phase(hosts, hosts.a, TicketFiles(), "phase-1")
    second = phase(hosts, hosts.b, first.files, "phase-2")
    phase(hosts, hosts.a, second.files, "phase-3")
    before, calls = remote_refs(hosts), hosts.calls()

    # a try sent the files the history held before phase 2, once phase 3 was published
    with pytest.raises(ApplicationError, match="stale") as refused:
        phase(hosts, hosts.b, first.files, "phase-2-again")

    assert refused.value.non_retryable and refused.value.type == NOT_RETRYABLE
    assert remote_refs(hosts) == before
    assert hosts.calls() == calls  # no agent ran


def test_a_phase_whose_completion_was_lost_is_not_run_again(hosts: Hosts) -> None:
    """Try 1 published and its completion never reached the history; try 2 of the phase, on
    the other host, finds that publication on the remote and returns its report: the phase
    is not run again, nothing more is published."""
    first = phase(hosts, hosts.a, TicketFiles(), "phase-1")
    lost = phase(hosts, hosts.b, first.files, "phase-2")
    journal = hosts.a / ".tf/knowledge/tickets" / TICKET / "events.jsonl"
    before = journal.read_text()
    order = hosts.order(first.files)
    again: PhaseReport = run_activity(
        hosts.activities(hosts.a).run_phase, order, activity_id="phase-2", attempt=2
    )
    assert again == lost  # its report, host and files: the same
    assert again.phase == "review"
    assert hosts.remote_ref(knowledge_ref(TICKET)) == lost.files.knowledge
    assert journal.read_text() == before  # nothing ran on host A


def test_the_journal_rewritten_from_the_history_replaces_a_longer_local_one(
    hosts: Hosts,
) -> None:
    first = phase(hosts, hosts.a, TicketFiles(), "phase-1")
    # host A ran the review on its own, never published (the history refused that try),
    # and left an edit in the worktree
    done = run_cli("run", TICKET, "--once", "--phases", "1", "--json", "--root", str(hosts.a))
    assert done.returncode == 0, done.stderr
    tree = hosts.a / ".tf/ralph/worktrees" / TICKET
    (tree / "leftover.txt").write_text("half done\n")
    journal = hosts.a / ".tf/knowledge/tickets" / TICKET / "events.jsonl"
    assert len(journal.read_text().splitlines()) > len(first.files.journal)

    second = phase(hosts, hosts.a, first.files, "phase-2")

    kept = journal.read_text().splitlines()
    assert kept == second.files.journal and kept[: len(first.files.journal)] == first.files.journal
    assert len(events(kept, "PhaseStarted")) == 2  # implement, and the review run here
    assert second.phase == "review"
    aside = git(hosts.a, "for-each-ref", "--format=%(refname)", f"refs/tf/{TICKET}/")
    assert f"refs/tf/{TICKET}/refused-uncommitted" in aside.splitlines()
    assert not (tree / "leftover.txt").exists()


def run_to_merge(hosts: Hosts) -> TicketFiles:
    files, clones, n = TicketFiles(), (hosts.a, hosts.b), 0
    while True:
        n += 1
        report = phase(hosts, clones[n % 2], files, f"phase-{n}")
        files = report.files
        if report.status != "paused":
            assert report.status == "awaiting_merge", report
            return files
        assert n < 10, report


def test_merge_ticket_pushes_the_merged_base(hosts: Hosts) -> None:
    files = run_to_merge(hosts)
    before = hosts.remote_ref("refs/heads/main")

    merged = run_activity(
        hosts.activities(hosts.b).merge_ticket, hosts.merge_order(files), activity_id="merge"
    )

    assert (merged.status, merged.host) == ("merged", "host-b"), merged.reason
    assert merged.base_sha == hosts.remote_ref("refs/heads/main") != before
    assert git(hosts.remote, "merge-base", "--is-ancestor", str(before), merged.base_sha) == ""
    shown = git(hosts.remote, "show", f"{merged.base_sha}:work.txt")
    assert shown  # the ticket's work is on the remote's base
    assert hosts.remote_ref(BRANCH) is None and merged.files.branch is None
    assert merged.step.action == "already_closed"  # nothing runs next


def test_a_clone_whose_base_has_commits_of_its_own_is_refused(hosts: Hosts) -> None:
    files = run_to_merge(hosts)
    (hosts.b / "mine.txt").write_text("local\n")
    git(hosts.b, "add", "mine.txt")
    git(hosts.b, "commit", "-q", "-m", "a commit of host B only")
    before = remote_refs(hosts)

    with pytest.raises(ApplicationError, match="a commit of host B only") as refused:
        run_activity(
            hosts.activities(hosts.b).merge_ticket, hosts.merge_order(files), activity_id="m"
        )
    assert refused.value.non_retryable
    assert remote_refs(hosts)[BRANCH] == before[BRANCH]


def test_a_try_taken_over_while_it_ran_publishes_nothing(hosts: Hosts, tmp_path: Path) -> None:
    """Try 1 (host A) is still in its review when the phase is retried on host B (as after
    a heartbeat timeout: a frozen worker woken up later); try 2 takes the ticket over and
    publishes. Try 1's publication, when its run ends, pushes nothing."""
    first = phase(hosts, hosts.a, TicketFiles(), "phase-1")
    plan = json.loads((tmp_path / "agent/plan.json").read_text())
    plan["pause"] = [{"phase": "review", "seconds": 2}]
    (tmp_path / "agent/plan.json").write_text(json.dumps(plan))
    order = hosts.order(first.files)
    outcome: dict[str, object] = {}
    beats: list[str] = []

    def zombie() -> None:
        try:
            run_activity(
                hosts.activities(hosts.a).run_phase, order, activity_id="phase-2", heartbeats=beats
            )
        except ApplicationError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=zombie)
    thread.start()
    deadline = time.monotonic() + 30
    while (1, "review", "reviewer-general") not in hosts.calls():
        assert time.monotonic() < deadline, "try 1 never reached its review"
        time.sleep(0.05)
    retried: PhaseReport = run_activity(
        hosts.activities(hosts.b).run_phase, order, activity_id="phase-2", attempt=2
    )
    thread.join(timeout=60)

    assert f"{TICKET}: review on host-a" in beats  # the running phase, in its heartbeats
    error = outcome.get("error")
    assert isinstance(error, ApplicationError) and "refused the publication" in str(error)
    assert remote_refs(hosts)[knowledge_ref(TICKET)] == retried.files.knowledge
    log = git(hosts.remote, "log", "--format=%s", owner_ref(TICKET))
    assert "published by host-b" in log.splitlines()[0] and "host-a" not in log


def test_a_merge_the_remote_never_took_is_set_aside_and_made_again(hosts: Hosts) -> None:
    """Host A merged the ticket into its base and its push never happened (a refused push,
    a kill), while host B's commit reached the remote's base: the next try sets A's merge
    aside, brings A's base to the remote's and merges again on top of it."""
    files = run_to_merge(hosts)  # its last phase ran on host A
    done = run_cli("merge", TICKET, "--json", "--root", str(hosts.a))
    assert done.returncode == 0, done.stderr
    unpushed = git(hosts.a, "rev-parse", "main")
    (hosts.b / "other.txt").write_text("another change\n")
    git(hosts.b, "add", "other.txt")
    git(hosts.b, "commit", "-q", "-m", "another change on the base")
    git(hosts.b, "push", "-q", "origin", "main")

    merged = run_activity(
        hosts.activities(hosts.a).merge_ticket, hosts.merge_order(files), activity_id="merge"
    )

    assert merged.status == "merged", merged.reason
    assert merged.base_sha == hosts.remote_ref("refs/heads/main")
    for name in ("work.txt", "other.txt"):
        assert git(hosts.remote, "show", f"{merged.base_sha}:{name}")
    kept = git(hosts.a, "for-each-ref", "--format=%(objectname)", f"refs/tf/{TICKET}/")
    assert unpushed in kept.splitlines()
