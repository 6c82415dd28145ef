"""State diagrams generated from the machine that runs: the lifecycle, and one ticket's path.

The picture is built by `transitions`' own diagram support from `machine.TRANSITIONS` and
`machine.STATES`, so it cannot drift from the runtime table: a `HierarchicalGraphMachine` whose
state separator is `.` regroups the flat `in_progress.<phase>` names into a nested
`in_progress` state. Mermaid comes from `transitions`' mermaid engine. Graphviz DOT is written
here from the same graph object (`_get_elements`, the same edge labels) because `transitions`'
graphviz engine needs the `graphviz` Python package, and the committed file must not depend on
whether it is installed; SVG and PNG pipe that DOT through Graphviz's `dot` program.
Imported only by `tf-fsm diagram`, so `transitions`' diagram modules never slow other commands.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transitions.extensions.diagrams import HierarchicalGraphMachine
from transitions.extensions.diagrams_mermaid import NestedGraph
from transitions.extensions.nesting import NestedState

from tf_fsm.core import machine as fsm
from tf_fsm.errors import GraphvizError
from tf_fsm.process.door import run_process
from tf_fsm.views.history import History, Key
from tf_fsm.views.legend import TAKEN, current_colours, markdown, one_ticket, tiers

if TYPE_CHECKING:
    from tf_fsm.storage.protocol import Store

NAME = "ticket-lifecycle"  # <dir>/ticket-lifecycle.<ext>
TICKET_NAME = "lifecycle"  # <ticket dir>/lifecycle.<ext>
FORMATS = ("mermaid", "markdown", "dot", "svg", "png")
SUFFIX = {"mermaid": ".mmd", "markdown": ".md", "dot": ".dot", "svg": ".svg", "png": ".png"}
#: What `tf-fsm diagram` writes and `--check` compares; SVG/PNG vary with the Graphviz version.
COMMITTED = ("mermaid", "markdown", "dot")


INSTALL_GRAPHVIZ = """\
--format svg|png needs Graphviz's `dot` program, which is not on PATH. Install it:
  Debian/Ubuntu: sudo apt-get install -y graphviz
  Fedora:        sudo dnf install -y graphviz
  macOS:         brew install graphviz
  Windows:       winget install graphviz
  conda:         conda install -c conda-forge graphviz
or use the default Mermaid output (no binary needed) or --format dot"""


# --- the diagram machine --------------------------------------------------------------------


class _DotState(NestedState):
    # The default separator `_` would split `in_progress` itself (KeyError 'in'); `.` is the
    # one machine.PREFIX uses, so the runtime state names are the nested names.
    separator = "."


class _DiagramMachine(HierarchicalGraphMachine):
    state_cls = _DotState
    # Top to bottom: the six phases read as a column; left to right came out 3000 px wide.
    machine_attributes = {**HierarchicalGraphMachine.machine_attributes, "rankdir": "TB"}  # noqa: RUF012


def _states() -> list[dict[str, Any]]:
    children: list[str] = []
    out: list[dict[str, Any]] = []
    for state in fsm.STATES:
        if not state.startswith(fsm.PREFIX):
            out.append({"name": state, "final": state in fsm.TERMINAL})
            continue
        if not children:
            out.append({"name": fsm.PREFIX.removesuffix("."), "children": children})
        children.append(state.removeprefix(fsm.PREFIX))
    return out


def diagram_machine(table: Sequence[fsm.Edge] = fsm.TRANSITIONS) -> HierarchicalGraphMachine:
    """A graph machine over the runtime table. Never advanced: it is only drawn."""
    return _DiagramMachine(
        model=None,
        states=_states(),
        transitions=[
            {"trigger": e.trigger, "source": e.source, "dest": e.dest, "conditions": list(e.guards)}
            for e in table
        ],
        initial=fsm.INITIAL,
        auto_transitions=False,
        show_conditions=True,  # `trigger [guard]`, each guard named by its __name__
        graph_engine="mermaid",
        title="",
    )


# --- one graph, two serializations ----------------------------------------------------------

# Mermaid ends a label at `:` `;` `#` or a newline, reads `<...>` as HTML, and `|` is how
# transitions joins the labels of one arrow (replaced by line breaks below).
_MERMAID_UNSAFE = str.maketrans(
    {":": "∶", ";": ",", "#": "no.", "<": "‹", ">": "›", "\n": " ", "|": "/"}
)
_STATE_LINE = re.compile(r'state "(?P<label>[^"]*)" as (?P<id>\S+)')
_NODE_STYLE = {
    "previous": {"color": "#1f5fbf", "fillcolor": "#dce8fb"},
    "active": {"penwidth": "2.5"},  # its colours: current_colours
}
# Failure and resume edges are many: drawn lighter, so the way to `closed` reads first.
_EDGE_STYLE = {
    "fail": {"style": "dashed", "color": "gray45", "fontcolor": "gray35"},
    "resume": {"style": "dotted", "color": "gray45", "fontcolor": "gray35"},
}
_TAKEN_STYLE = {"color": "#1f5fbf", "fontcolor": "#1f5fbf", "penwidth": "2.2", "style": "solid"}


def _merged(notes: list[str]) -> list[str]:
    """`a1 x`, `a2 x` -> `a1, a2 x`: attempts that did the same share a line."""
    attempts: dict[str, list[str]] = {}
    for note in notes:
        attempt, _, rest = note.partition(" ")
        attempts.setdefault(rest, []).append(attempt)
    return [f"{', '.join(dict.fromkeys(a))} {rest}".rstrip() for rest, a in attempts.items()]


def _keys(tran: dict[str, Any]) -> list[Key]:
    """The table edges one drawn transition stands for."""
    return [(s, tran["trigger"], tran["dest"]) for s in tran.get("members", [tran["source"]])]


class _Graph(NestedGraph):
    """transitions' mermaid graph, with `history`'s notes on edges and its states styled."""

    def __init__(self, machine: HierarchicalGraphMachine, history: History | None) -> None:
        # A ticket's path says what each of its attempts ran (its `start`/`retry` notes), so
        # the generic curve, which names roles the project may have no escalation model for,
        # is only on the lifecycle and the backlog picture.
        start, retry = ([], []) if one_ticket(history) else tiers()
        first = fsm.phase_state(fsm.PHASES[0])
        self.static = {(fsm.INITIAL, "start", first): start, (fsm.BLOCKED, "retry", first): retry}
        self.history = history
        super().__init__(machine)
        if history is not None:
            for state in history.visited:
                self.set_node_style(state, "previous")
            if history.current in fsm.STATES:  # a backlog picture has no current state
                self.set_node_style(history.current, "active")

    def _get_elements(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """transitions' elements, but an edge that every child of a group has (same trigger,
        dest and guards: `fail`) is drawn once, from the group, as UML does. Only then: a phase
        that lacks it keeps its own edges, so the picture still shows the gap."""
        elements: tuple[list[dict[str, Any]], list[dict[str, Any]]] = super()._get_elements()
        states, transitions = elements
        groups = {
            s["name"]: [f"{s['name']}.{c['name']}" for c in s["children"]]
            for s in states
            if s.get("children")
        }

        def sig(t: dict[str, Any]) -> tuple[Any, ...]:
            return t["trigger"], t.get("dest"), t.get("conditions"), t.get("unless")

        out: list[dict[str, Any]] = []
        for tran in transitions:
            group = tran["source"].rpartition(".")[0]
            members = groups.get(group, [])
            same = [
                t["source"] for t in transitions if t["source"] in members and sig(t) == sig(tran)
            ]
            if not members or sorted(same) != sorted(members) or tran.get("dest") in members:
                out.append(tran)
            elif tran["source"] == same[0]:
                out.append({**tran, "source": group, "members": same})
        return states, out

    def _lines(self, tran: dict[str, Any], mermaid: bool) -> list[str]:
        keys = _keys(tran)
        static = (
            self.static.get(keys[0], []) if len(keys) == 1 else [f"from any {tran['source']} state"]
        )
        taken = [t for k in keys for t in (self.history.taken.get(k, []) if self.history else [])]
        lines = [super()._transition_label(tran), *static, *(TAKEN + t for t in _merged(taken))]
        return [t.translate(_MERMAID_UNSAFE) for t in lines] if mermaid else lines

    def _transition_label(self, tran: dict[str, str]) -> str:
        return "<br/>".join(self._lines(tran, mermaid=True))

    def _add_nodes(self, states: list[dict[str, str]], container: list[str]) -> None:
        super()._add_nodes(states, container)
        for i, line in enumerate(container):
            match = _STATE_LINE.fullmatch(line)
            if match and self.history and match["id"] == self.history.current:
                container[i] = f'state "{match["label"]} (current)" as {match["id"]}'

    def _add_edges(self, transitions: list[dict[str, str]], container: list[str]) -> None:
        start = len(container)
        super()._add_edges(transitions, container)
        # transitions writes `Class` lines for top-level states only; mermaid's `class` cannot
        # name an id with a dot and ignores a lone `id:::class` line, but applies `id:::class`
        # in an arrow: so each styled phase gets it on the first arrow that names it.
        styles: Any = self.custom_styles["node"]
        pending = {name: style for name, style in styles.items() if "." in name and style}

        def styled(name: str) -> str:
            style = pending.pop(name, None)
            return f"{name}:::s_{style}" if style else name

        out = []
        for line in container[start:]:
            head, colon, label = line.replace(" | ", "<br/>").partition(":")
            src, arrow, dst = head.partition(" --> ")
            out.append(f"{styled(src)}{arrow}{styled(dst)}{colon}{label}")
        container[start:] = out

    def mermaid(self, title: str) -> str:
        # transitions writes the title line verbatim into mermaid's YAML front matter.
        return str(self.get_graph(title=f"title: {title}").source).rstrip() + "\n"

    def dot(self, title: str) -> str:
        states, transitions = self._get_elements()
        styles: Any = self.custom_styles["node"]
        out = [
            f"digraph {_q(NAME)} {{",
            f"  graph [label={_q(title)}, labelloc=t, fontsize=18, rankdir=TB, compound=true,"
            " nodesep=0.5, ranksep=0.5, fontname=Helvetica];",
            '  node [shape=box, style="rounded,filled", fillcolor=white, fontname=Helvetica];',
            "  edge [fontname=Helvetica, fontsize=10];",
            '  "[*]" [shape=point, width=0.15, label=""];',
        ]

        def nodes(items: Iterable[dict[str, Any]], prefix: str, indent: str) -> None:
            for state in items:
                name = prefix + state["name"]
                if state.get("children"):
                    out.append(f"{indent}subgraph {_q('cluster_' + name)} {{")
                    out.append(f'{indent}  label={_q(name)}; style="rounded,dashed"; color=gray40;')
                    nodes(state["children"], name + ".", indent + "  ")
                    out.append(f"{indent}}}")
                    continue
                mark = " (current)" if styles[name] == "active" else ""
                attrs = {"label": state["name"] + mark, **_NODE_STYLE.get(styles[name], {})}
                if mark:
                    attrs["color"], attrs["fillcolor"] = current_colours(name)
                if state.get("final"):
                    attrs["peripheries"] = "2"
                out.append(f"{indent}{_q(name)} [{_attrs(attrs)}];")

        nodes(states, "", "  ")
        out.append(f'  "[*]" -> {_q(str(self.machine.initial))};')
        groups = {s["name"]: s["children"] for s in states if s.get("children")}
        edges: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for tran in transitions:  # one arrow per (source, dest), as the mermaid has
            edges.setdefault((tran["source"], tran["dest"]), []).append(tran)
        for (src, dst), trans in edges.items():
            label = "\n".join(line for t in trans for line in self._lines(t, mermaid=False))
            attrs = {"label": label, **_EDGE_STYLE.get(trans[0]["trigger"], {})}
            if src in groups:
                # ltail clips the arrow at the cluster's border, so the child it is tied to
                # does not show; the one before last gives dot the tidiest layout.
                attrs["ltail"] = f"cluster_{src}"
                src = f"{src}.{groups[src][max(0, len(groups[src]) - 2)]['name']}"
            if self.history and any(k in self.history.taken for t in trans for k in _keys(t)):
                attrs.update(_TAKEN_STYLE)
            out.append(f"  {_q(src)} -> {_q(dst)} [{_attrs(attrs)}];")
        return "\n".join([*out, "}"]) + "\n"


def _q(text: str) -> str:
    """A DOT string; lines are left-aligned (`\\l`)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\l")
    return f'"{escaped}\\l"' if "\n" in text else f'"{escaped}"'


def _attrs(attrs: dict[str, str]) -> str:
    return ", ".join(f"{k}={_q(v)}" for k, v in attrs.items())


# --- outputs --------------------------------------------------------------------------------


def render(dot_text: str, fmt: str) -> bytes:
    """`dot_text` rendered by Graphviz. `dot` writes a file rather than stdout: PNG is binary,
    and every process goes through run_process, which captures text."""
    dot = shutil.which("dot")
    if dot is None:
        raise GraphvizError(INSTALL_GRAPHVIZ)
    with tempfile.TemporaryDirectory(prefix="tf-fsm-dot-") as tmp:
        out = Path(tmp) / f"diagram.{fmt}"
        done = run_process([dot, f"-T{fmt}", f"-o{out}"], cwd=Path(tmp), stdin=dot_text, timeout=60)
        if done.timed_out or done.exit_code != 0:
            why = "timed out after 60 s" if done.timed_out else done.stderr.strip()
            raise GraphvizError(f"`dot` failed: {why}")
        return out.read_bytes()


def diagram(
    fmt: str, history: History | None = None, table: Sequence[fsm.Edge] = fsm.TRANSITIONS
) -> bytes:
    """The lifecycle, or with `history` one ticket's path over it, in `fmt`."""
    graph = _Graph(diagram_machine(table), history)
    title = "tf-fsm ticket lifecycle"
    source = (
        "Generated by `tf-fsm diagram` from `tf_fsm.core.machine.TRANSITIONS`; do not edit by "
        "hand.\n"
        "CI runs `tf-fsm diagram --check`, which fails when this file is stale."
    )
    if history is not None and history.title is not None:
        title = history.title
        source = "Generated by `tf-fsm diagram --ralph` from every ticket's journal."
    elif history is not None:
        title = (
            f"ticket {history.ticket_id}, its path through the lifecycle (now {history.current})"
        )
        source = f"Generated by `tf-fsm diagram --ticket {history.ticket_id}` from its journal."
    if fmt in ("mermaid", "markdown"):
        text = graph.mermaid(title)
        return (text if fmt == "mermaid" else markdown(text, title, source, history)).encode()
    return graph.dot(title).encode() if fmt == "dot" else render(graph.dot(title), fmt)


def stale_files(directory: Path) -> list[Path]:
    """Committed lifecycle files that are missing or differ from what the code generates."""
    paths = {fmt: directory / (NAME + SUFFIX[fmt]) for fmt in COMMITTED}
    return [p for f, p in paths.items() if not p.is_file() or p.read_bytes() != diagram(f)]


def write_lifecycle(directory: Path, fmt: str | None) -> list[Path]:
    """The committed set (fmt None), or one format, as `<directory>/ticket-lifecycle.<ext>`."""
    from tf_fsm.storage.store import atomic_write_bytes

    paths = []
    for f in COMMITTED if fmt is None else (fmt,):
        paths.append(directory / (NAME + SUFFIX[f]))
        atomic_write_bytes(paths[-1], diagram(f), within=None)  # where the user says
    return paths


def write_output(
    data: bytes,
    fmt: str,
    output: str | None,
    store: Store | None,
    within: Path | None = None,
) -> Path:
    """To `output`, else to `<ticket dir>/lifecycle.<ext>` through the store (text redacted).
    `within`: the boundary when tf_fsm chose `output` itself (None: the user named it)."""
    from tf_fsm.storage.store import atomic_write_bytes

    if output is None and store is not None:
        name = TICKET_NAME + SUFFIX[fmt]
        if fmt != "png":
            store.write_artifact(name, data.decode())
            return store.files.path(name)
        output, within = str(store.files.path(name)), store.files.within
    path = Path(output or NAME + SUFFIX[fmt])
    atomic_write_bytes(path, data, within=within)
    return path
