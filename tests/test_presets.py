"""Presets for pi, Claude Code and Codex: argv, mapping problems, output parsers, `doctor`,
the failure classes and the backoff (pure parts), and the settings keys."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tf_fsm.errors import SettingsError
from tf_fsm.executors.failures import backoff_delay, classify
from tf_fsm.executors.presets import PRESETS
from tf_fsm.executors.usage import AgentReport, Usage, parse_claude, parse_codex, parse_pi
from tf_fsm.process import launcher
from tf_fsm.settings.load import settings_from_dict

# -- argv --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "model", "thinking", "argv"),
    [
        (
            "pi",
            "zai/glm-5",
            "high",
            [
                "pi",
                "-p",
                "--mode",
                "json",
                "--no-session",
                "--model",
                "zai/glm-5",
                "--thinking",
                "high",
            ],
        ),
        (
            "pi",
            "zai/glm-5",
            None,
            ["pi", "-p", "--mode", "json", "--no-session", "--model", "zai/glm-5"],
        ),
        (
            "claude",
            "anthropic/claude-sonnet-4-5",
            "xhigh",
            [
                "claude",
                "-p",
                "--output-format",
                "json",
                "--permission-mode",
                "acceptEdits",
                "--no-session-persistence",
                "--model",
                "claude-sonnet-4-5",
                "--effort",
                "xhigh",
            ],
        ),
        (
            "codex",
            "openai-codex/gpt-5.3-codex",
            "medium",
            [
                "codex",
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--sandbox",
                "workspace-write",
                "-m",
                "gpt-5.3-codex",
                "-c",
                "model_reasoning_effort=medium",
                "-",
            ],
        ),
        (
            "codex",
            "openai/gpt-5.1",
            "off",
            [
                "codex",
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--sandbox",
                "workspace-write",
                "-m",
                "gpt-5.1",
                "-c",
                "model_reasoning_effort=none",
                "-",
            ],
        ),
    ],
)
def test_preset_argv(name: str, model: str, thinking: str | None, argv: list[str]) -> None:
    got, problems = PRESETS[name].argv(model, thinking)
    assert (got, problems) == (argv, [])


def test_extra_args_and_program_and_the_prompt_dash_stays_last() -> None:
    argv, _ = PRESETS["codex"].argv("openai/o3", "high", "/opt/codex", ["--oss"])
    assert argv[0] == "/opt/codex"
    assert argv[-2:] == ["--oss", "-"]


@pytest.mark.parametrize(
    ("name", "model", "thinking", "needle"),
    [
        ("pi", "zai/glm-5", "max", "thinking 'max': pi has no such level"),
        ("claude", "anthropic/claude-opus-4-1", "off", "thinking 'off': claude has no such"),
        ("claude", "anthropic/claude-opus-4-1", "minimal", "thinking 'minimal'"),
        ("claude", "zai/glm-5", "high", "claude does not know provider 'zai'"),
        ("codex", "kimi-coding/k2p5", "high", "codex does not know provider 'kimi-coding'"),
        ("codex", "openai/o3", "max", "thinking 'max': codex has no such level"),
    ],
)
def test_unmappable_settings_are_named_and_left_out(
    name: str, model: str, thinking: str, needle: str
) -> None:
    argv, problems = PRESETS[name].argv(model, thinking)
    assert len(problems) == 1 and needle in problems[0], problems
    if "thinking" in needle:
        assert thinking not in argv  # the CLI's default applies


# -- output parsers ----------------------------------------------------------------------------

PI_OK = [
    {"type": "session", "version": 3},
    {"type": "message_end", "message": {"role": "user", "content": []}},
    {"type": "message_end", "message": {
        "role": "assistant", "stopReason": "toolUse",
        "usage": {"input": 900, "output": 100, "cacheRead": 100, "cacheWrite": 0,
                  "cost": {"total": 0.0012}}}},
    {"type": "message_end", "message": {
        "role": "assistant", "stopReason": "stop",
        "usage": {"input": 1000, "output": 50, "cacheRead": 0, "cacheWrite": 0,
                  "cost": {"total": 0.0011}}}},
]  # fmt: skip
PI_429 = [
    {"type": "message_end", "message": {
        "role": "assistant", "stopReason": "error", "errorMessage": "429 Rate limit reached",
        "usage": {"input": 0, "output": 0, "cost": {"total": 0}}}},
]  # fmt: skip


def lines(events: list[dict[str, Any]]) -> str:
    return "noise that is not JSON\n" + "\n".join(json.dumps(e) for e in events) + "\n"


def test_parse_pi_sums_assistant_messages() -> None:
    report = parse_pi(lines(PI_OK))
    assert report == AgentReport(Usage(2000, 150, pytest.approx(0.0023)), None)  # type: ignore[arg-type]


def test_parse_pi_error_is_the_last_calls_only() -> None:
    assert parse_pi(lines(PI_429)).error == "429 Rate limit reached"
    assert parse_pi(lines(PI_429 + PI_OK[2:])).error is None  # pi retried and succeeded


def test_parse_claude_result() -> None:
    ok = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "done",
        "total_cost_usd": 0.0421,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 1000,
        },
    }
    assert parse_claude(json.dumps(ok)) == AgentReport(Usage(1110, 5, 0.0421), None)
    failed = {**ok, "is_error": True, "result": "API Error: 529 overloaded"}
    assert parse_claude(json.dumps(failed)).error == "API Error: 529 overloaded"


def test_parse_codex_turns() -> None:
    events = [
        {"type": "thread.started", "thread_id": "t"},
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 500, "cached_input_tokens": 400, "output_tokens": 20},
        },
        {"type": "turn.failed", "error": {"message": "stream disconnected before completion"}},
    ]
    report = parse_codex(lines(events))
    assert report.usage == Usage(500, 20, 0.0)
    assert report.error == "stream disconnected before completion"


CODEX_DATA = Path(__file__).resolve().parent / "data" / "codex"


def test_parse_codex_real_output() -> None:
    """`codex exec --json` as Codex 0.169.0 printed it against the stub model server: one turn
    of two model calls (a shell command writing the artifact, then the answer), whose
    `turn.completed` sums both calls' usage. Its `item.completed` of type `error` (no model
    metadata for a stub model's name) is a warning, not the turn's failure. Errors come as
    `error` and `turn.failed` events (the stub answering 429, then 500)."""
    ok = parse_codex((CODEX_DATA / "exec-0.169.0-write.jsonl").read_text(encoding="utf-8"))
    assert ok == AgentReport(Usage(2000, 200, 0.0), None)
    failed = parse_codex((CODEX_DATA / "exec-0.169.0-429.jsonl").read_text(encoding="utf-8"))
    assert failed == AgentReport(None, "exceeded retry limit, last status: 429 Too Many Requests")
    verdict = classify(timed_out=False, exit_code=1, report=failed)
    assert verdict is not None and verdict[0] == "provider"
    # An HTTP 500 is reported without its status code, in Codex's own words: still transient.
    server = parse_codex((CODEX_DATA / "exec-0.169.0-500.jsonl").read_text(encoding="utf-8"))
    assert server.error is not None and "high demand" in server.error
    verdict = classify(timed_out=False, exit_code=1, report=server)
    assert verdict is not None and verdict[0] == "provider"


@pytest.mark.parametrize("parse", [parse_pi, parse_claude, parse_codex])
def test_parsers_ignore_what_is_not_their_output(parse: Callable[[str], AgentReport]) -> None:
    assert parse("plain text\n{not json\n[1, 2]\n") == AgentReport()


# -- failure classes and backoff ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("timed_out", "exit_code", "error", "expected"),
    [
        (True, None, None, "timeout"),
        (False, -9, None, "killed"),
        (False, 137, None, "killed"),
        (False, 0, "429 Rate limit reached", "provider"),  # pi exits 0 after a 429
        (False, 1, "API Error: 503 Service Unavailable", "provider"),
        (False, 0, "Connection error.", "provider"),
        (False, 0, "401 Incorrect API key provided", "agent_error"),
        (False, 3, None, "crash"),
        (False, 0, None, None),
    ],
)
def test_classify(
    timed_out: bool, exit_code: int | None, error: str | None, expected: str | None
) -> None:
    verdict = classify(timed_out=timed_out, exit_code=exit_code, report=AgentReport(None, error))
    assert (verdict[0] if verdict else None) == expected


def test_backoff_is_exponential_with_bounded_jitter() -> None:
    assert backoff_delay(3, 0) == 0
    assert [backoff_delay(n, 2, rng=lambda: 0.0) for n in (1, 2, 3)] == [1, 2, 4]
    assert [backoff_delay(n, 2, rng=lambda: 1.0) for n in (1, 2, 3)] == [2, 4, 8]
    assert backoff_delay(30, 2, rng=lambda: 1.0) == 300  # capped


# -- settings ------------------------------------------------------------------------------------


def test_executor_settings_keys() -> None:
    loaded = settings_from_dict(
        {
            "executor": {
                "preset": "codex",
                "maxRestarts": 0,
                "restartBackoffSeconds": 0.5,
                "extraArgs": ["--output-last-message", "{output}"],
            },
            "workflow": {"escalation": {"maxCostUsd": 2.5}},
        }
    )
    conf = loaded.settings.executor
    assert (conf.preset, conf.maxRestarts, conf.restartBackoffSeconds) == ("codex", 0, 0.5)
    assert loaded.workflow.escalation.maxCostUsd == 2.5
    defaults = settings_from_dict({}).settings
    assert (defaults.executor.maxRestarts, defaults.executor.restartBackoffSeconds) == (2, 2.0)
    assert defaults.workflow.escalation.maxCostUsd is None


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ({"executor": {"preset": "aider"}}, "executor.preset"),
        ({"executor": {"maxRestarts": -1}}, "executor.maxRestarts"),
        ({"executor": {"extraArgs": ["{outptu}"]}}, "executor.extraArgs"),
        ({"workflow": {"escalation": {"maxCostUsd": 0}}}, "workflow.escalation.maxCostUsd"),
        ({"executor": {"maxRestart": 1}}, "executor.maxRestart"),
    ],
)
def test_bad_executor_settings_are_refused(raw: dict[str, Any], where: str) -> None:
    with pytest.raises(SettingsError) as info:
        settings_from_dict(raw)
    assert where in str(info.value)


# -- doctor --------------------------------------------------------------------------------------


def fake_cli(directory: Path, name: str, version: str = "9.9.9", code: int = 0) -> Path:
    path = directory / name
    path.write_text(f"#!/bin/sh\necho '{version}'\nexit {code}\n")
    path.chmod(0o755)
    return path


def doctor(write_settings: Callable[..., Path], settings: dict[str, Any], *args: str) -> Any:
    write_settings(settings)
    return run_cli("doctor", *args)


def test_doctor_ready(tmp_path: Path, write_settings: Callable[..., Path]) -> None:
    pi = fake_cli(tmp_path, "pi", "0.73.1")
    meta = {
        n: {"model": "zai/glm-5", "thinking": "high"}
        for n in (
            "worker",
            "research",
            "fast",
            "general",
            "review-general",
            "review-spec",
            "review-secop",
            "fixer",
        )
    }
    result = doctor(
        write_settings, {"metaModels": meta, "executor": {"preset": "pi", "program": str(pi)}}
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"agent: {pi} -> {pi} (0.73.1)" in result.stdout
    assert f"implement worker                   {pi} -p --mode json" in result.stdout
    assert "ok: every setting maps" in result.stdout
    setpriv = shutil.which("setpriv")
    if launcher.available():
        said = "note: agents die with tf_fsm (started and ended by its launcher process)"
    elif setpriv:
        said = f"note: agents die with tf_fsm (parent-death signal set by {setpriv})"
    else:
        said = "note: agents die with tf_fsm (parent-death signal set by a hook before exec"
    assert said in result.stdout


def test_doctor_names_what_it_cannot_map(
    tmp_path: Path, write_settings: Callable[..., Path]
) -> None:
    claude = fake_cli(tmp_path, "claude", "2.1.197 (Claude Code)")
    settings = {
        "metaModels": {"fixer": {"model": "anthropic/claude-haiku-4-5", "thinking": "minimal"}},
        "executor": {"preset": "claude", "program": str(claude)},
    }
    result = doctor(write_settings, settings, "--json")
    assert result.returncode == 3, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["version"] == "2.1.197 (Claude Code)"
    assert any("fixer (attempt 1): thinking 'minimal'" in p for p in data["problems"])
    assert any("claude does not know provider 'kimi-coding'" in p for p in data["problems"])
    fix = next(c for c in data["commands"] if c["role"] == "fixer")
    assert fix["argv"][-2:] == ["--model", "claude-haiku-4-5"]  # no --effort


@pytest.mark.parametrize(
    ("executor", "needle"),
    [
        ({"preset": "codex", "program": "no-such-codex-xyz"}, "npm install -g @openai/codex"),
        ({}, "neither executor.preset nor executor.command"),
    ],
)
def test_doctor_not_ready(
    write_settings: Callable[..., Path], executor: dict[str, Any], needle: str
) -> None:
    result = doctor(write_settings, {"executor": executor})
    assert result.returncode == 2, result.stdout + result.stderr
    assert needle in result.stderr


def test_doctor_version_failure_is_not_ready(
    tmp_path: Path, write_settings: Callable[..., Path]
) -> None:
    broken = fake_cli(tmp_path, "pi", "node: not found", code=127)
    result = doctor(write_settings, {"executor": {"preset": "pi", "program": str(broken)}})
    assert result.returncode == 2 and "--version` failed (exit code 127)" in result.stderr


def test_doctor_with_a_command_shows_its_argv(write_settings: Callable[..., Path]) -> None:
    command = ["/bin/sh", "-c", "exit 0", "{role}", "{model}"]
    result = doctor(write_settings, {"executor": {"command": command}}, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    review = next(c for c in data["commands"] if c["role"] == "reviewer-spec-audit")
    assert review["argv"] == [
        "/bin/sh",
        "-c",
        "exit 0",
        "reviewer-spec-audit",
        "openai-codex/gpt-5.1-codex-mini",
    ]
    assert any("usage, cost and provider errors are not read" in n for n in data["notes"])


def test_doctor_for_executors_without_a_cli(write_settings: Callable[..., Path]) -> None:
    result = doctor(write_settings, {"executor": {"kind": "scripted"}})
    assert result.returncode == 0 and 'executor.kind is "scripted"' in result.stdout
