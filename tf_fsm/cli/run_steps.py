"""`run`'s flags for a caller that drives a ticket step by step (one phase, then the merge as a
step of its own, as a worker of a dispatch across hosts does): `--phases N` and
`--hold-merge`, and the combinations refused."""

from __future__ import annotations

import argparse

from tf_fsm.errors import UsageError


def phase_count(text: str) -> int:
    """`--phases`' value: a whole number of phases, at least 1."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if count < 1:
        raise argparse.ArgumentTypeError(
            f"{count}: the run completes at least 1 phase before it pauses"
        )
    return count


def add_step_arguments(p: argparse.ArgumentParser) -> None:
    """`--phases N` and `--hold-merge`."""
    p.add_argument(
        "--phases",
        type=phase_count,
        metavar="N",
        help="pause at the phase boundary once N phases completed in this run (status paused, "
        "exit 0; the attempt stays in progress and the next run resumes it at the next phase)",
    )
    p.add_argument(
        "--hold-merge",
        action="store_true",
        help="a passed attempt waits for `tf-fsm merge` (status awaiting_merge), as with "
        "ralph.parallelAutoMerge false",
    )


def check_steps(args: argparse.Namespace) -> None:
    """The combinations that cannot mean anything: exit 2 naming them."""
    if args.phases is not None and args.plan:
        raise UsageError(
            "--phases with --plan: the plan runs nothing, so it has no phase to pause after"
        )
    if args.hold_merge and args.worktree is False:
        raise UsageError(
            "--hold-merge with --no-worktree: in the project's tree a passed ticket closes "
            "without a merge, so there is no merge to hold"
        )
