"""Executors (tf_fsm.executors): the `command` executor against real processes, the output
mark, and the `scripted` offline agent with real scenario files."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tf_fsm.core.detection import extract_findings, parse_review
from tf_fsm.core.state import SEVERITIES
from tf_fsm.errors import ExecutorError, SettingsError, TfFsmError
from tf_fsm.executors import Invocation, OutputMark
from tf_fsm.executors.command import CommandExecutor
from tf_fsm.executors.scripted import (
    DEMO_SCENARIO,
    MEMORY_FILE,
    ScriptedExecutor,
    load_scenario,
)

STRONG = "openai-codex/gpt-5.3-codex"
BASE_FIXER = "zai/glm-5"
OUTPUTS = {
    ("research", "researcher"): "research.md",
    ("implement", "worker"): "implementation.md",
    ("review", "reviewer-general"): "review-general.md",
    ("review", "reviewer-spec-audit"): "review-spec.md",
    ("review", "reviewer-second-opinion"): "review-second.md",
    ("fix", "fixer"): "fixes.md",
    ("verify", "reviewer-general"): "post-fix-review-general.md",
    ("verify", "reviewer-spec-audit"): "post-fix-review-spec.md",
    ("verify", "reviewer-second-opinion"): "post-fix-review-second.md",
    ("close", "closer"): "close-notes.md",
}

# Writes what it was given (argv, TF_* environment, stdin, cwd) to the JSON file named by its
# first argument, then says something on both streams and exits with $DUMP_EXIT (default 0).
DUMP_AGENT = """\
import json, os, sys
from pathlib import Path
data = {
    "argv": sys.argv[1:],
    "env": {k: v for k, v in os.environ.items() if k.startswith("TF_") or k == "EXTRA"},
    "stdin": sys.stdin.read(),
    "cwd": os.getcwd(),
}
Path(sys.argv[1]).write_text(json.dumps(data), encoding="utf-8")
print("agent stdout")
for i in range(30):
    print(f"stderr line {i}", file=sys.stderr)
raise SystemExit(int(os.environ.get("DUMP_EXIT", "0")))
"""


def counts(**nonzero: int) -> dict[str, int]:
    return {s: nonzero.get(s, 0) for s in SEVERITIES}


def invocation(
    root: Path,
    phase: str = "review",
    role: str = "reviewer-general",
    *,
    ticket: str = "pt-1",
    model: str = "openai-codex/gpt-5.3-codex",
    thinking: str | None = "high",
    attempt: int = 1,
    timeout: float | None = None,
    prompt: str = "Review ticket pt-1.\n",
) -> Invocation:
    artifact_dir = root / ".tf" / "knowledge" / "tickets" / ticket
    artifact_dir.mkdir(parents=True, exist_ok=True)
    prompt_file = artifact_dir / "prompts" / f"attempt-{attempt}" / f"{phase}-{role}.md"
    prompt_file.parent.mkdir(parents=True, exist_ok=True)
    prompt_file.write_text(prompt, encoding="utf-8")
    return Invocation(
        ticket_id=ticket,
        phase=phase,
        role=role,
        model=model,
        thinking=thinking,
        attempt=attempt,
        root=root,
        artifact_dir=artifact_dir,
        output=artifact_dir / OUTPUTS[(phase, role)],
        prompt=prompt,
        prompt_file=prompt_file,
        chain_context=artifact_dir / "chain-context.json",
        log_file=artifact_dir / "logs" / f"attempt-{attempt}" / f"{phase}-{role}.log",
        timeout=timeout,
    )


# --- CommandExecutor.check ------------------------------------------------------------------


def _executable(path: Path, text: str = "#!/bin/sh\nexit 0\n", mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (None, "executor.command is not set"),
        ([], "executor.command is not set"),
        (
            ["definitely-not-a-real-agent-xyz", "--x"],
            "definitely-not-a-real-agent-xyz: not found on PATH",
        ),
        (["bin/agent"], "bin/agent: not an executable file"),  # exists, not executable
        (["bin/missing"], "bin/missing: not an executable file"),
        (["bin"], "bin: not found on PATH"),  # a bare name is looked up on PATH only
        (["bin/"], "bin/: not an executable file"),  # a directory
        (["/no/such/agent"], "/no/such/agent: not an executable file"),
    ],
)
def test_check_refuses(project: Path, argv: list[str] | None, problem: str) -> None:
    _executable(project / "bin" / "agent", mode=0o644)
    with pytest.raises(ExecutorError) as info:
        CommandExecutor(argv, project).check()
    assert info.value.setting == "executor.command"
    assert problem in str(info.value)
    assert str(info.value).startswith("executor.command: ")


def test_check_passes_for_real_programs(project: Path, tmp_path: Path) -> None:
    CommandExecutor([sys.executable, "-c", "pass"], project).check()
    CommandExecutor(["sh"], project).check()
    _executable(project / "bin" / "agent")
    CommandExecutor(["bin/agent", "{model}"], project).check()  # relative to the project root
    CommandExecutor(["./bin/agent"], project).check()
    elsewhere = _executable(tmp_path / "tools" / "my-agent")
    CommandExecutor([str(elsewhere)], project).check()
    # A bare name is looked up on the executor's own PATH.
    CommandExecutor(["my-agent"], project, environ={"PATH": str(elsewhere.parent)}).check()
    with pytest.raises(ExecutorError):
        CommandExecutor(["my-agent"], project, environ={"PATH": str(project)}).check()


def test_check_does_not_run_anything(project: Path) -> None:
    marker = project / "ran"
    _executable(project / "bin" / "agent", f"#!/bin/sh\ntouch {marker}\n")
    CommandExecutor(["bin/agent"], project).check()
    assert not marker.exists()


# --- CommandExecutor.invoke -----------------------------------------------------------------


@pytest.fixture
def dump_agent(tmp_path: Path) -> Path:
    path = tmp_path / "dump_agent.py"
    path.write_text(DUMP_AGENT, encoding="utf-8")
    return path


def test_invoke_formats_argv_sets_env_and_feeds_stdin(project: Path, dump_agent: Path) -> None:
    argv = [
        sys.executable,
        str(dump_agent),
        "{output}",
        "--model",
        "{model}",
        "--ticket={ticket_id}",
        "{phase}/{role}/{attempt}/{thinking}",
        "{artifact_dir}",
        "{prompt_file}",
        "{chain_context}",
        "literal {{braces}}",
    ]
    environ = {"PATH": os.environ["PATH"], "EXTRA": "kept"}
    inv = invocation(project, "fix", "fixer", model=STRONG, attempt=2, prompt="Fix it ✓\n")
    result = CommandExecutor(argv, project, environ=environ).invoke(inv)
    assert result.ok is True, result
    assert result.exit_code == 0
    assert result.failure is None
    seen = json.loads(inv.output.read_text(encoding="utf-8"))
    assert seen["argv"] == [
        str(inv.output),
        "--model",
        STRONG,
        "--ticket=pt-1",
        "fix/fixer/2/high",
        str(inv.artifact_dir),
        str(inv.prompt_file),
        str(inv.chain_context),
        "literal {braces}",
    ]
    mark = seen["env"].pop("TF_FSM_OWNER")  # every process tf_fsm starts carries it
    assert mark.startswith(f"{os.getpid()}.")
    assert seen["env"] == {
        "EXTRA": "kept",
        "TF_TICKET_ID": "pt-1",
        "TF_PHASE": "fix",
        "TF_ROLE": "fixer",
        "TF_MODEL": STRONG,
        "TF_THINKING": "high",
        "TF_ATTEMPT": "2",
        "TF_ARTIFACT_DIR": str(inv.artifact_dir),
        "TF_OUTPUT": str(inv.output),
        "TF_PROMPT_FILE": str(inv.prompt_file),
        "TF_CHAIN_CONTEXT": str(inv.chain_context),
    }
    assert seen["stdin"] == "Fix it ✓\n" == inv.prompt_file.read_text(encoding="utf-8")
    assert Path(seen["cwd"]) == project
    assert result.log.startswith(f"$ {sys.executable} {dump_agent} {inv.output} --model {STRONG}")
    assert "# exit code: 0" in result.log
    assert "## stdout\nagent stdout\n" in result.log
    assert "stderr line 29" in result.log


def test_invoke_without_thinking_sets_empty_variable(project: Path, dump_agent: Path) -> None:
    inv = invocation(project, thinking=None)
    argv = [sys.executable, str(dump_agent), "{output}", "[{thinking}]"]
    CommandExecutor(argv, project, environ={"PATH": os.environ["PATH"]}).invoke(inv)
    seen = json.loads(inv.output.read_text(encoding="utf-8"))
    assert seen["env"]["TF_THINKING"] == ""
    assert seen["argv"][1] == "[]"


def test_invoke_inherits_the_process_environment_by_default(
    project: Path, dump_agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXTRA", "from the parent")
    monkeypatch.setenv("TF_PHASE", "stale value from the parent")
    inv = invocation(project, "close", "closer")
    CommandExecutor([sys.executable, str(dump_agent), "{output}"], project).invoke(inv)
    seen = json.loads(inv.output.read_text(encoding="utf-8"))
    assert seen["env"]["EXTRA"] == "from the parent"
    assert seen["env"]["TF_PHASE"] == "close"  # the invocation's own value wins


@pytest.mark.parametrize("code", [1, 3, 77])
def test_invoke_reports_exit_code_and_stderr_tail(
    project: Path, dump_agent: Path, code: int
) -> None:
    inv = invocation(project)
    environ = {"PATH": os.environ["PATH"], "DUMP_EXIT": str(code)}
    result = CommandExecutor(
        [sys.executable, str(dump_agent), "{output}"], project, environ
    ).invoke(inv)
    assert result.ok is False
    assert result.exit_code == code
    assert result.failure == f"exit code {code}"
    tail = result.stderr_tail.split("\n")
    assert tail == [f"stderr line {i}" for i in range(10, 30)]  # the last 20 lines
    assert f"# exit code: {code}" in result.log


def test_invoke_timeout_kills_and_says_timed_out(project: Path) -> None:
    # a timeout that leaves a loaded machine time to start bash and say it hangs
    inv = invocation(project, timeout=2.5)
    argv = ["bash", "-c", "echo hanging >&2; sleep 300 & sleep 300"]
    started = time.monotonic()
    result = CommandExecutor(argv, project).invoke(inv)
    assert time.monotonic() - started < 30
    assert result.ok is False
    assert result.exit_code is None
    assert result.failure is not None
    assert "timed out" in result.failure
    assert "2.5s" in result.failure
    assert result.stderr_tail == "hanging"
    assert "TIMED OUT" in result.log


# --- OutputMark -----------------------------------------------------------------------------


def test_output_mark_missing_then_untouched(tmp_path: Path) -> None:
    path = tmp_path / "review-general.md"
    mark = OutputMark.of(path)
    assert mark == OutputMark(False)
    assert mark.written_since(path) is False
    path.write_text("x")
    assert mark.written_since(path) is True


def test_output_mark_existing_untouched_or_read(tmp_path: Path) -> None:
    path = tmp_path / "review-general.md"
    path.write_text("from attempt 1\n")
    mark = OutputMark.of(path)
    assert mark.exists
    path.read_text()
    os.stat(path)
    assert mark.written_since(path) is False


def test_output_mark_rewritten_in_place_with_same_content(tmp_path: Path) -> None:
    path = tmp_path / "review-general.md"
    path.write_text("same\n")
    mark = OutputMark.of(path)
    time.sleep(0.05)  # an agent takes longer than the file system's timestamp granularity
    path.write_text("same\n")
    assert path.stat().st_ino == mark.inode
    assert path.stat().st_size == mark.size
    assert mark.written_since(path) is True


def test_output_mark_replaced_atomically_with_same_content(tmp_path: Path) -> None:
    path = tmp_path / "review-general.md"
    path.write_text("same\n")
    mark = OutputMark.of(path)
    tmp = tmp_path / "review-general.md.tmp"
    tmp.write_text("same\n")
    os.replace(tmp, path)  # what an atomic writer does: a new inode, no delay needed
    assert mark.written_since(path) is True


def test_output_mark_deleted_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "review-general.md"
    path.write_text("old\n")
    mark = OutputMark.of(path)
    path.unlink()
    assert mark.written_since(path) is False


# --- the scripted executor ------------------------------------------------------------------


def _scenario(tmp_path: Path, data: dict[str, Any], name: str = "scenario.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def finding(fid: str, severity: str = "Major", **extra: Any) -> dict[str, Any]:
    return {
        "id": fid,
        "severity": severity,
        "text": extra.pop("text", f"`src/parser.py:{len(fid)}` - problem {fid}"),
        **extra,
    }


SCENARIO: dict[str, Any] = {
    "findings": [
        finding("F1", "Major", reviewer="reviewer-general", fixedBy=[STRONG]),
        finding("F2", "Minor", reviewer="reviewer-second-opinion", fixedBy="*"),
        finding("F3", "Critical", reviewer="reviewer-general"),  # fixedBy defaults to "*"
        finding("F4", "Suggestions", reviewer="reviewer-spec-audit", fixedBy=[]),
    ]
}


def _review(executor: ScriptedExecutor, root: Path, role: str, **kw: Any) -> str:
    inv = invocation(root, kw.pop("phase", "review"), role, **kw)
    result = executor.invoke(inv)
    assert result.ok, result
    return inv.output.read_text(encoding="utf-8")


def test_scripted_review_files_are_in_the_standard_format(project: Path, tmp_path: Path) -> None:
    agent = ScriptedExecutor(load_scenario(_scenario(tmp_path, SCENARIO)))
    general = _review(agent, project, "reviewer-general")
    assert general.startswith("# Review: pt-1\n\n## Critical (must fix)\n")
    assert parse_review(general).counts == counts(Critical=1, Major=1)
    assert parse_review(general).source == "statistics"
    assert {k: v for k, v in extract_findings(general).items() if v} == {
        "Critical": ["`src/parser.py:2` - problem F3 *(reviewer-general)*"],
        "Major": ["`src/parser.py:2` - problem F1 *(reviewer-general)*"],
    }
    second = _review(agent, project, "reviewer-second-opinion")
    assert parse_review(second).counts == counts(Minor=1)
    spec = _review(agent, project, "reviewer-spec-audit")
    assert parse_review(spec).counts == counts(Suggestions=1)


def test_scripted_fix_clears_per_fixed_by_and_remembers(project: Path, tmp_path: Path) -> None:
    path = _scenario(tmp_path, SCENARIO)
    agent = ScriptedExecutor(load_scenario(path))
    fix = invocation(project, "fix", "fixer", model=BASE_FIXER)
    assert agent.invoke(fix).ok
    fixes = fix.output.read_text(encoding="utf-8")
    # The base fixer clears what any fixer clears (F2, F3), not F1 (strong only) or F4 (none).
    assert parse_review(fixes).counts == counts(Critical=1, Minor=1)
    memory = json.loads((fix.artifact_dir / MEMORY_FILE).read_text(encoding="utf-8"))
    assert memory == {"fixed": ["F2", "F3"]}
    assert "## Not Fixed" in fixes
    assert "problem F1" in fixes.split("## Not Fixed")[1]

    verify = _review(agent, project, "reviewer-general", phase="verify")
    assert parse_review(verify).counts == counts(Major=1)
    # A fresh agent (a new run, a new process) reads the same memory from the ticket dir.
    fresh = ScriptedExecutor(load_scenario(path))
    assert parse_review(_review(fresh, project, "reviewer-general", attempt=2)).counts == counts(
        Major=1
    )
    assert parse_review(_review(fresh, project, "reviewer-second-opinion", attempt=2)).counts == (
        counts()
    )

    strong = invocation(project, "fix", "fixer", model=STRONG, attempt=2)
    assert fresh.invoke(strong).ok
    assert parse_review(strong.output.read_text("utf-8")).counts == counts(Major=1)
    memory = json.loads((fix.artifact_dir / MEMORY_FILE).read_text(encoding="utf-8"))
    assert memory == {"fixed": ["F1", "F2", "F3"]}
    assert parse_review(_review(fresh, project, "reviewer-general", attempt=2)).counts == counts()
    spec = _review(fresh, project, "reviewer-spec-audit", attempt=2)
    assert parse_review(spec).counts == counts(Suggestions=1)  # fixedBy [] : nobody clears it


def test_scripted_memory_is_per_ticket(project: Path, tmp_path: Path) -> None:
    agent = ScriptedExecutor(load_scenario(_scenario(tmp_path, SCENARIO)))
    assert agent.invoke(invocation(project, "fix", "fixer", model=STRONG, ticket="pt-1")).ok
    assert parse_review(_review(agent, project, "reviewer-general", ticket="pt-1")).counts == (
        counts()
    )
    other = _review(agent, project, "reviewer-general", ticket="pt-2")
    assert parse_review(other).counts == counts(Critical=1, Major=1)


@pytest.mark.parametrize(
    ("failure", "phase", "role", "attempt", "fails"),
    [
        ({"phase": "implement"}, "implement", "worker", 1, True),
        ({"phase": "implement"}, "implement", "worker", 3, True),
        ({"phase": "implement"}, "research", "researcher", 1, False),
        ({"phase": "implement", "attempt": 1}, "implement", "worker", 1, True),
        ({"phase": "implement", "attempt": 1}, "implement", "worker", 2, False),
        (
            {"phase": "review", "role": "reviewer-spec-audit"},
            "review",
            "reviewer-spec-audit",
            1,
            True,
        ),
        (
            {"phase": "review", "role": "reviewer-spec-audit"},
            "review",
            "reviewer-general",
            1,
            False,
        ),
        (
            {"phase": "review", "role": "reviewer-spec-audit"},
            "verify",
            "reviewer-spec-audit",
            1,
            False,
        ),
        ({"phase": "fix", "attempt": 2, "role": "fixer"}, "fix", "fixer", 2, True),
        ({"phase": "fix", "attempt": 2, "role": "fixer"}, "fix", "fixer", 1, False),
    ],
)
def test_scripted_failures_by_phase_attempt_role(
    project: Path,
    tmp_path: Path,
    failure: dict[str, Any],
    phase: str,
    role: str,
    attempt: int,
    fails: bool,
) -> None:
    spec = {"findings": [], "failures": [{**failure, "message": "agent crashed: boom"}]}
    agent = ScriptedExecutor(load_scenario(_scenario(tmp_path, spec)))
    inv = invocation(project, phase, role, attempt=attempt)
    result = agent.invoke(inv)
    assert result.ok is (not fails)
    assert inv.output.exists() is (not fails)
    if fails:
        assert result.exit_code == 1
        assert result.failure == "exit code 1: agent crashed: boom"
        assert result.stderr_tail == "agent crashed: boom"
    else:
        assert result.exit_code == 0
        assert result.failure is None


def test_scripted_per_ticket_scenarios(project: Path, tmp_path: Path) -> None:
    spec = {
        **SCENARIO,
        "tickets": {
            "pt-7": {"findings": []},
            "pt-8": {"findings": [], "failures": [{"phase": "close", "message": "pt-8 only"}]},
        },
    }
    agent = ScriptedExecutor(load_scenario(_scenario(tmp_path, spec)))
    assert parse_review(_review(agent, project, "reviewer-general", ticket="pt-1")).counts == (
        counts(Critical=1, Major=1)
    )
    assert parse_review(_review(agent, project, "reviewer-general", ticket="pt-7")).counts == (
        counts()
    )
    assert agent.invoke(invocation(project, "close", "closer", ticket="pt-7")).ok
    failed = agent.invoke(invocation(project, "close", "closer", ticket="pt-8"))
    assert failed.ok is False
    assert failed.failure == "exit code 1: pt-8 only"
    assert agent.invoke(invocation(project, "close", "closer", ticket="pt-1")).ok


@pytest.mark.parametrize(
    ("phase", "role", "starts"),
    [
        ("research", "researcher", "# Research: pt-1\n"),
        ("implement", "worker", "# Implementation: pt-1\n"),
        ("close", "closer", "# Close: pt-1\n"),
    ],
)
def test_scripted_other_phases_write_their_artifact(
    project: Path, phase: str, role: str, starts: str
) -> None:
    agent = ScriptedExecutor(load_scenario(None))
    inv = invocation(project, phase, role, model="kimi-coding/k2p5")
    result = agent.invoke(inv)
    assert result.ok
    text = inv.output.read_text(encoding="utf-8")
    assert text.startswith(starts)
    assert f"wrote {inv.output.name}" in result.log


def test_scripted_delay(project: Path, tmp_path: Path) -> None:
    agent = ScriptedExecutor(load_scenario(_scenario(tmp_path, {"delaySeconds": 0.3})))
    result = agent.invoke(invocation(project, "implement", "worker"))
    assert result.ok
    assert result.duration >= 0.3


def test_load_scenario_none_is_the_demo() -> None:
    scenario = load_scenario(None)
    assert [f.id for f in scenario.findings] == [f["id"] for f in DEMO_SCENARIO["findings"]]
    assert scenario.findings[0].fixedBy == [STRONG]
    assert scenario.failures == []
    assert scenario.tickets == {}


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"findings": [], "bogus": 1}, "bogus"),
        ({"findings": [{**finding("F1"), "fixdBy": "*"}]}, "findings.0.fixdBy"),
        ({"failures": [{"phase": "fix", "attemp": 1}]}, "failures.0.attemp"),
        ({"tickets": {"pt-7": {"findings": [], "extra": True}}}, "tickets.pt-7.extra"),
        ({"tickets": {"pt-7": {"tickets": {}}}}, "tickets.pt-7.tickets"),
    ],
)
def test_load_scenario_unknown_key_names_file_and_key(
    tmp_path: Path, data: dict[str, Any], key: str
) -> None:
    path = _scenario(tmp_path, data)
    with pytest.raises(SettingsError) as info:
        load_scenario(path)
    assert info.value.path == path
    assert [p.key for p in info.value.problems] == [key]
    message = str(info.value)
    assert message.startswith(f"{path}: {key}: ")
    assert "Extra inputs are not permitted" in message


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("{not json", ""),
        ("[]", ""),
        (json.dumps({"findings": [finding("F1", "major")]}), "findings.0.severity"),
        (json.dumps({"delaySeconds": -1}), "delaySeconds"),
    ],
)
def test_load_scenario_invalid_content_is_a_settings_error(
    tmp_path: Path, text: str, key: str
) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SettingsError) as info:
        load_scenario(path)
    assert str(path) in str(info.value)
    assert [p.key for p in info.value.problems] == [key]


def test_load_scenario_missing_file_is_an_executor_error(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    with pytest.raises(ExecutorError) as info:
        load_scenario(path)
    assert info.value.setting == "executor.scenario"
    assert str(info.value) == f"executor.scenario: {path}: scenario file not found"


@pytest.mark.parametrize("kind", ["directory", "not-utf8"])
def test_load_scenario_unusable_file_is_an_executor_error(tmp_path: Path, kind: str) -> None:
    """Regression: at 8ccc9d9 these escaped as IsADirectoryError / UnicodeDecodeError."""
    path = tmp_path / "scenario.json"
    if kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(b'\xff\xfe{"findings": []}')
    with pytest.raises(TfFsmError) as info:
        load_scenario(path)
    assert isinstance(info.value, ExecutorError)
    assert info.value.setting == "executor.scenario"
    assert str(path) in str(info.value)


def test_the_registry_builds_one_executor_per_settings_kind(
    project: Path, write_settings: Any
) -> None:
    """`executor.kind` picks a factory from tf_fsm.executors.EXECUTORS: every kind the settings
    accept has one, and each builds the executor it names."""
    from typing import get_args

    from tf_fsm.executors import EXECUTORS, make_executor
    from tf_fsm.executors.handoff import HandoffExecutor
    from tf_fsm.settings.load import load_settings
    from tf_fsm.settings.schema import Executor as ExecutorSettings

    kinds = set(get_args(ExecutorSettings.model_fields["kind"].annotation))
    assert set(EXECUTORS) == kinds
    built = {}
    for kind in sorted(kinds):
        extra = {"command": ["true"]} if kind == "command" else {}
        write_settings({"executor": {"kind": kind, **extra}})
        built[kind] = type(make_executor(load_settings(project), project))
    assert built == {
        "command": CommandExecutor,
        "handoff": HandoffExecutor,
        "scripted": ScriptedExecutor,
    }
