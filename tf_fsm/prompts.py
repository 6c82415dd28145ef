"""Prompt rendering: Jinja templates, strict about undefined variables.

The packaged templates live in the top-level `prompts/` folder (installed as
`tf_fsm/_prompts` in a wheel)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

PACKAGED = [Path(__file__).parent / "_prompts", Path(__file__).parent.parent / "prompts"]
PHASE_TEMPLATE = "tf-phase.md.j2"


@cache
def _environment() -> Any:
    import jinja2

    search = [str(p) for p in PACKAGED if p.is_dir()]
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(search),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # noqa: S701 - markdown for agents, not HTML
    )


def render(template: str, **context: Any) -> str:
    rendered: str = _environment().get_template(template).render(**context)
    return rendered
