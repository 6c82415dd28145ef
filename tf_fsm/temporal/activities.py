"""The activities a worker runs, in its clone of the repository (`root`): one phase of a
ticket (`run_phase`, `tf-fsm run ID --once --phases 1 --hold-merge --json` in a child
process) and the merge of a passed ticket (`merge_ticket`, `tf-fsm merge ID --json`), each on
the files the history holds (tf_fsm.temporal.materialize) and published to the shared remote
with one fenced push (tf_fsm.temporal.fence): a try another took over publishes nothing.

The run is a child process (through tf_fsm.process, the one door): the ticket's lock is per
process, the child dies with the worker (parent-death signal) and its agents with it, and
whatever an agent leaves running is ended with that child, never another ticket's."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import asdict, replace
from pathlib import Path

from temporalio import activity

from tf_fsm.errors import TfFsmError
from tf_fsm.loop.unfinished import loop_view
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.redact import Redactor
from tf_fsm.temporal.fence import (
    Fenced,
    Ownership,
    Update,
    activity_of,
    owner_ref,
    publish,
    remote_values,
    take,
)
from tf_fsm.temporal.identity import default_host, repository_identity
from tf_fsm.temporal.knowledge import commit_knowledge, knowledge_ref, report_of
from tf_fsm.temporal.materialize import Materialized, fetch_shas, materialize
from tf_fsm.temporal.orders import (
    MergeOrder,
    MergeReport,
    PhaseOrder,
    PhaseReport,
    StepView,
    TicketFiles,
)
from tf_fsm.temporal.running import (
    base_branch_of,
    bring_base,
    phase_of,
    refusal,
    retryable,
    run_child,
)
from tf_fsm.temporal.workflow import MERGE_TICKET, RUN_PHASE
from tf_fsm.tk import tickets
from tf_fsm.workspace.git import Git
from tf_fsm.workspace.model import branch_name


def files_digest(files: TicketFiles) -> str:
    """What tells the tries of one phase apart from the others': the files they start from."""
    text = "\n".join([files.branch or "", files.knowledge or "", *files.journal])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class TicketActivities:
    """The activities of a worker whose clone of the repository is `root`."""

    def __init__(self, root: Path, host: str | None = None) -> None:
        self.root = root.resolve()
        self.repository = repository_identity(self.root)
        self.host = host or default_host(self.root)
        self.git = Git(self.root)
        # the clone's base branch moves for a merge and for a new ticket's first phase: never
        # both at once in this worker (a merge made and not yet pushed would be set aside)
        self._base = threading.Lock()

    def _check(self, repository: str, ticket: str) -> None:
        if repository != self.repository:
            raise refusal(
                f"{ticket}: the order is for repository {repository}, "
                f"this worker runs in a clone of {self.repository} ({self.root})"
            )
        if load_settings(self.root).settings.executor.kind == "handoff":
            raise refusal(
                f"{ticket}: hand-off tickets run on one machine, where a person writes their "
                "artifacts (`tf-fsm run`), not on a cluster"
            )

    def _start_from_the_remote(self, ticket: str) -> None:
        """Before a ticket's first phase (it has no branch yet), bring this clone's base to
        the remote's: the ticket's tk file may be newer than the clone, and its branch is
        made from the base."""
        settings = load_settings(self.root)
        # the rule of tf_fsm.workspace.worktree.base_branch, without its check that a
        # configured base exists here: a clone may lack it, and bring_base makes it
        base = settings.settings.workspace.baseBranch or self.git.head_branch()
        if base is None:
            return
        with self._base:
            try:
                bring_base(self.git, base, ticket)
            except TfFsmError as exc:
                raise refusal(f"{ticket}: {exc}") from None

    @activity.defn(name=RUN_PHASE)
    def run_phase(self, order: PhaseOrder) -> PhaseReport:
        """The ticket's next phase, on the history's files; its report and new files. A phase
        a try of this workflow run already published from these files (its completion was
        lost, or the phase went to another host meanwhile) is not run again: its report,
        from its knowledge commit, is the answer."""
        self._check(order.repository, order.ticket)
        owned, leases, published = self._own(order.ticket, order.files)
        if published is not None and (done := self._published(order, leases)) is not None:
            return done
        if order.files.branch is None:
            self._start_from_the_remote(order.ticket)
        made = self._materialize(order.ticket, order.files)
        argv = ["run", order.ticket, "--once", "--phases", "1", "--hold-merge", "--json"]
        outcome, _ = run_child(self.root, argv, order.ticket, self.host, made.store)
        lines = made.store.journal_lines()
        added = lines[len(order.files.journal) :]
        redact = Redactor.from_environ(os.environ)
        report = PhaseReport(
            ticket=order.ticket,
            status=outcome.status,
            attempt=outcome.attempt,
            phase=phase_of(added),
            reason=redact(outcome.reason),
            journal=added,
            files=order.files,  # replaced by what is published below
            step=self._step(made, redact),
            host=self.host,
            base=base_branch_of(self.root, made.settings, order.ticket),
        )
        text = json.dumps({k: v for k, v in asdict(report).items() if k != "files"})
        files = self._publish(owned, made, leases, lines, report.phase or "phase", report=text)
        return replace(report, files=files)

    def _published(self, order: PhaseOrder, leases: dict[str, str | None]) -> PhaseReport | None:
        """The report of this phase as a lost try published it (None: it left none)."""
        branch, knowledge = self._refs(order.ticket)
        sha = leases[knowledge]
        if sha is None:
            return None
        fetch_shas(self.git, sha)
        text = report_of(self.git, sha)
        if text is None:
            return None
        data = json.loads(text)
        files = TicketFiles([*order.files.journal, *data["journal"]], leases[branch], sha)
        return PhaseReport(**{**data, "files": files, "step": StepView(**data["step"])})

    @activity.defn(name=MERGE_TICKET)
    def merge_ticket(self, order: MergeOrder) -> MergeReport:
        """Merge a passed ticket into `order.base` and push the base, fast-forward only."""
        self._check(order.repository, order.ticket)
        with self._base:
            return self._merge(order)

    def _merge(self, order: MergeOrder) -> MergeReport:
        base_ref = f"refs/heads/{order.base}"
        owned, leases, _ = self._own(order.ticket, order.files)
        made = self._materialize(order.ticket, order.files)
        try:
            origin_base = bring_base(self.git, order.base, order.ticket)
        except TfFsmError as exc:
            raise refusal(f"{order.ticket}: {exc}") from None
        argv = ["merge", order.ticket, "--json"]
        outcome, code = run_child(self.root, argv, order.ticket, self.host, made.store)
        lines = made.store.journal_lines()
        merged = code == 0
        base_sha = self.git.rev(base_ref) if merged else None
        extra = [Update(base_ref, origin_base, base_sha)] if merged else []
        files = self._publish(owned, made, leases, lines, "merge", extra)
        redact = Redactor.from_environ(os.environ)
        return MergeReport(
            ticket=order.ticket,
            status="merged" if merged else "refused" if code == 5 else "error",
            reason=redact(outcome.reason),
            journal=lines[len(order.files.journal) :],
            files=files,
            step=self._step(made, redact),
            host=self.host,
            base_sha=base_sha,
        )

    # -- the steps both share ------------------------------------------------------------

    def _refs(self, ticket: str) -> tuple[str, str]:
        branch = branch_name(load_settings(self.root), ticket)
        return f"refs/heads/{branch}", knowledge_ref(ticket)

    def _own(
        self, ticket: str, files: TicketFiles
    ) -> tuple[Ownership, dict[str, str | None], str | None]:
        """Take the ticket for this try, and the values its publication is leased on: the
        order's, or, when a try of the same workflow run from the same files published a
        result the history never accepted (its completion was lost, or the workflow gave the
        phase to another host), what that try pushed: the history only ever sends on files
        it accepted. An order the remote went past otherwise is refused before anything is
        pushed."""
        info = activity.info()
        key = f"{info.workflow_id}/{info.workflow_run_id}/{files_digest(files)}"
        who = f"{self.host} {info.workflow_id}/{info.activity_id} try {info.attempt}"
        branch, knowledge = self._refs(ticket)
        seen = remote_values(self.git, branch, knowledge, owner_ref(ticket))
        leases: dict[str, str | None] = {branch: files.branch, knowledge: files.knowledge}
        published: str | None = None
        if any(seen[ref] != value for ref, value in leases.items()):
            owner = seen[owner_ref(ticket)]
            if owner is None or activity_of(self.git, owner) != key:
                raise refusal(
                    f"{ticket}: the order is stale: the remote holds {seen[branch]} and "
                    f"{seen[knowledge]}, the order names {files.branch} and {files.knowledge} "
                    f"({who} publishes nothing)"
                )
            leases = {branch: seen[branch], knowledge: seen[knowledge]}
            published = seen[knowledge]
        try:
            owned = take(self.git, ticket, who, key, seen[owner_ref(ticket)])
        except Fenced as exc:
            raise refusal(str(exc)) from None
        return owned, leases, published

    def _materialize(self, ticket: str, files: TicketFiles) -> Materialized:
        try:
            return materialize(self.root, ticket, files)
        except TfFsmError as exc:
            raise retryable(f"{ticket}: {exc}") from None  # a lock held here, a fetch failed

    def _publish(
        self,
        owned: Ownership,
        made: Materialized,
        leases: dict[str, str | None],
        lines: list[str],
        what: str,
        extra: list[Update] | None = None,
        report: str | None = None,
    ) -> TicketFiles:
        """Commit the artifacts and push them, the branch and `extra` in one fenced push."""
        branch, knowledge = self._refs(owned.ticket)
        message = f"tf-fsm: {owned.ticket} knowledge after {what}"
        with made.store.lock("tf-fsm: the ticket's artifacts committed"):
            sha = commit_knowledge(self.git, made.directory, made.files.knowledge, message, report)
        tip = self.git.rev(branch)
        updates = [Update(branch, leases[branch], tip), Update(knowledge, leases[knowledge], sha)]
        try:
            publish(self.git, owned, updates + (extra or []))
        except Fenced as exc:
            if remote_values(self.git, owner_ref(owned.ticket))[owner_ref(owned.ticket)] == (
                owned.token
            ):  # still ours: the base moved meanwhile; the next try starts from the history
                raise retryable(str(exc)) from None
            raise refusal(str(exc)) from None
        self.git.run("update-ref", knowledge, sha)
        return TicketFiles(journal=lines, branch=tip, knowledge=sha)

    def _step(self, made: Materialized, redact: Redactor) -> StepView:
        """What runs next for the ticket, as the backlog loop's worker reads it."""
        ticket_id = made.store.ticket_id
        try:
            ticket = tickets.read(self.root, ticket_id)
            step = loop_view(self.root, made.settings, made.store, ticket).step
        except TfFsmError as exc:
            raise refusal(f"{ticket_id}: {exc}") from None
        refused = redact(step.refusal) if step.refusal else None
        return StepView(step.action, redact(step.reason), refused)
