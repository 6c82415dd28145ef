"""Presets for the agent CLIs users already run: pi, Claude Code and Codex.

A preset turns one invocation (role, model, thinking level) into that CLI's argv, in its
non-interactive mode with machine-readable output, the prompt on standard input. Each flag
comes from the CLI's own `--help` (versions in docs/agents.md), not from memory:

* pi (`@mariozechner/pi-coding-agent`): `pi -p --mode json --no-session --model P/ID
  --thinking LEVEL`; print mode reads piped stdin into the prompt.
* Claude Code (`@anthropic-ai/claude-code`): `claude -p --output-format json
  --permission-mode acceptEdits --no-session-persistence --model ID --effort LEVEL`; `-p`
  takes the prompt from stdin.
* Codex (`@openai/codex`): `codex exec --json --skip-git-repo-check --sandbox
  workspace-write -m ID -c model_reasoning_effort=LEVEL -`; `-` reads the prompt from stdin.

tf_fsm's thinking levels are pi's (off, minimal, low, medium, high, xhigh); a level a CLI has
no equivalent for is left out of the argv (the CLI's default applies) and named as a problem,
which `tf-fsm doctor` prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tf_fsm.executors.usage import PARSERS, AgentReport


@dataclass(frozen=True)
class Preset:
    name: str
    program: str  # the CLI's usual name on PATH
    package: str  # where it comes from (npm)
    #: tf_fsm thinking level -> the CLI's value; a level missing here has no equivalent
    thinking_levels: Mapping[str, str]
    #: model providers whose ids the CLI takes without the `provider/` prefix
    native_providers: frozenset[str]
    keeps_provider_prefix: bool  # pi takes `provider/id` as it is
    build: Callable[[str, str, str | None], list[str]]  # (program, model, level) -> argv head
    parse: Callable[[str], AgentReport]
    prompt_last: bool = False  # codex: `-` (read stdin) must follow every option

    def model_arg(self, model: str) -> tuple[str, str | None]:
        """The model as the CLI names it, and a problem when it is not the CLI's provider."""
        if self.keeps_provider_prefix or "/" not in model:
            return model, None
        provider, ident = model.split("/", 1)
        if provider in self.native_providers:
            return ident, None
        return ident, (
            f"model {model}: {self.name} does not know provider {provider!r}; passed as {ident!r}"
        )

    def thinking_arg(self, thinking: str | None) -> tuple[str | None, str | None]:
        if not thinking:
            return None, None
        level = self.thinking_levels.get(thinking)
        if level is not None:
            return level, None
        known = ", ".join(sorted(set(self.thinking_levels), key=_LEVEL_ORDER.index))
        return None, (
            f"thinking {thinking!r}: {self.name} has no such level (it maps {known}); "
            "left out, so the CLI's default applies"
        )

    def argv(
        self,
        model: str,
        thinking: str | None,
        program: str | None = None,
        extra: Sequence[str] = (),
    ) -> tuple[list[str], list[str]]:
        """The full argv for one invocation, and what could not be mapped."""
        model_value, model_problem = self.model_arg(model)
        level, level_problem = self.thinking_arg(thinking)
        head = self.build(program or self.program, model_value, level)
        argv = [*head, *extra, "-"] if self.prompt_last else [*head, *extra]
        return argv, [p for p in (model_problem, level_problem) if p]


_LEVEL_ORDER = ["off", "none", "minimal", "low", "medium", "high", "xhigh", "max"]


def _pi(program: str, model: str, level: str | None) -> list[str]:
    argv = [program, "-p", "--mode", "json", "--no-session", "--model", model]
    return [*argv, "--thinking", level] if level else argv


def _claude(program: str, model: str, level: str | None) -> list[str]:
    argv = [program, "-p", "--output-format", "json", "--permission-mode", "acceptEdits"]
    argv += ["--no-session-persistence", "--model", model]
    return [*argv, "--effort", level] if level else argv


def _codex(program: str, model: str, level: str | None) -> list[str]:
    argv = [program, "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write"]
    argv += ["-m", model]
    return [*argv, "-c", f"model_reasoning_effort={level}"] if level else argv


_SAME = {lvl: lvl for lvl in ("minimal", "low", "medium", "high", "xhigh")}

PRESETS: dict[str, Preset] = {
    "pi": Preset(
        name="pi",
        program="pi",
        package="@mariozechner/pi-coding-agent",
        thinking_levels={"off": "off", **_SAME},  # `--thinking` in `pi --help`
        native_providers=frozenset(),
        keeps_provider_prefix=True,
        build=_pi,
        parse=PARSERS["pi"],
    ),
    "claude": Preset(
        name="claude",
        program="claude",
        package="@anthropic-ai/claude-code",
        # `--effort` in `claude --help`: low, medium, high, xhigh, max (no off, no minimal)
        thinking_levels={k: k for k in ("low", "medium", "high", "xhigh", "max")},
        native_providers=frozenset({"anthropic", "claude"}),
        keeps_provider_prefix=False,
        build=_claude,
        parse=PARSERS["claude"],
    ),
    "codex": Preset(
        name="codex",
        program="codex",
        package="@openai/codex",
        # model_reasoning_effort: none, minimal, low, medium, high, xhigh; pi's off is none
        thinking_levels={"off": "none", "none": "none", **_SAME},
        native_providers=frozenset({"openai", "openai-codex", "codex"}),
        keeps_provider_prefix=False,
        build=_codex,
        parse=PARSERS["codex"],
        prompt_last=True,
    ),
}


def preset(name: str) -> Preset:
    return PRESETS[name]
