"""The settings file's schema: the roles, tf_fsm's package defaults, and the pydantic models
that check `.tf/config/settings.json` strictly (loading, merging and role resolution are in
tf_fsm.settings.load, which re-exports what other modules use from here).
"""

from __future__ import annotations

import difflib
import string
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator

from tf_fsm.settings.defaults import DEFAULT_KNOWLEDGE_DIR
from tf_fsm.settings.roles import REVIEWER_ROLES as REVIEWER_ROLES
from tf_fsm.settings.roles import ROLES as ROLES
from tf_fsm.settings.section import OsStr, no_nul
from tf_fsm.settings.section import Section as _Section
from tf_fsm.settings.severity import SEVERITIES, normalize_severity
from tf_fsm.settings.temporal import Temporal
from tf_fsm.settings.workspace import Workspace, check_worktrees_dir

#: settings key under workflow.escalation.models -> the role it escalates
ESCALATION_KEYS: dict[str, str] = {
    "fixer": "fixer",
    "reviewerSecondOpinion": "reviewer-second-opinion",
    "worker": "worker",
}
#: agents roles pi-ticketflow defines that tf_fsm does not run (accepted, with a warning)
PI_ONLY_ROLES = frozenset({"review-merge", "researcher-fetch"})
#: prompts entries naming the worker's metaModel, in order of precedence
WORKER_PROMPT_KEYS: tuple[str, ...] = ("tf-implement", "tf")

#: Keys pi-ticketflow acts on and tf_fsm accepts without acting on them (docs/settings.md):
#: dotted key -> why, for the load-time warning a project file that sets one gets.
IGNORED_KEYS: dict[str, str] = {
    "checkers": "quality-gate commands are workflow.qualityGates (docs/gates.md)",
    "workflow.clarifyDefault": "pi-ticketflow's default for /tf's clarifying questions; "
    "tf_fsm's agents run without asking",
    "workflow.mcpServers": "tf_fsm does not configure the agents' MCP servers",
    "workflow.researchParallelAgents": "the research phase runs one researcher",
    "workflow.exclude": "a pi-ticketflow option tf_fsm does not act on",
    "workflow.chainMode": "a pi-ticketflow option tf_fsm does not act on",
}
DEFAULT_FAIL_ON: tuple[str, ...] = ("Critical", "Major")

# Upper bounds of the number settings (docs/settings.md, "Number bounds"): far above any real
# use, and within what Python and the OS accept, so a setting that validates never crashes a
# run (a timeout of 1e300 s overflows select(2) at the first agent call).
#: every duration: timeouts, waits, the restart backoff's base (7 days)
MAX_SECONDS = 604_800
#: attempts, feedback rounds and restarts; the backoff's 2^(restart-1) stays a finite float
MAX_TRIES = 1000
#: tickets `tf-fsm ralph` runs at once, each its own process
MAX_WORKERS = 256
#: runs one `tf-fsm ralph` starts
MAX_ITERATIONS = 100_000
#: the per-ticket budget, in US dollars
MAX_COST_USD = 1_000_000

_META = [
    (
        "worker",
        "minimax/MiniMax-M2.5",
        "high",
        "Strong model for implementation and complex reasoning",
    ),
    ("research", "kimi-coding/k2p5", "medium", "Fast model for research and information gathering"),
    (
        "fast",
        "chutes/zai-org/GLM-4.7-Flash",
        "medium",
        "Cheapest model for quick tasks and summaries",
    ),
    ("general", "kimi-coding/k2p5", "medium", "General-purpose model for admin tasks"),
    (
        "review-general",
        "openai-codex/gpt-5.3-codex",
        "high",
        "Capable model for general code review",
    ),
    (
        "review-spec",
        "openai-codex/gpt-5.1-codex-mini",
        "high",
        "Model for specification compliance audit",
    ),
    ("review-secop", "kimi-coding/k2p5", "high", "Fast model for second-opinion review"),
    ("fixer", "zai/glm-5", "high", "Fast, cheap model for fix iterations and small edits"),
]

#: tf_fsm's package defaults: what a key missing from the project file means.
PACKAGE_DEFAULTS: dict[str, Any] = {
    "metaModels": {n: {"model": m, "thinking": t, "description": d} for n, m, t, d in _META},
    "agents": {
        "researcher": "research",
        "reviewer-general": "review-general",
        "reviewer-spec-audit": "review-spec",
        "reviewer-second-opinion": "review-secop",
        "fixer": "fixer",
        "closer": "fast",
    },
    "prompts": {},
    "workflow": {
        "failOn": list(DEFAULT_FAIL_ON),
        "enableResearcher": True,
        "enableReviewers": list(REVIEWER_ROLES),
        "enableFixer": True,
        "enableCloser": True,
        "enableQualityGate": True,
        "knowledgeDir": DEFAULT_KNOWLEDGE_DIR,
        "escalation": {
            "enabled": False,
            "maxRetries": 3,
            "models": {"fixer": None, "reviewerSecondOpinion": None, "worker": None},
        },
    },
    "ralph": {
        "parallelWorkers": 1,
        "maxIterations": 50,
        "parallelAllowUntagged": False,
        "componentTagPrefix": "component:",
    },
}


class MetaModel(_Section):
    model: OsStr = Field(min_length=1)  # an agent's argument, as thinking is
    thinking: OsStr | None = None
    description: str | None = None


class EscalationModels(_Section):
    """Escalated model per role: a metaModels name or a provider/model id; null = base model."""

    fixer: OsStr | None = None
    reviewerSecondOpinion: OsStr | None = None
    worker: OsStr | None = None


class Escalation(_Section):
    enabled: bool = False
    maxRetries: int = Field(default=3, ge=0, le=MAX_TRIES)
    models: EscalationModels = EscalationModels()
    #: per-ticket budget in US dollars (agent-reported cost); None = no budget
    maxCostUsd: float | None = Field(default=None, gt=0, le=MAX_COST_USD)
    #: what a blocked attempt that fails exactly like the one before it does (docs/lifecycle.md)
    sameFailure: Literal["skip-tier", "stop", "off"] = "skip-tier"


_GATE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class QualityGate(_Section):
    """A command run in the verify phase (docs/gates.md), e.g. lint or tests."""

    name: str = Field(pattern=_GATE_NAME, max_length=64)
    #: a shell command line (run with `bash -c`, so pipes and quotes work) or an argv list
    command: str | list[str]
    required: bool = True
    #: None: workflow.qualityGateMaxRetries
    maxRetries: int | None = Field(default=None, ge=0, le=MAX_TRIES)
    timeoutSeconds: float = Field(default=180.0, gt=0, le=MAX_SECONDS)
    cwd: OsStr | None = None  # relative to the project root (the ticket's worktree in one)
    #: the JUnit XML report the command writes, relative to its cwd: with one, a failure
    #: blocks only for tests that did not fail on the base commit too (docs/gates.md)
    junitXml: OsStr | None = None

    @field_validator("command", mode="after")
    @classmethod
    def _not_empty(cls, command: str | list[str]) -> str | list[str]:
        if not command or (isinstance(command, list) and not command[0]):
            raise ValueError("must be a non-empty command line or argv list")
        for part in [command] if isinstance(command, str) else command:
            no_nul(part)  # here, not in the annotation: a union would report it twice
        return command


class Workflow(_Section):
    failOn: list[str] = Field(default_factory=lambda: list(DEFAULT_FAIL_ON))
    enableResearcher: bool = True
    enableReviewers: list[str] = Field(default_factory=lambda: list(REVIEWER_ROLES))
    enableFixer: bool = True
    enableCloser: bool = True
    enableQualityGate: bool = True
    knowledgeDir: OsStr = DEFAULT_KNOWLEDGE_DIR
    escalation: Escalation = Escalation()
    postFixVerification: Literal["rereview", "fixes"] = "rereview"
    qualityGates: list[QualityGate] = Field(default_factory=list)
    qualityGateMaxRetries: int = Field(default=3, ge=0, le=MAX_TRIES)
    # pi-ticketflow keys tf_fsm accepts and does not act on (IGNORED_KEYS).
    clarifyDefault: Any = None
    mcpServers: Any = None
    researchParallelAgents: Any = None
    exclude: Any = None
    chainMode: Any = None

    @property
    def rereviews(self) -> bool:
        """Do the reviewers review again after a fix (verify runs them), or does tf_fsm count
        the findings a fix left from review.md and fixes.md?"""
        return self.postFixVerification == "rereview"

    @field_validator("failOn", mode="after")
    @classmethod
    def _canonical_severities(cls, names: list[str]) -> list[str]:
        out: list[str] = []
        for name in names:
            canonical = normalize_severity(name)
            if canonical is None:
                near = difflib.get_close_matches(name.capitalize(), SEVERITIES, n=1, cutoff=0.5)
                hint = f" (did you mean {near[0]}?)" if near else ""
                raise ValueError(f"unknown severity {name!r}{hint}; valid: {', '.join(SEVERITIES)}")
            if canonical not in out:
                out.append(canonical)
        return out

    @field_validator("qualityGates", mode="after")
    @classmethod
    def _unique_gate_names(cls, gates: list[QualityGate]) -> list[QualityGate]:
        names = [g.name for g in gates]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"gate names must be unique; repeated: {', '.join(dupes)}")
        return gates

    @field_validator("enableReviewers", mode="after")
    @classmethod
    def _known_reviewers(cls, roles: list[str]) -> list[str]:
        for role in roles:
            if role not in REVIEWER_ROLES:
                near = difflib.get_close_matches(role, REVIEWER_ROLES, n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                raise ValueError(
                    f"unknown reviewer role {role!r}{hint}; valid: {', '.join(REVIEWER_ROLES)}"
                )
        return roles


class Ralph(_Section):
    parallelWorkers: int = Field(default=1, ge=1, le=MAX_WORKERS)
    maxIterations: int = Field(default=50, ge=1, le=MAX_ITERATIONS)
    parallelAllowUntagged: bool = False
    componentTagPrefix: str = "component:"
    # pi-ticketflow's worktree keys, as pi-ticketflow reads them (docs/workspaces.md)
    #: where each ticket's worktree is made: a directory of their own inside the project,
    #: relative to its root (settings.workspace.check_worktrees_dir)
    parallelWorktreesDir: Annotated[OsStr, AfterValidator(check_worktrees_dir)] = Field(
        default=".tf/ralph/worktrees", min_length=1
    )
    #: keep a merged ticket's worktree and branch instead of removing them
    parallelKeepWorktrees: bool = False
    #: merge a ticket whose gate passed into the base branch (false: it closes on its branch)
    parallelAutoMerge: bool = True
    #: one ticket at a time (`tf-fsm run`, `resume`, `ralph --workers 1`) runs in a worktree;
    #: None (not in the file): as workspace.mode says, which in a git repository is a worktree
    serialUseWorktree: bool | None = None


#: The `{placeholders}` an `executor.command` argv may use (the TF_* variables, lower case).
PLACEHOLDERS: frozenset[str] = frozenset(
    {
        "ticket_id",
        "phase",
        "role",
        "model",
        "thinking",
        "attempt",
        "artifact_dir",
        "output",
        "prompt_file",
        "chain_context",
    }
)


#: The agent CLIs `executor.preset` knows (tf_fsm/executors/presets.py).
PRESETS: tuple[str, ...] = ("pi", "claude", "codex")


class Executor(_Section):
    kind: Literal["command", "scripted", "handoff"] = "command"
    #: a known agent CLI: tf_fsm builds its argv, prompt passing and output mode
    preset: Literal["pi", "claude", "codex"] | None = None
    #: the preset's program (a name on PATH or a path); None = the CLI's usual name
    program: OsStr | None = None
    #: appended to the preset's argv (e.g. ["--provider", "x"]); placeholders allowed
    extraArgs: list[OsStr] = Field(default_factory=list)
    command: list[OsStr] | None = None
    timeoutSeconds: float = Field(default=1800.0, gt=0, le=MAX_SECONDS)
    #: restarts of an invocation that failed transiently (crash, timeout, kill, provider)
    maxRestarts: int = Field(default=2, ge=0, le=MAX_TRIES)
    #: base of the exponential backoff between restarts (with jitter); 0 = restart at once
    restartBackoffSeconds: float = Field(default=2.0, ge=0, le=MAX_SECONDS)
    scenario: OsStr | None = None
    #: handoff: how long `run` waits per artifact
    waitSeconds: float = Field(default=0.0, ge=0, le=MAX_SECONDS)
    #: handoff: quiet time before an artifact counts
    stableSeconds: float = Field(default=0.5, ge=0, le=MAX_SECONDS)

    @field_validator("extraArgs", mode="after")
    @classmethod
    def _extra_placeholders(cls, argv: list[str]) -> list[str]:
        for arg in argv:
            _check_placeholders(arg)
        return argv

    @field_validator("command", mode="after")
    @classmethod
    def _known_placeholders(cls, argv: list[str] | None) -> list[str] | None:
        if argv is None:
            return None
        if not argv or not argv[0]:
            raise ValueError(
                'must be a non-empty argv list, e.g. ["my-agent", "--model", "{model}"]'
            )
        for arg in argv:
            _check_placeholders(arg)
        return argv


def _check_placeholders(arg: str) -> None:
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(arg) if name is not None}
    except ValueError as exc:
        raise ValueError(f"bad placeholder in {arg!r}: {exc}") from None
    unknown = names - PLACEHOLDERS
    if unknown:
        name = sorted(unknown)[0]
        near = difflib.get_close_matches(name, sorted(PLACEHOLDERS), n=1)
        hint = f" (did you mean {{{near[0]}}}?)" if near else ""
        raise ValueError(f"unknown placeholder {{{name}}} in {arg!r}{hint}")


#: where the ticket stores keep a ticket's records (tf_fsm.storage.backends)
STORE_BACKENDS: tuple[str, ...] = ("files", "memory")


class Storage(_Section):
    """tf_fsm's own: the store backend (docs/settings.md, `storage`)."""

    #: "files": pi-ticketflow's files under workflow.knowledgeDir; "memory": this process only
    backend: Literal["files", "memory"] = "files"


class Settings(_Section):
    schema_: str | None = Field(default=None, alias="$schema")
    metaModels: dict[str, MetaModel] = Field(default_factory=dict)
    agents: dict[str, OsStr] = Field(default_factory=dict)
    prompts: dict[str, str] = Field(default_factory=dict)
    checkers: Any = None  # pi-ticketflow's per-language lint/format commands (IGNORED_KEYS)
    workflow: Workflow = Workflow()
    ralph: Ralph = Ralph()
    executor: Executor = Executor()
    workspace: Workspace = Workspace()
    storage: Storage = Storage()
    temporal: Temporal = Temporal()
