"""`tf-fsm doctor`: is the configured agent CLI there, which version, what exactly would a phase
run, and which settings can it not map (a thinking level the CLI lacks, a foreign provider);
and a warning per required quality gate whose failure tf_fsm cannot judge test by test."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tf_fsm.core.artifacts import REVIEW_FILES, SINGLE_ROLE
from tf_fsm.core.curve import TIERED_CURVE
from tf_fsm.core.escalation import resolve
from tf_fsm.engine.prompts import PromptLibrary
from tf_fsm.executors.base import Invocation
from tf_fsm.executors.command import CommandExecutor
from tf_fsm.executors.presets import preset as preset_named
from tf_fsm.process.door import parent_death, run_process, tail
from tf_fsm.settings.gate_reports import whole_gate_warnings
from tf_fsm.settings.load import LoadedSettings, knowledge_dir
from tf_fsm.storage.layout import CHAIN_CONTEXT
from tf_fsm.storage.redact import Redactor

OK, NOT_READY, UNMAPPED = 0, 2, 3
SAMPLE_TICKET = "TICKET"
VERSION_TIMEOUT = 30.0


@dataclass
class Diagnosis:
    kind: str
    preset: str | None = None
    program: str | None = None
    path: str | None = None
    version: str | None = None
    commands: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # settings the CLI cannot take
    notes: list[str] = field(default_factory=list)
    #: what works, but not as a user may expect (the exit code stays as it is)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None  # why no phase could run at all

    @property
    def exit_code(self) -> int:
        if self.error:
            return NOT_READY
        return UNMAPPED if self.problems else OK

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "preset": self.preset,
            "program": self.program,
            "path": self.path,
            "version": self.version,
            "commands": self.commands,
            "problems": self.problems,
            "notes": self.notes,
            "warnings": self.warnings,
            "error": self.error,
            "exitCode": self.exit_code,
        }


def _invocations(root: Path, settings: LoadedSettings, cwd: Path) -> list[tuple[int, Invocation]]:
    """One invocation per phase and role, on the first attempt of each escalation tier (where
    escalation changes models), as an agent working in `cwd` (the project root, or a ticket's
    worktree) is given them."""
    ticket_dir = knowledge_dir(root, settings) / "tickets" / SAMPLE_TICKET
    if cwd != root:  # a worktree: the ticket's files at the same relative path inside it
        from tf_fsm.workspace.model import ticket_dir_in

        ticket_dir = ticket_dir_in(cwd, root, ticket_dir)
    single = [(phase, role, artifact) for phase, (role, artifact) in SINGLE_ROLE.items()]
    reviews = [("review", role, name) for role, name in REVIEW_FILES.items()]
    calls = [*single[:2], *reviews, *single[2:]]  # phase order: research ... close
    # The models a run resolves: escalation, then each role's template frontmatter, then the
    # settings (a project's .tf/prompts/ override included).
    frontmatter = PromptLibrary(root).frontmatter()
    out = []
    for number in TIERED_CURVE.tiers:
        resolution = resolve(number, settings, frontmatter=frontmatter)
        for phase, role, artifact in calls:
            chosen = resolution.roles[role]
            name = f"attempt-{number}/{phase}-{role}"
            out.append(
                (
                    number,
                    Invocation(
                        ticket_id=SAMPLE_TICKET,
                        phase=phase,
                        role=role,
                        model=chosen.model,
                        thinking=chosen.thinking,
                        attempt=number,
                        root=root,
                        artifact_dir=ticket_dir,
                        output=ticket_dir / artifact,
                        prompt="",
                        prompt_file=ticket_dir / "prompts" / f"{name}.md",
                        chain_context=ticket_dir / CHAIN_CONTEXT,
                        log_file=ticket_dir / "logs" / f"{name}.log",
                        cwd=cwd,
                    ),
                )
            )
    return out


def _version(argv: list[str], root: Path) -> tuple[str | None, str | None]:
    try:
        result = run_process(argv, cwd=root, timeout=VERSION_TIMEOUT)
    except OSError as exc:
        return None, f"`{' '.join(argv)}` could not start: {exc}"
    text = (result.stdout.strip() or result.stderr.strip()).splitlines()
    if result.timed_out or result.exit_code != 0:
        why = "timed out" if result.timed_out else f"exit code {result.exit_code}"
        redact = Redactor.from_environ(os.environ)
        return None, f"`{' '.join(argv)}` failed ({why}): {tail(result.stderr, 3, redact=redact)}"
    return (text[0] if text else "?"), None


def diagnose(root: Path, settings: LoadedSettings) -> Diagnosis:
    conf = settings.settings.executor
    diag = Diagnosis(conf.kind, conf.preset, warnings=whole_gate_warnings(settings.workflow))
    if conf.kind != "command":
        diag.notes.append(f'executor.kind is "{conf.kind}": no agent CLI to check')
        return diag
    chosen = preset_named(conf.preset) if conf.preset else None
    executor = CommandExecutor(
        conf.command, root, preset=chosen, program=conf.program, extra_args=conf.extraArgs
    )
    diag.program = conf.command[0] if conf.command else executor.program
    if conf.command and chosen:
        diag.notes.append(
            f"executor.command overrides the {chosen.name} preset's argv; the preset still "
            "reads the output (usage, cost, provider errors), so keep its JSON output mode"
        )
    elif conf.command:
        diag.notes.append("no executor.preset: usage, cost and provider errors are not read")
    if not conf.command and not chosen:
        diag.error = "neither executor.preset nor executor.command is set (docs/agents.md)"
        return diag
    diag.path = executor.program_path()
    diag.notes.append(parent_death())
    if diag.path is None:
        hint = f"; install it: npm install -g {chosen.package}" if chosen else ""
        diag.error = f"{diag.program}: not found ({executor.setting}){hint}"
        return diag
    program_name = Path(diag.path).name
    if chosen and (not conf.command or program_name == chosen.program):
        diag.version, diag.error = _version([diag.path, "--version"], root)
    else:
        diag.notes.append("version not checked: a custom command may not take --version")
    seen: set[tuple[str, str]] = set()
    cwd = _agents_cwd(root, settings, diag)
    for number, inv in _invocations(root, settings, cwd):
        argv, problems = executor.command_line(inv)
        for problem in problems:  # every role named, on the first attempt it shows on
            if (inv.role, problem) not in seen:
                seen.add((inv.role, problem))
                diag.problems.append(f"{inv.role} (attempt {number}): {problem}")
        if number == 1:
            diag.commands.append(
                {
                    "phase": inv.phase,
                    "role": inv.role,
                    "model": inv.model,
                    "thinking": inv.thinking,
                    "argv": argv,
                    "cwd": str(inv.workdir),
                }
            )
    return diag


def _agents_cwd(root: Path, settings: LoadedSettings, diag: Diagnosis) -> Path:
    """Where the agents run: a ticket's worktree when the loop's tickets run in worktrees
    (docs/workspaces.md; shown for the sample ticket), else the project root."""
    from tf_fsm.errors import WorkspaceError
    from tf_fsm.workspace import mode
    from tf_fsm.workspace.model import branch_name, worktree_path

    workers = settings.settings.ralph.parallelWorkers
    try:
        chosen = mode.for_loop(root, settings, explicit=None, workers=workers)
    except WorkspaceError as exc:
        diag.notes.append(str(exc))
        return root
    if chosen.note:
        diag.notes.append(chosen.note)
    if not chosen.worktree:
        return root
    tree = worktree_path(root, settings, SAMPLE_TICKET)
    diag.notes.append(
        f"tickets run in worktrees: each in {tree.parent}/<id> on branch "
        f"{branch_name(settings, '<id>')}, its agents' working directory (docs/workspaces.md)"
    )
    return tree
