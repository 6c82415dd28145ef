"""Which required quality gates tf_fsm can judge test by test against the base commit
(docs/gates.md, "The baseline"), and the words that say so: the warning `tf-fsm settings`,
`tf-fsm doctor` and `tf-fsm run --plan` give about a gate it cannot, and the hint a blocking
gate's note gives.

A gate's failure is compared with the base commit's only through a per-test (JUnit XML)
report on both sides. A gate with `junitXml` names its own report; for any other required
gate tf_fsm asks pytest for one (PYTEST_ADDOPTS, tf_fsm.engine.gates), which only a command
that runs pytest writes. Whether a command runs pytest cannot be known before it runs (`make
test` may); the warning's rule is a look at its words.
"""

from __future__ import annotations

import re

from tf_fsm.settings.schema import QualityGate, Workflow

#: where the rule is explained
BASELINE_DOC = "docs/gates.md#the-baseline-what-a-ticket-makes-worse"
#: `pytest`, `py.test` or Debian's `pytest-3` as a word of the command, or a path's last part
#: (`.venv/bin/pytest`, `python -m pytest`); not `pytest.ini` or `test_pytest.py`
_PYTEST_WORD = re.compile(r"(?:^|[\s;&|()'\"=/])(?:pytest(?:-3)?|py\.test)(?=$|[\s;&|()'\"])")


def looks_like_pytest(command: str | list[str]) -> bool:
    """Whether a gate's command names pytest: one of its words (of the command line, or of
    an argv list's items) is `pytest`, `py.test` or `pytest-3`, or ends a path with it."""
    return any(_PYTEST_WORD.search(part) for part in _parts(command))


def _parts(command: str | list[str]) -> list[str]:
    return [command] if isinstance(command, str) else command


def asks_for_report(gate: QualityGate) -> bool:
    """Does tf_fsm ask pytest for a report of its own when the gate's failure is to be judged
    against the base (a required gate without `junitXml`)? Any such gate's run gets the
    request: a command that runs pytest in a way its words do not show (`make test`) is judged
    test by test too."""
    return gate.required and gate.junitXml is None


def judged_whole(gate: QualityGate) -> bool:
    """A required gate without `junitXml` whose command does not look like pytest: tf_fsm
    cannot count on a per-test report, so a failure of it is never judged pre-existing."""
    return asks_for_report(gate) and not looks_like_pytest(gate.command)


def whole_gate_warning(workflow: Workflow, index: int) -> str | None:
    """The one line that warns about gate `index` when it is `judged_whole` and gates block
    (workflow.enableQualityGate): which gate, what happens, the fix. None otherwise."""
    gate = workflow.qualityGates[index]
    if not (workflow.enableQualityGate and judged_whole(gate)):
        return None
    return (
        f"workflow.qualityGates[{index}] ({gate.name}) is required, has no junitXml and does "
        "not look like pytest, so tf_fsm cannot add a per-test report: a failure of it is "
        "never judged pre-existing, it blocks even when the gate fails on the base commit "
        f"too; set its junitXml to the JUnit XML report its command writes ({BASELINE_DOC})"
    )


def whole_gate_warnings(workflow: Workflow) -> list[str]:
    """The warning of every gate that has one (`whole_gate_warning`)."""
    found = (whole_gate_warning(workflow, i) for i in range(len(workflow.qualityGates)))
    return [w for w in found if w is not None]


def report_hint(gate: QualityGate) -> str:
    """What to do about a failing gate judged without a report on both sides."""
    if gate.junitXml is not None:
        fix = f"make its command write its junitXml report ({gate.junitXml}) on every run"
    elif looks_like_pytest(gate.command):
        fix = (
            "tf_fsm asked pytest for a report through PYTEST_ADDOPTS, and a --junitxml on the "
            "command line wins over that: set the gate's junitXml to the report its command "
            "writes"
        )
    else:
        fix = "set the gate's junitXml to the JUnit XML report its command writes"
    return f"{fix} ({BASELINE_DOC})"
