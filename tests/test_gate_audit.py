"""Quality gates, with real processes: the audit's findings (secrets cut at the tail, gates that
cannot start, enableQualityGate false, the fix template's gate-feedback branch, TF_ATTEMPT in
`gate --run`, and unbounded gate output)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.e2e.conftest import Harness
from tf_fsm.engine.gates import GATE_OUTPUT_KEEP, run_gates
from tf_fsm.engine.prompts import INLINE_CAP, inline
from tf_fsm.process.door import tail
from tf_fsm.settings.load import QualityGate
from tf_fsm.storage.redact import Redactor

SECRET = "Zq8vR3mK9pL2xW7nT4bY6cH1jF5gD0sAeU3iO8"  # 38 characters, in $MY_API_TOKEN
GITHUB = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Y"  # a provider-format key
PACKAGED_FIX = Path(__file__).resolve().parent.parent / "prompts" / "tf-fix.md.j2"


@pytest.fixture
def env_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_TOKEN", SECRET)  # run_cli passes the environment on


def pieces(secret: str, size: int = 10) -> list[str]:
    """Every run of `size` characters of the secret: none may be written anywhere."""
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def leaks(text: str, *secrets: str) -> list[str]:
    return [p for s in secrets for p in pieces(s) if p in text]


def written(e2e: Harness) -> dict[str, str]:
    return {
        str(p.relative_to(e2e.dir)): p.read_text(errors="replace")
        for p in e2e.dir.rglob("*")
        if p.is_file() and not p.name.startswith("fake-agent")
    }


def straddling(secret: str, filler: int) -> str:
    """A gate that prints the secret, then enough x's that a 3000-character tail cuts it. A
    provider-format key ends at a space (its pattern would take glued x's as part of it)."""
    sep = "" if secret.startswith("$") else " "
    return f'printf "%s{sep}" "{secret}"; head -c {filler} /dev/zero | tr "\\0" x; exit 1'


# --- 1. a secret straddling the cut of a tail --------------------------------------------------


def test_tail_redacts_past_the_cut_before_cutting() -> None:
    redact = Redactor([SECRET])
    for secret in (SECRET, GITHUB):
        sep = "" if secret == SECRET else " "  # a provider key's pattern takes glued x's too
        for filler in range(1990, 2000):
            text = f"{secret}{sep}{'x' * filler}"
            cut = tail(text, 20, 2000, redact=redact)
            assert not leaks(cut, secret), (secret, filler, cut[:60])
            assert cut.endswith("x" * filler)
    assert tail("a\nb\nc", 2, 100, redact=redact) == "b\nc"  # short text: as before


@pytest.mark.usefixtures("env_secret")
@pytest.mark.parametrize(("secret", "filler"), [("$MY_API_TOKEN", 2968), (GITHUB, 2968)])
def test_gate_secret_straddling_the_tail_is_redacted(
    e2e: Harness, secret: str, filler: int
) -> None:
    raw = SECRET if secret.startswith("$") else secret
    gate = {"name": "leaky", "command": straddling(secret, filler), "maxRetries": 1}
    e2e.settings(qualityGates=[gate], escalation={"enabled": False})
    assert e2e.run().returncode == 3
    files = written(e2e)
    for name in (
        "prompts/attempt-1/fix-fixer-gate-1.md",
        "post-fix-verification.md",
        "post-fix-verification.json",
        "close-summary.md",
    ):
        assert "x" * 100 in files[name], name  # the tail is there ...
        assert not leaks(files[name], raw), name  # ... without any piece of the secret
    assert not [name for name, text in files.items() if leaks(text, raw)]
    for extra in ((), ("--json",)):
        result = run_cli("gate", "pt-1", "--run", *extra, cwd=e2e.project)
        assert result.returncode == 3, result.stderr
        assert "xxxx" in result.stdout and not leaks(result.stdout, raw), result.stdout[:300]


@pytest.mark.usefixtures("env_secret")
@pytest.mark.parametrize("secret", [SECRET, GITHUB])
def test_agent_stderr_tail_straddling_the_cut_is_redacted(e2e: Harness, secret: str) -> None:
    sep = "" if secret == SECRET else " "
    crash = {"phase": "implement", "exitCode": 3, "stderr": f"MYTOK={secret}{sep}{'x' * 1975}"}
    e2e.plan(crash=[crash])
    assert e2e.run().returncode == 5
    failed = e2e.event("PhaseFailed", 1)
    assert failed["stderrTail"].endswith("x" * 1975)
    assert not leaks(failed["stderrTail"], secret), failed["stderrTail"][:60]
    assert not leaks((e2e.dir / "events.jsonl").read_text(), secret)


# --- 2. a gate that cannot start is a configuration error --------------------------------------


@pytest.mark.parametrize(
    ("gate", "named"),
    [
        ({"name": "lint", "command": ["no-such-linter", "."]}, "no-such-linter"),
        ({"name": "docs", "command": "true", "cwd": "no-such-dir", "required": False}, "dir"),
    ],
)
def test_gate_that_cannot_start_is_exit_2_before_any_agent(
    e2e: Harness, gate: dict[str, Any], named: str
) -> None:
    e2e.settings(qualityGates=[{"name": "ok", "command": "true"}, gate])
    result = e2e.run()
    assert result.returncode == 2, result.stderr
    assert f"quality gate {gate['name']}" in result.stderr and named in result.stderr
    assert "PosixPath" not in result.stderr
    if "cwd" in gate:
        assert f"{e2e.project / 'no-such-dir'} " in result.stderr  # the plain path
    assert e2e.agent_calls() == []  # before any agent ran, before anything was written
    assert not (e2e.dir / "retry-state.json").exists()
    gate_run = run_cli("gate", "pt-1", "--run", cwd=e2e.project)
    assert gate_run.returncode == 2, gate_run.stderr
    assert f"quality gate {gate['name']}" in gate_run.stderr and named in gate_run.stderr
    assert "PosixPath" not in gate_run.stderr


def test_gate_that_cannot_start_mid_run_ends_the_verify_phase(tmp_path: Path) -> None:
    """Checked before the attempt, gone by the verify phase: no feedback round, a failure."""
    gates = [
        QualityGate(name="ok", command="true"),
        QualityGate(name="lint", command=["./gone.sh"], required=False),
    ]
    sent: list[str] = []

    def send_back(message: str, round_: int, failed: list[Any]) -> str | None:
        sent.append(message)
        return None

    outcome = run_gates(
        gates,
        tmp_path,
        default_max=3,
        feedback=True,
        redact=Redactor(),
        on_result=lambda r, n: None,
        send_back=send_back,
    )
    assert sent == []
    assert outcome.failure is not None
    assert "quality gate lint cannot start" in outcome.failure
    assert "./gone.sh" in outcome.failure and "PosixPath" not in outcome.failure


# --- 3. workflow.enableQualityGate false: reported, never blocking -----------------------------


def test_quality_gate_disabled_reports_but_never_blocks(e2e: Harness) -> None:
    gate = {"name": "tests", "command": "echo FAILED test_parser; exit 1"}
    e2e.settings(qualityGates=[gate], enableQualityGate=False)
    result = e2e.run()
    assert result.returncode == 0, result.stderr
    assert "GateFeedbackSent" not in e2e.names(1)
    assert not list(e2e.dir.glob("gate-fix-*.md"))
    assert e2e.call_counts(1)[("fix", "fixer")] <= 1  # the review's fix only, never sent back
    (row,) = json.loads((e2e.dir / "post-fix-verification.json").read_text())["gates"]
    assert (row["passed"], row["required"], row["blocking"]) == (False, True, False)
    summary = (e2e.dir / "close-summary.md").read_text()
    assert "**CLOSED**" in summary and "BLOCKING" not in summary
    assert "- tests (required): failed, exit code 1" in summary


# --- 4. the fix template's gate-feedback branch -----------------------------------------------


def override_fix(e2e: Harness, branch: str) -> None:
    prompts = e2e.project / ".tf" / "prompts"
    prompts.mkdir(parents=True, exist_ok=True)
    text = PACKAGED_FIX.read_text(encoding="utf-8")
    (prompts / "tf-fix.md.j2").write_text(text + branch, encoding="utf-8")


def test_broken_gate_feedback_branch_is_exit_2_before_any_agent(e2e: Harness) -> None:
    override_fix(e2e, "{% if gate_feedback %}{{ gate_feedback.nosuch }}{% endif %}\n")
    e2e.settings(qualityGates=[{"name": "lint", "command": "exit 1"}])
    result = e2e.run()
    assert result.returncode == 2, result.stderr
    assert "tf-fix.md.j2" in result.stderr and "nosuch" in result.stderr
    assert e2e.agent_calls() == []
    assert not (e2e.dir / "retry-state.json").exists()


def test_gate_feedback_that_cannot_render_mid_run_is_an_error_not_feedback(e2e: Harness) -> None:
    # Only the real feedback (with the gate's output) breaks it: the check up front passes.
    override_fix(
        e2e, '{% if gate_feedback and "BOOM-42" in gate_feedback %}{{ nosuch }}{% endif %}\n'
    )
    e2e.settings(
        qualityGates=[{"name": "lint", "command": "echo BOOM-42; exit 1"}],
        escalation={"enabled": False},
    )
    result = e2e.run()
    assert result.returncode == 5, result.stderr
    assert "GateFeedbackSent" not in e2e.names(1)
    assert e2e.read_state()["attempts"][0]["status"] == "error"
    assert "nosuch" in e2e.read_state()["attempts"][0]["reason"]
    assert not (e2e.dir / "prompts/attempt-1/fix-fixer-gate-1.md").exists()


# --- 5. TF_ATTEMPT in `gate --run` -------------------------------------------------------------


def test_gate_run_sets_tf_attempt(e2e: Harness) -> None:
    seen = e2e.project / "seen.txt"
    command = f'echo "$TF_TICKET_ID ${{TF_ATTEMPT-unset}}" >> {seen}'
    e2e.settings(qualityGates=[{"name": "env", "command": command}])
    assert run_cli("gate", "pt-1", "--run", cwd=e2e.project).returncode == 0
    assert seen.read_text().splitlines() == ["pt-1 0"]  # no attempt yet
    assert e2e.run().returncode == 0
    assert run_cli("gate", "pt-1", "--run", cwd=e2e.project).returncode == 0
    assert seen.read_text().splitlines() == ["pt-1 0", "pt-1 1", "pt-1 1"]


# --- 6. gate output is bounded ----------------------------------------------------------------


def test_huge_gate_output_is_bounded_and_says_so(e2e: Harness) -> None:
    size = 4 * GATE_OUTPUT_KEEP
    command = f'echo FIRST; head -c {size} /dev/zero | tr "\\0" y; echo; echo LAST; exit 1'
    e2e.settings(
        qualityGates=[{"name": "big", "command": command, "maxRetries": 0}],
        escalation={"enabled": False},
    )
    assert e2e.run().returncode == 3
    log = (e2e.dir / "gates/attempt-1/big-try-1.log").read_text()
    assert len(log) < 2 * GATE_OUTPUT_KEEP + 1000
    assert "FIRST" in log and log.rstrip().endswith("LAST")
    assert "bytes of output dropped" in log
    assert "LAST" in (e2e.dir / "close-summary.md").read_text()


def test_inline_reason_drops_a_key_cut_at_its_read_limit() -> None:
    # A tampered chain-context reason: a whitespace run pushes a key to the 1200-character read
    # limit, where only its first part would be read; collapsed, it would land inside the cap.
    redact = Redactor([SECRET])
    for secret in (SECRET, GITHUB):
        for shift in range(1, 30):
            reason = "x" + " " * (INLINE_CAP * 4 - shift - 1) + secret + " tail"
            line = inline(reason, redact)
            assert len(line) <= INLINE_CAP and line.startswith("x")
            assert not leaks(line, secret), (secret, shift, line)
    assert inline("a  b\n\n## c", redact) == "a b ## c"  # short text: whole, on one line
