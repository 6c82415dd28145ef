"""A phase's start-to-close timeout comes from the settings: its roles' invocations with their
restarts, its quality gates with their retries, and tf_fsm's own work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from tf_fsm.settings.load import load_settings
from tf_fsm.temporal.commands import OWN_SECONDS, phase_limit


def test_the_phase_limit_counts_roles_restarts_and_gates(project: Path) -> None:
    settings = {
        "executor": {"timeoutSeconds": 10, "maxRestarts": 1, "restartBackoffSeconds": 2},
        "workflow": {
            "enableReviewers": ["reviewer-general", "reviewer-spec-audit"],
            "qualityGates": [{"name": "tests", "command": "true", "timeoutSeconds": 5}],
            "qualityGateMaxRetries": 2,
        },
    }
    (project / ".tf/config/settings.json").write_text(json.dumps(settings))

    limit = phase_limit(load_settings(project))

    # two reviewers x (10 s + 2 s backoff) x 2 tries, one gate x 5 s x 3 tries
    assert limit == 2 * 12 * 2 + 5 * 3 + OWN_SECONDS
