"""`tf-fsm simulate`: reproducible, through the real orchestrator, within its budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tf_fsm.errors import SettingsError
from tf_fsm.simulate import criteria, load_profile, simulate, svg_chart, table
from tf_fsm.simulate.agent import backlog, closable, draw
from tf_fsm.simulate.engine import PolicyResult


def comparable(results: list[PolicyResult]) -> list[dict[str, object]]:
    # the simulator's own wall time is the one figure a re-run does not reproduce
    return [{k: v for k, v in r.to_json().items() if k != "wallSeconds"} for r in results]


def test_same_seed_same_table_and_budget_never_exceeded() -> None:
    profile = load_profile(None)
    one = simulate(profile, ["a", "c"], 6, seed=3, budget_run=True)
    two = simulate(profile, ["a", "c"], 6, seed=3, budget_run=True)
    assert comparable(one) == comparable(two)
    budget = one[-1]
    assert budget.budgetUsd == profile.budgetUsd
    assert budget.maxTicketCostUsd <= profile.budgetUsd
    assert all(ok for name, ok, _ in criteria(one) if name.startswith("budget"))
    # the table and the chart are pure renderings of the results
    assert table(one).count("\n") == len(one) + 1
    assert svg_chart(one, "t").startswith("<svg") and "(c) curve + same-failure" in svg_chart(
        one, "t"
    )


def test_a_tight_budget_refuses_before_it_is_overrun() -> None:
    # a budget below one attempt's price: nothing may start, so nothing is spent
    profile = load_profile(None).model_copy(update={"budgetUsd": 0.5})
    (result,) = simulate(profile, [], 3, seed=1, budget_run=True)
    assert (result.costUsd, result.closed, result.maxTicketCostUsd) == (0.0, 0, 0.0)


def test_backlog_is_seeded_and_has_unclosable_tickets() -> None:
    profile = load_profile(None)
    assert backlog(profile, 50, 9) == backlog(profile, 50, 9)
    assert backlog(profile, 50, 9) != backlog(profile, 50, 10)
    hidden = backlog(profile, 500, 1)
    unclosable = [t for t, f in hidden.items() if not closable(f, profile)]
    assert 0 < len(unclosable) < 100
    assert draw(1, "a", 2) == draw(1, "a", 2) != draw(1, "a", 3)


def test_profile_errors_name_the_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "p.json"
    data = json.loads(
        (Path(__file__).parents[1] / "tf_fsm/simulate/default-profile.json").read_text()
    )
    data["roles"]["fixer"] = "no/such-model"
    bad.write_text(json.dumps(data))
    with pytest.raises(SettingsError, match=r"p\.json.*roles\.fixer.*no/such-model"):
        load_profile(bad)
    for key, value, path in (
        ("findings", {"Major": -1}, r"findings\.Major"),
        (
            "models",
            {**data["models"], "m": {"costUsd": 1, "reach": 0.5, "seconds": 1e999}},
            "seconds",
        ),
    ):
        data = json.loads(
            (Path(__file__).parents[1] / "tf_fsm/simulate/default-profile.json").read_text()
        )
        data[key] = value
        bad.write_text(json.dumps(data).replace("1e+999", "1e999"))
        with pytest.raises(SettingsError, match=rf"p\.json.*{path}"):
            load_profile(bad)
    toml = tmp_path / "p.toml"
    toml.write_text('tickets = "many"\n')
    with pytest.raises(SettingsError, match=r"p\.toml"):
        load_profile(toml)


def test_cli_simulate_as_a_process(tmp_path: Path) -> None:
    chart = tmp_path / "c.svg"
    args = ["simulate", "--tickets", "4", "--policy", "a,c", "--no-budget"]
    done = run_cli(*args, "--json", "--chart", str(chart))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [r["policy"] for r in data["results"]] == ["a", "c"]
    assert data["results"][1]["tickets"] == 4 and chart.read_text().startswith("<svg")
    text = run_cli(*args)
    assert text.returncode == 0 and "| (c) curve + same-failure |" in text.stdout
    assert "closes no fewer closable than (a)" in text.stdout
    twice = run_cli("simulate", "--tickets", "3", "--policy", "a,a", "--no-budget", "--json")
    assert twice.returncode == 0, twice.stderr  # the same policy named twice runs once
    assert [r["policy"] for r in json.loads(twice.stdout)["results"]] == ["a"]
    bad = run_cli("simulate", "--policy", "a,z")
    assert bad.returncode == 2 and "unknown policy z" in bad.stderr
    png = run_cli("simulate", "--chart", "x.png")
    assert png.returncode == 2 and "only .svg" in png.stderr
    nowhere = run_cli("simulate", "--chart", str(tmp_path / "no-dir" / "c.svg"))
    assert nowhere.returncode == 2 and "no-dir/c.svg: no such directory" in nowhere.stderr
    missing = run_cli("simulate", "--profile", str(tmp_path / "none.json"))
    assert missing.returncode == 2 and "none.json" in missing.stderr
