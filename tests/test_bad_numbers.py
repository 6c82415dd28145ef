"""Bad numbers and deep nesting in the project's files are bad input (exit 2, naming the file
and the key or line), caught before any agent runs: JSON nested too deeply, an integer too long
to read, a setting past its bound, a retry-state or journal number no run could have written."""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.conftest import run_cli, tk_ticket
from tf_fsm.core.journal_codec import JournalLineError, decode
from tf_fsm.errors import SettingsError
from tf_fsm.settings.load import load_settings, settings_from_dict
from tf_fsm.settings.project import SETTINGS_RECORD_RELPATH

WriteSettings = Callable[[dict[str, Any]], Path]

TICKET = "pt-1"
DEEP_ARRAYS = "[" * 100_000
DEEP_OBJECTS = '{"a":' * 100_000


def _write_raw_settings(project: Path, text: str) -> Path:
    path = project / ".tf" / "config" / "settings.json"
    path.write_text(text, encoding="utf-8")
    return path


def _ticket_dir(project: Path) -> Path:
    return project / ".tf" / "knowledge" / "tickets" / TICKET


def _write_ticket(project: Path) -> None:
    path = project / ".tickets" / f"{TICKET}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tk_ticket(TICKET), encoding="utf-8")


def _marking_project(project: Path, write_settings: WriteSettings) -> Path:
    """A project with the ticket, whose agent only leaves a marker file: the file whose
    absence proves that no agent ran."""
    marker = project / "agent-ran"
    write_settings({"executor": {"command": ["touch", str(marker)]}})
    _write_ticket(project)
    return marker


def _assert_bad_input(result: Any, *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- deep nesting: settings.json -------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        DEEP_ARRAYS,  # json.loads itself gives up (RecursionError)
        DEEP_OBJECTS,
        '{"checkers": ' + _nested(600) + "}",  # parses, but deeper than any copy or walk can go
        # a repeated key sends the file through the second, pair-keeping parse
        '{"ralph": {}, "ralph": {}, "checkers": ' + _nested(600) + "}",
    ],
    ids=["arrays", "objects", "parses-then-too-deep", "with-a-repeated-key"],
)
@pytest.mark.parametrize("command", [["settings"], ["settings", "--json"], ["status"]])
def test_deeply_nested_settings_exit_2_naming_the_file(
    project: Path, text: str, command: list[str]
) -> None:
    path = _write_raw_settings(project, text)
    result = run_cli(*command)
    _assert_bad_input(result, str(path), "nested too deeply", "more than 100 levels")
    assert result.stdout == ""


def test_nesting_up_to_the_limit_loads(project: Path) -> None:
    # 100 levels counting the top-level object: checkers holds 99.
    _write_raw_settings(project, '{"checkers": ' + _nested(99) + "}")
    assert load_settings(project).path is not None
    _write_raw_settings(project, '{"checkers": ' + _nested(100) + "}")
    with pytest.raises(SettingsError, match="nested too deeply"):
        load_settings(project)


def test_deeply_nested_settings_run_no_agent(project: Path, write_settings: WriteSettings) -> None:
    marker = project / "agent-ran"
    _write_ticket(project)
    path = _write_raw_settings(
        project,
        json.dumps({"executor": {"command": ["touch", str(marker)]}})[:-1]
        + ', "checkers": '
        + _nested(5000)
        + "}",
    )
    result = run_cli("run", TICKET)
    _assert_bad_input(result, str(path), "nested too deeply")
    assert not marker.exists()
    assert not _ticket_dir(project).exists()


def test_an_integer_too_long_to_read_exits_2(project: Path) -> None:
    path = _write_raw_settings(project, '{"ralph": {"maxIterations": ' + "9" * 5000 + "}}")
    result = run_cli("settings")
    _assert_bad_input(result, str(path), "an integer with more than 4300 digits")


def test_a_deep_settings_record_is_only_a_slower_status(project: Path) -> None:
    """The record `status` trusts is a cache: a damaged one is a miss, never an error."""
    _write_raw_settings(project, "{}")
    record = project / SETTINGS_RECORD_RELPATH
    record.parent.mkdir(parents=True)
    record.write_text(DEEP_OBJECTS, encoding="utf-8")
    result = run_cli("status")
    assert result.returncode == 0, result.stderr


# --- deep nesting: events.jsonl --------------------------------------------------------------

_STARTED = (
    '{"event":"AttemptStarted","ts":"2026-02-10T12:00:00.000Z","ticket":"pt-1","attempt":1,'
    '"trigger":"initial","escalation":{}}'
)


@pytest.mark.parametrize("line", [DEEP_ARRAYS, '{"event":"PhaseStarted","x":' + _nested(600) + "}"])
def test_a_too_deep_journal_line_is_a_line_error(line: str) -> None:
    data = f"{_STARTED}\n{line}\n{_STARTED}\n".encode()
    with pytest.raises(JournalLineError) as info:
        decode(data)
    assert info.value.line_number == 2
    assert "nested too deeply" in info.value.problem


def test_a_too_deep_last_line_is_corruption_not_a_torn_tail() -> None:
    """A crash tears a line tf_fsm wrote, and tf_fsm writes nothing that deep: the next append
    must not cut such a line away as a torn tail."""
    with pytest.raises(JournalLineError, match="line 2: nested too deeply"):
        decode(f"{_STARTED}\n{DEEP_ARRAYS}".encode())


@pytest.mark.parametrize(
    ("content", "command"),
    [
        (f"{_STARTED}\n{DEEP_OBJECTS}\n{_STARTED}\n", ["diagram", "--ticket", TICKET]),
        # unterminated, and still not a torn tail that the next append may cut away
        (f"{_STARTED}\n{DEEP_OBJECTS}", ["run", TICKET]),
    ],
)
def test_a_too_deep_journal_exits_2_naming_the_line(
    project: Path, write_settings: WriteSettings, content: str, command: list[str]
) -> None:
    marker = _marking_project(project, write_settings)
    journal = _ticket_dir(project) / "events.jsonl"
    journal.parent.mkdir(parents=True)
    journal.write_text(content, encoding="utf-8")
    result = run_cli(*command)
    _assert_bad_input(result, str(journal), "nested too deeply")
    # the reader names the line; the append's torn-tail check calls it the last line
    assert re.search(r"(line 2|last line): nested too deeply", result.stderr), result.stderr
    assert journal.read_text(encoding="utf-8") == content  # never cut away
    assert not marker.exists()


# --- setting bounds ----------------------------------------------------------------------------

#: (dotted key, its bound): the largest value each accepts
BOUNDS = [
    ("executor.timeoutSeconds", 604800),
    ("executor.waitSeconds", 604800),
    ("executor.stableSeconds", 604800),
    ("executor.restartBackoffSeconds", 604800),
    ("executor.maxRestarts", 1000),
    ("workflow.escalation.maxRetries", 1000),
    ("workflow.escalation.maxCostUsd", 1000000),
    ("workflow.qualityGateMaxRetries", 1000),
    ("workflow.qualityGates.0.timeoutSeconds", 604800),
    ("workflow.qualityGates.0.maxRetries", 1000),
    ("ralph.parallelWorkers", 256),
    ("ralph.maxIterations", 100000),
    ("workspace.conflicts.maxAttempts", 10),
    ("workspace.poolSize", 256),
    ("temporal.heartbeatTimeoutSeconds", 86400),
]


def _settings_with(key: str, value: float) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    if key.startswith("workflow.qualityGates.0."):
        gate: dict[str, Any] = {"name": "lint", "command": "true", key.rsplit(".", 1)[1]: value}
        return {"workflow": {"qualityGates": [gate]}}
    node = raw
    *sections, leaf = key.split(".")
    for section in sections:
        node = node.setdefault(section, {})
    node[leaf] = value
    return raw


@pytest.mark.parametrize(("key", "bound"), BOUNDS)
def test_every_number_setting_has_an_upper_bound(key: str, bound: int) -> None:
    settings_from_dict(_settings_with(key, bound))  # the bound itself is allowed
    too_big = bound * 10 if isinstance(bound, int) and "Seconds" not in key else 1e300
    for value in (bound + 1, too_big):
        with pytest.raises(SettingsError) as info:
            settings_from_dict(_settings_with(key, value))
        [problem] = info.value.problems
        assert problem.key == key
        assert f"less than or equal to {bound}" in problem.problem


def test_every_number_field_of_the_schema_is_bounded() -> None:
    """A new number setting must get a bound, a row in BOUNDS and one in docs/settings.md."""
    from tf_fsm.settings.schema import Settings

    numbers: dict[str, bool] = {}  # dotted key (gates as qualityGates.0) -> has an upper bound

    def walk(model: type[BaseModel], where: str) -> None:
        for name, info in model.model_fields.items():
            key = f"{where}{name}"
            for sub in _models_in(info.annotation):
                walk(sub, f"{key}.0." if "list[" in repr(info.annotation) else f"{key}.")
            if _is_number(info.annotation):
                numbers[key] = any(hasattr(m, "le") for m in info.metadata)

    walk(Settings, "")
    assert numbers == {key: True for key, _ in BOUNDS}
    docs = (Path(__file__).resolve().parent.parent / "docs" / "settings.md").read_text("utf-8")
    bounds_section = docs.split("## Number bounds", 1)[1].split("\n## ", 1)[0]
    for key, bound in BOUNDS:
        assert f"`{key.replace('.0.', '[].')}`" in bounds_section
        assert f"{bound:,}" in bounds_section


def _is_number(annotation: Any) -> bool:
    if annotation in (int, float):
        return True
    return any(_is_number(arg) for arg in typing.get_args(annotation))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


@pytest.mark.parametrize("command", [["settings"], ["run", TICKET, "--plan"], ["run", TICKET]])
def test_a_huge_timeout_exits_2_before_any_agent_runs(
    project: Path, write_settings: WriteSettings, command: list[str]
) -> None:
    marker = project / "agent-ran"
    _write_ticket(project)
    path = write_settings(
        {"executor": {"command": ["touch", str(marker)], "timeoutSeconds": 1e300}}
    )
    result = run_cli(*command)
    _assert_bad_input(
        result,
        str(path),
        "executor.timeoutSeconds: Input should be less than or equal to 604800 (got 1e+300)",
    )
    assert not marker.exists()
    assert not _ticket_dir(project).exists()  # no attempt was started, none left in_progress


# --- retry-state.json numbers ------------------------------------------------------------------


def _retry_state(**changes: Any) -> dict[str, Any]:
    attempt = {
        "attemptNumber": 1,
        "startedAt": "2026-02-10T13:50:04Z",
        "completedAt": "2026-02-10T13:58:10Z",
        "status": "blocked",
        "trigger": "initial",
    }
    state = {
        "version": 1,
        "ticketId": TICKET,
        "attempts": [attempt],
        "lastAttemptAt": "2026-02-10T13:58:10Z",
        "status": "active",
        "retryCount": 1,
    }
    for key, value in changes.items():
        (attempt if key in attempt else state)[key] = value
    return state


@pytest.mark.parametrize(
    ("changes", "key", "needle"),
    [
        ({"attemptNumber": 10**30}, "attempts.0.attemptNumber", "less than or equal to 10000"),
        ({"attemptNumber": 10001}, "attempts.0.attemptNumber", "less than or equal to 10000"),
        ({"retryCount": 10**30}, "retryCount", "less than or equal to 10000"),
        ({"retryCount": -1}, "retryCount", "greater than or equal to 0"),
        ({"attemptNumber": 0}, "attempts.0.attemptNumber", "greater than or equal to 1"),
    ],
)
@pytest.mark.parametrize("command", [["status"], ["status", TICKET, "--json"], ["run", TICKET]])
def test_a_retry_state_number_out_of_bounds_exits_2_naming_the_key(
    project: Path,
    write_settings: WriteSettings,
    changes: dict[str, Any],
    key: str,
    needle: str,
    command: list[str],
) -> None:
    marker = _marking_project(project, write_settings)
    path = _ticket_dir(project) / "retry-state.json"
    path.parent.mkdir(parents=True)
    content = json.dumps(_retry_state(**changes)).encode()
    path.write_bytes(content)
    result = run_cli(*command)
    _assert_bad_input(result, str(path), f"{key}: Input should be {needle}", "--retry-reset")
    assert path.read_bytes() == content
    assert not marker.exists()


def test_a_retry_state_at_the_bounds_loads(project: Path, write_settings: WriteSettings) -> None:
    write_settings({"executor": {"kind": "scripted"}})
    _write_ticket(project)
    path = _ticket_dir(project) / "retry-state.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_retry_state(attemptNumber=10000, retryCount=10000)), "utf-8")
    result = run_cli("status", TICKET, "--json")
    assert result.returncode == 0, result.stderr


# --- journal numbers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"attempt": 10**30}, "attempt: Input should be less than or equal to 10000"),
        ({"attempt": 0}, "attempt: Input should be greater than or equal to 1"),
    ],
)
def test_a_journal_attempt_number_out_of_bounds_is_a_line_error(
    fields: dict[str, Any], needle: str
) -> None:
    event = {**json.loads(_STARTED), **fields}
    with pytest.raises(JournalLineError, match=f"line 2: AttemptStarted: {needle}"):
        decode(f"{_STARTED}\n{json.dumps(event)}\n".encode())


@pytest.mark.parametrize(
    ("event", "key", "needle"),
    [
        (
            {"event": "TicketBlocked", "reason": "x", "retryCount": 10**30, "maxRetries": 3},
            "retryCount",
            "less than or equal to 10000",
        ),
        (
            {"event": "TicketBlocked", "reason": "x", "retryCount": 1, "maxRetries": -1},
            "maxRetries",
            "greater than or equal to 0",
        ),
        (
            {"event": "RetriesExhausted", "retryCount": 3, "maxRetries": 10**30},
            "maxRetries",
            "less than or equal to 10000",
        ),
        (
            {"event": "TicketClosed", "retryCountBefore": -2},
            "retryCountBefore",
            "greater than or equal to 0",
        ),
        (
            {"event": "RetryStateReset", "retryCountBefore": 10**30},
            "retryCountBefore",
            "less than or equal to 10000",
        ),
        (
            {"event": "EscalationApplied", "roles": {}, "tier": 7, "reason": "x"},
            "tier",
            "less than or equal to 3",
        ),
        (
            {"event": "GateFeedbackSent", "innerTry": 10**30, "gates": [], "bytes": 1},
            "innerTry",
            "less than or equal to 10000",
        ),
        (
            {"event": "GateFeedbackSent", "innerTry": 1, "gates": [], "bytes": -1},
            "bytes",
            "greater than or equal to 0",
        ),
        (
            {
                "event": "InvocationRestarted",
                "phase": "p",
                "role": "r",
                "failureClass": "crash",
                "attemptNo": 10**30,
                "delay": 1,
                "failure": "x",
            },
            "attemptNo",
            "less than or equal to 10000",
        ),
        (
            {
                "event": "SameFailureDetected",
                "previousAttempt": 10**30,
                "signature": "s",
                "entries": [],
                "action": "stop",
                "tier": 1,
                "mode": "stop",
                "reason": "x",
            },
            "previousAttempt",
            "less than or equal to 10000",
        ),
        (
            {"event": "ResearchSkippedOnRetry", "attemptCount": 10**30, "lastFailureKind": "x"},
            "attemptCount",
            "less than or equal to 10000",
        ),
        (
            {"event": "AttemptFinished", "status": "blocked", "counts": {"Major": -1}},
            "counts.Major",
            "greater than or equal to 0",
        ),
        (
            {
                "event": "InvocationFinished",
                "phase": "p",
                "role": "r",
                "model": "m",
                "artifact": "a",
                "sha256": None,
                "ok": True,
                "durationMs": -5,
            },
            "durationMs",
            "greater than or equal to 0",
        ),
    ],
)
def test_journal_numbers_out_of_bounds_are_line_errors(
    event: dict[str, Any], key: str, needle: str
) -> None:
    line = {"ts": "2026-02-10T12:00:00.000Z", "ticket": TICKET, "attempt": 1, **event}
    with pytest.raises(JournalLineError) as info:
        decode(f"{json.dumps(line)}\n".encode())
    assert f"{key}: Input should be {needle}" in info.value.problem


def test_a_journal_with_a_huge_attempt_exits_2_naming_the_line(
    project: Path, write_settings: WriteSettings
) -> None:
    write_settings({"executor": {"kind": "scripted"}})
    _write_ticket(project)
    journal = _ticket_dir(project) / "events.jsonl"
    journal.parent.mkdir(parents=True)
    journal.write_text(_STARTED.replace('"attempt":1', '"attempt":' + "9" * 40) + "\n", "utf-8")
    result = run_cli("diagram", "--ticket", TICKET)
    _assert_bad_input(
        result, str(journal), "line 1: AttemptStarted: attempt: Input should be less than"
    )


@pytest.mark.parametrize("text", [DEEP_ARRAYS, '{"ticketId": "pt-1", "x": ' + _nested(300) + "}"])
def test_a_deeply_nested_retry_state_is_corrupt_and_retry_reset_moves_it_aside(
    project: Path, write_settings: WriteSettings, text: str
) -> None:
    """Deep enough that json.loads gives up, or that it parses and a later walk would: exit 2
    naming the file, untouched, and `--retry-reset`, the documented way out, works on it."""
    marker = _marking_project(project, write_settings)
    path = _ticket_dir(project) / "retry-state.json"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    for command in (["status"], ["run", TICKET]):
        _assert_bad_input(run_cli(*command), str(path), "nested too deeply", "--retry-reset")
    assert path.read_text(encoding="utf-8") == text
    assert not marker.exists()
    reset = run_cli("run", TICKET, "--retry-reset")
    assert "retry state moved aside to retry-state.json.bak." in reset.stderr, reset.stderr
    assert marker.exists()  # attempt 1 ran
    (backup,) = path.parent.glob("retry-state.json.bak.*")
    assert backup.read_text(encoding="utf-8") == text
