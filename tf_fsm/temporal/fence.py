"""Fenced pushes: a try of a phase never publishes after another try took the ticket over.

Temporal fences nothing: a worker frozen past its heartbeat timeout (a stopped process, a
partitioned host) wakes up and goes on, while the phase is retried elsewhere. The remote is
the one place both tries meet, so the fence is there: the owner ref `refs/tf/<id>/owner`.

- A try takes the ticket at its start (`take`): it pushes a token commit of its own (its
  message names the host, the activity and the try) to the owner ref, leased on the value it
  read (`--force-with-lease=<ref>:<seen>`): of two tries starting at once, one wins.
- It publishes (`publish`) with ONE `git push --atomic`: the ticket branch leased on the sha
  its order names (or on its absence), the knowledge ref leased likewise, and the owner ref
  advanced to a child of its token, leased on that token. A try another took over since
  (the owner ref holds the other's token) pushes nothing at all: the lease on the owner
  fails, and `--atomic` makes the whole push fail with it.

A stale order (the history moved on: the remote's branch or knowledge is not what it names)
fails the same way, on the lease of the branch or of the knowledge ref."""

from __future__ import annotations

from dataclasses import dataclass

from tf_fsm.errors import TfFsmError
from tf_fsm.workspace.git import Git, said
from tf_fsm.workspace.model import ticket_ref

REMOTE = "origin"
#: the tree of every owner commit: they hold no file, only their message and parents
_EMPTY_TREE_INPUT = ""


class Fenced(TfFsmError):
    """The remote refused a fenced push: another try owns the ticket, or the history moved
    on since the order was made. Nothing was published."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__()

    @property
    def message(self) -> str:
        return self.what


def owner_ref(ticket: str) -> str:
    return ticket_ref(ticket, "owner")


def remote_values(git: Git, *refs: str) -> dict[str, str | None]:
    """What each of `refs` is on the remote now, in one look (None: it does not exist)."""
    found: dict[str, str | None] = dict.fromkeys(refs)
    for line in git.out("ls-remote", REMOTE, *refs).splitlines():
        sha, _, name = line.partition("\t")
        if name in found:
            found[name] = sha
    return found


def _owner_commit(git: Git, message: str, parent: str | None) -> str:
    tree = git.out("mktree", stdin=_EMPTY_TREE_INPUT)
    args = ["commit-tree", tree, "-F", "-"]
    if parent is not None:
        args += ["-p", parent]
    return git.run(*args, stdin=message, env=git.commit_env()).stdout.strip()


#: the trailer of every owner commit naming the activity (workflow and activity id, not the
#: try): a publication by an earlier try of the same activity was never accepted
ACTIVITY_TRAILER = "Tf-Activity"


@dataclass(frozen=True)
class Ownership:
    """A try's hold on a ticket: the token it pushed to the owner ref, and the activity of
    the owner commit it replaced (None: none, or not tf-fsm's)."""

    ticket: str
    token: str
    who: str
    activity: str
    previous_activity: str | None = None


def take(git: Git, ticket: str, who: str, activity: str, seen: str | None) -> Ownership:
    """Push a token of this try's own to the ticket's owner ref (`who`: host, activity, try),
    leased on `seen`, what the ref was when the try looked: Fenced when another try took it
    meanwhile."""
    ref = owner_ref(ticket)
    previous = activity_of(git, seen) if seen is not None else None
    text = f"tf-fsm: {ticket} taken by {who}\n\n{ACTIVITY_TRAILER}: {activity}\n"
    token = _owner_commit(git, text, None)
    lease = f"--force-with-lease={ref}:{seen or ''}"
    pushed = git.run("push", "--porcelain", lease, REMOTE, f"{token}:{ref}", check=False)
    if pushed.exit_code != 0:
        raise Fenced(f"{ticket}: another try took the ticket while {who} did: {said(pushed)}")
    return Ownership(ticket, token, who, activity, previous)


def activity_of(git: Git, commit: str) -> str | None:
    """The activity an owner commit names (fetched from the remote when missing here)."""
    if git.rev(commit) is None:
        git.run("fetch", "--quiet", "--no-write-fetch-head", REMOTE, commit, check=False)
    found = git.run(
        "log", "-1", f"--format=%(trailers:key={ACTIVITY_TRAILER},valueonly)", commit, check=False
    )
    return found.stdout.strip() or None if found.exit_code == 0 else None


@dataclass(frozen=True)
class Update:
    """One ref of a publication: `ref` on the remote from `expected` (None: absent) to `new`
    (None: deleted)."""

    ref: str
    expected: str | None
    new: str | None


def publish(git: Git, owned: Ownership, updates: list[Update]) -> str:
    """Push `updates` and the owner ref advanced past this try's token in one atomic push,
    each leased on its expected value. Returns the owner ref's new commit; Fenced (nothing
    published) when any lease fails."""
    text = f"tf-fsm: {owned.ticket} published by {owned.who}\n\n"
    seal = _owner_commit(git, f"{text}{ACTIVITY_TRAILER}: {owned.activity}\n", owned.token)
    changes = [u for u in updates if u.new != u.expected]
    changes.append(Update(owner_ref(owned.ticket), owned.token, seal))
    argv = ["push", "--atomic", "--porcelain"]
    for update in changes:
        argv.append(f"--force-with-lease={update.ref}:{update.expected or ''}")
    argv.append(REMOTE)
    argv += [f"{update.new or ''}:{update.ref}" for update in changes]
    pushed = git.run(*argv, check=False)
    if pushed.exit_code != 0:
        raise Fenced(
            f"{owned.ticket}: the remote refused the publication of {owned.who} (another try "
            f"owns the ticket, or the history moved on since its order): {said(pushed)}"
        )
    return seal
