"""Prompt templates run in a sandbox: a project's `.tf/prompts/` comes with a cloned repository,
so a template can neither reach Python internals, nor change the orchestrator's data, nor read
a file outside the prompt directories; each attempt is exit 2 naming the file and line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, tk_ticket
from tf_fsm.engine.prompts import PromptLibrary, PromptTemplateError, _environment

FRONTMATTER = "---\nmodel:\nthinking:\n---\n"
#: every command that renders prompts (`run` renders all of an attempt's before its first phase)
RENDERING = [("prompts", "show", "fix"), ("run", "pt-1", "--plan"), ("run", "pt-1")]
SECRET = "TOP-SECRET-OUTSIDE-THE-PROMPT-DIRECTORIES"


def setup(project: Path) -> Path:
    """A ticket, the scripted executor, and an empty `.tf/prompts/`."""
    (project / ".tickets").mkdir()
    (project / ".tickets/pt-1.md").write_text(tk_ticket("pt-1"))
    (project / "scenario.json").write_text(json.dumps({"findings": []}))
    settings = {"executor": {"kind": "scripted", "scenario": "scenario.json"}}
    (project / ".tf/config/settings.json").write_text(json.dumps(settings))
    prompts = project / ".tf/prompts"
    prompts.mkdir()
    return prompts


def override(prompts: Path, name: str, *lines: str) -> Path:
    """`name` in `.tf/prompts/`: frontmatter (4 lines), then `lines` from line 5 on."""
    path = prompts / name
    path.write_text(FRONTMATTER + "\n".join(lines) + "\n")
    return path


def assert_refused(result: Any, where: str, *needles: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert where in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


# -- Python internals ---------------------------------------------------------------------


PAYLOADS = [
    "{{ cycler.__init__.__globals__.os.popen('touch %s').read() }}",
    "{{ lipsum.__globals__['os'].popen('touch %s').read() }}",
    "{{ joiner.__init__.__globals__['__builtins__']['__import__']('os').system('touch %s') }}",
]


@pytest.mark.parametrize("name", ["tf-fix.md.j2", "_context.md.j2"])
@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_template_reaching_python_internals_runs_nothing(
    project: Path, tmp_path: Path, name: str, payload: str
) -> None:
    prompts = setup(project)
    marker = tmp_path / "escaped"
    template = override(prompts, name, "# Fix {{ ticket.id }}", "", payload % marker)
    for command in RENDERING:
        result = run_cli(*command)
        assert not marker.exists(), f"{command}: the template ran a shell command"
        assert_refused(result, f"prompt template {template}:7: ", "unsafe", "sandbox")
    assert not (project / ".tf/knowledge/tickets/pt-1/retry-state.json").exists()
    assert "status: open" in (project / ".tickets/pt-1.md").read_text()


def test_str_format_cannot_reach_internals_either(project: Path) -> None:
    prompts = setup(project)
    template = override(prompts, "tf-fix.md.j2", "{{ '{0.__class__.__mro__}'.format(ticket) }}")
    assert_refused(run_cli("prompts", "show", "fix"), f"{template}:5: ", "unsafe")


@pytest.mark.parametrize(
    "expression",
    [
        "{{ fail_on.append('Minor') }}",
        "{{ ticket.pop('id') }}",
        "{{ models.clear() }}",
        "{{ flags.update(auto=true) }}",
        "{% set _ = inputs.insert(0, '/etc/passwd') %}",
    ],
)
def test_a_template_cannot_change_the_orchestrators_data(project: Path, expression: str) -> None:
    prompts = setup(project)
    template = override(prompts, "tf-fix.md.j2", "line five", expression)
    for command in RENDERING[:2]:
        assert_refused(run_cli(*command), f"prompt template {template}:6: ", "unsafe")


def test_the_default_globals_and_the_context_still_work(project: Path) -> None:
    prompts = setup(project)
    override(
        prompts,
        "tf-fix.md.j2",
        "{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}",
        "sum={{ ns.n }} {{ dict(a=1).items() | list }} {{ flags.items() | list | length > 0 }}",
        "{% set c = cycler('x', 'y') %}{{ c.next() }}{{ c.next() }}"
        " {% set j = joiner('+') %}{{ j() }}a{{ j() }}b",
        "{{ lipsum(1, false, 3, 4) | wordcount }} {{ '{} of {}'.format(1, 2) }}",
        "{{ ticket.keys() | sort | join(',') }} {{ fail_on | join('/') }}",
    )
    result = run_cli("prompts", "show", "fix")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:4] == [
        "sum=3 [('a', 1)] True",
        "xy a+b",
        "3 1 of 2",
        "body,id,title Critical/Major",
    ]


def test_a_runaway_range_is_a_template_error(project: Path) -> None:
    prompts = setup(project)
    template = override(prompts, "tf-fix.md.j2", "{{ range(10 ** 9) | length }}")
    assert_refused(run_cli("prompts", "show", "fix"), f"{template}:5: ", "Range too big")


# -- files outside the prompt directories --------------------------------------------------


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A template-looking file next to the project, outside its prompt directories."""
    path = tmp_path / "secret.md.j2"
    path.write_text(SECRET + "\n")
    return path


def names_for(secret: Path) -> list[tuple[str, str]]:
    # .tf/prompts is <tmp>/project/.tf/prompts: three levels up is <tmp>
    return [
        (str(secret), "absolute"),
        ("../../../secret.md.j2", "'..'"),
        ("sub/../../../../secret.md.j2", "'..'"),
        ("..\\..\\..\\secret.md.j2", "backslash"),
        ("tf-fix.md.j2\x00", "NUL"),
    ]


@pytest.mark.parametrize("index", range(5))
@pytest.mark.parametrize(
    "statement",
    [
        "{%% include %r %%}",
        "{%% import %r as m %%}",
        "{%% from %r import x %%}",
        "{%% extends %r %%}",
    ],
)
def test_a_template_cannot_load_a_name_outside_the_prompt_directories(
    project: Path, secret: Path, statement: str, index: int
) -> None:
    name, why = names_for(secret)[index]
    prompts = setup(project)
    (prompts / "sub").mkdir()
    template = override(prompts, "tf-fix.md.j2", "line five", statement % name)
    for command in RENDERING[:2]:
        result = run_cli(*command)
        assert SECRET not in result.stdout
        assert_refused(result, f"prompt template {template}:6: ", why, "prompt director")


def test_an_include_from_an_included_template_names_the_includer(
    project: Path, secret: Path
) -> None:
    prompts = setup(project)
    inner = override(prompts, "_ticket.md.j2", "{% include " + repr(str(secret)) + " %}")
    result = run_cli("run", "pt-1", "--plan")
    assert SECRET not in result.stdout
    assert_refused(result, f"prompt template {inner}:5: includes {str(secret)!r}")


def test_a_symlink_out_of_the_prompt_directory_is_refused(project: Path, secret: Path) -> None:
    prompts = setup(project)
    link = prompts / "_ticket.md.j2"
    link.symlink_to(secret)
    for command in RENDERING:
        result = run_cli(*command)
        assert SECRET not in result.stdout + result.stderr
        # every packaged phase template includes _ticket.md.j2 (tf-fix.md.j2 on its line 12)
        where = "tf-fix.md.j2:12: " if command[0] == "prompts" else ".md.j2:"
        assert_refused(result, where, "includes '_ticket.md.j2'", str(link), "outside")


def test_a_symlinked_phase_template_is_refused_by_list_show_plan_and_run(
    project: Path, secret: Path
) -> None:
    prompts = setup(project)
    link = prompts / "tf-fix.md.j2"
    link.symlink_to(secret)
    for command in [("prompts", "list"), *RENDERING]:
        result = run_cli(*command)
        assert SECRET not in result.stdout + result.stderr
        assert_refused(result, f"prompt template {link}: ", "outside")


def test_a_symlinked_directory_out_of_the_prompt_directory_is_refused(
    project: Path, secret: Path
) -> None:
    prompts = setup(project)
    (prompts / "shared").symlink_to(secret.parent)
    template = override(prompts, "tf-fix.md.j2", '{% include "shared/secret.md.j2" %}')
    result = run_cli("prompts", "show", "fix")
    assert SECRET not in result.stdout
    assert_refused(result, f"prompt template {template}:5: ", "outside")


def test_doctor_refuses_a_symlinked_template(
    project: Path, tmp_path: Path, secret: Path, write_settings: Callable[..., Path]
) -> None:
    # doctor reads each role template's frontmatter (not its body): the same confinement holds
    pi = tmp_path / "pi"
    pi.write_text("#!/bin/sh\necho 0.73.1\n")
    pi.chmod(0o755)
    write_settings({"executor": {"preset": "pi", "program": str(pi)}})
    secret.write_text("---\nmodel: stolen/model\n---\n")
    link = project / ".tf/prompts/tf-implement.md.j2"
    link.parent.mkdir()
    link.symlink_to(secret)
    result = run_cli("doctor", "--json")
    assert "stolen/model" not in result.stdout
    assert_refused(result, f"prompt template {link}: ", "outside")


def test_doctor_renders_nothing_so_runs_nothing(
    project: Path, tmp_path: Path, write_settings: Callable[..., Path]
) -> None:
    pi = tmp_path / "pi"
    pi.write_text("#!/bin/sh\necho 0.73.1\n")
    pi.chmod(0o755)
    write_settings({"executor": {"preset": "pi", "program": str(pi)}})
    marker = tmp_path / "escaped"
    prompts = project / ".tf/prompts"
    prompts.mkdir()
    override(prompts, "tf-fix.md.j2", PAYLOADS[0] % marker)
    result = run_cli("doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    assert not marker.exists()


def test_a_symlink_inside_the_prompt_directory_still_works(project: Path) -> None:
    prompts = setup(project)
    override(prompts, "shared-ticket.md.j2", "Shared ticket {{ ticket.id }}")
    (prompts / "_ticket.md.j2").symlink_to("shared-ticket.md.j2")
    result = run_cli("prompts", "show", "fix")
    assert result.returncode == 0, result.stderr
    assert "Shared ticket EXAMPLE-1" in result.stdout


# -- the library, in process ---------------------------------------------------------------


def test_the_library_raises_a_template_error_and_caches_one_environment(
    project: Path, tmp_path: Path
) -> None:
    prompts = setup(project)
    marker = tmp_path / "escaped"
    template = override(prompts, "tf-research.md.j2", PAYLOADS[1] % marker)
    library = PromptLibrary(project)
    with pytest.raises(PromptTemplateError) as info:
        library.render("tf-research.md.j2", {})
    assert (info.value.template, info.value.line) == (str(template), 5)
    assert not marker.exists()
    assert _environment(library.dirs) is _environment(PromptLibrary(project).dirs)
    with pytest.raises(PromptTemplateError, match=r"'\.\.'"):
        library.find("../config/settings.json")
