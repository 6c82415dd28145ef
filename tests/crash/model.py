"""A power-loss model over recorded file-system operations (tests/crash/recorder.py).

From the ops up to a cut point the model keeps two states: the *volatile* one (what the
process saw) and the *durable* one (what survives any power loss). A file is an inode: its
name(s) are directory entries, its bytes are content, and the two become durable separately.

The rules:

1. A file's content is durable at an `fsync` of that file (the bytes of its inode, under
   whatever name it has later).
2. Directory entries (create, rename, unlink, mkdir, rmdir) are *metadata ops*. Those of a
   directory D become durable at an `fsync` of D (a rename or exchange whose source or
   destination is in D counts for D). A directory that holds a durable entry exists, so an
   `fsync` of D also makes the pending mkdirs of D and of its ancestors durable.
3. `sync` (tf_fsm.fs.atomic.sync_filesystem, syncfs(2)) makes everything durable.
4. A crash state starts from the durable entries, then applies each pending (not durable)
   metadata op or not (a fair coin each), in recorded order. A rename is atomic: both names
   change or neither; so is an exchange (renameat2 RENAME_EXCHANGE: two names swap files).
   An op whose source (or parent directory) does not exist in the crash state, or whose new
   name already exists, is skipped.
5. Each file whose content is not durable then gets one of: its durable content, its volatile
   content, or
   - when it was truncated (O_TRUNC, ftruncate) or created since its content was last durable:
     zero length, or a prefix of its volatile content (a torn write);
   - when it was only appended to: a prefix of its volatile content at least as long as its
     durable content (torn, possibly mid-line). An fsynced append always survives.
6. Temp files (`.*.tmp`) are left behind whenever their create is applied and their rename is
   not: nothing special is needed for them.

`Machine.crash` draws all of these at random. `Machine.lose` makes one of them on purpose:
everything as the process saw it but one file, gone (its name not durable) or with its
durable content or a torn write: a power cut that took that file alone, which random draws
rarely make (every other pending op must come out applied).

Every draw comes from the `random.Random` it is given, and its choices are listed in
`CrashState.choices`, so a failing state can be replayed from its seed and cut point.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.crash.recorder import Op

META = frozenset({"create", "rename", "exchange", "unlink", "mkdir", "rmdir"})


@dataclass(frozen=True)
class Meta:
    """A metadata op, with the inode a create makes."""

    op: Op
    inode: int = -1


def parent(path: str) -> str:
    return os.path.dirname(path) or "."


def ancestors(path: str) -> list[str]:
    """`path` and every directory above it, up to the root (".")."""
    out = [path]
    while out[-1] != ".":
        out.append(parent(out[-1]))
    return out


@dataclass
class Tree:
    """Directory entries: file name -> inode, and the directories."""

    names: dict[str, int] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=lambda: {"."})

    def copy(self) -> Tree:
        return Tree(dict(self.names), set(self.dirs))

    def apply(self, meta: Meta) -> bool:
        """Apply `meta` if it can be (rule 4): whether it was."""
        op, names, dirs = meta.op, self.names, self.dirs
        if op.kind == "create" and parent(op.path) in dirs and op.path not in names:
            names[op.path] = meta.inode
        elif op.kind == "rename" and op.path in names and parent(op.dst) in dirs:
            names[op.dst] = names.pop(op.path)
        elif op.kind == "exchange" and op.path in names and op.dst in names:
            names[op.path], names[op.dst] = names[op.dst], names[op.path]
        elif op.kind == "unlink" and op.path in names:
            del names[op.path]
        elif op.kind == "mkdir" and parent(op.path) in dirs and op.path not in dirs:
            dirs.add(op.path)
        elif op.kind == "rmdir" and op.path in dirs and not self._holds(op.path):
            dirs.discard(op.path)
        else:
            return False
        return True

    def _holds(self, directory: str) -> bool:
        return any(parent(p) == directory for p in (*self.names, *self.dirs))


@dataclass
class CrashState:
    files: dict[str, bytes]
    dirs: set[str]
    choices: list[str]

    def materialize(self, root: Path) -> None:
        """Write this state as a project tree at `root` (a new directory)."""
        for directory in sorted(self.dirs, key=lambda d: d.count("/")):
            (root / directory).mkdir(parents=True, exist_ok=True)
        for path, data in self.files.items():
            (root / path).write_bytes(data)


class Machine:
    """The volatile and durable states after replaying ops (rules 1-3)."""

    def __init__(self, files: dict[str, bytes], dirs: set[str]) -> None:
        self.volatile = Tree(dirs={".", *dirs})
        self.content: dict[int, bytes] = {}
        for inode, (path, data) in enumerate(sorted(files.items())):
            self.volatile.names[path] = inode
            self.content[inode] = data
        self.durable = self.volatile.copy()
        self.synced = dict(self.content)  # inode -> its durable content
        self.truncated: set[int] = set()  # inodes truncated or created since last durable
        self.pending: list[Meta] = []

    def replay(self, ops: list[Op]) -> Machine:
        for op in ops:
            self.step(op)
        return self

    def step(self, op: Op) -> None:
        if op.kind in META:
            self._meta(op)
        elif op.kind == "sync":
            self._make_durable(lambda meta: True)
            self.synced = dict(self.content)
            self.truncated.clear()
        elif op.kind == "fsync" and op.is_dir:
            self._make_durable(lambda meta: _touches(meta.op, op.path), op.path)
        else:
            self._data(op)

    def _meta(self, op: Op) -> None:
        inode = -1
        if op.kind == "create":
            inode = len(self.content)
            self.content[inode] = b""
            self.synced[inode] = b""
            self.truncated.add(inode)
        meta = Meta(op, inode)
        if self.volatile.apply(meta):
            self.pending.append(meta)

    def _data(self, op: Op) -> None:
        inode = self.volatile.names.get(op.path)
        if inode is None:
            raise AssertionError(f"{op}: no such file in the volatile state")
        data = self.content[inode]
        if op.kind == "fsync":
            self.synced[inode] = data
            self.truncated.discard(inode)
        elif op.kind == "trunc":
            self.content[inode] = data[: op.size].ljust(op.size, b"\0")
            self.truncated.add(inode)
        elif op.kind == "write":
            padded = data.ljust(op.offset, b"\0")
            tail = padded[op.offset + len(op.data) :]
            self.content[inode] = padded[: op.offset] + op.data + tail

    def _make_durable(self, pick: Callable[[Meta], bool], directory: str | None = None) -> None:
        """Make the pending ops `pick` chooses durable, with the mkdirs of `directory` and of
        its ancestors (rule 2)."""
        needed = set(ancestors(directory)) if directory is not None else set()
        keep: list[Meta] = []
        for meta in self.pending:
            if pick(meta) or (meta.op.kind == "mkdir" and meta.op.path in needed):
                self.durable.apply(meta)
            else:
                keep.append(meta)
        self.pending = keep

    def crash(self, rng: random.Random) -> CrashState:
        """One crash state (rules 4-6), drawn with `rng`."""
        tree, choices = self.durable.copy(), []
        for meta in self.pending:
            if rng.random() < 0.5:
                choices.append(f"{'+' if tree.apply(meta) else '~'}{meta.op}")
            else:
                choices.append(f"-{meta.op}")
        files = {
            path: self._content(path, inode, rng, choices) for path, inode in tree.names.items()
        }
        return CrashState(files, tree.dirs, choices)

    def _content(self, path: str, inode: int, rng: random.Random, choices: list[str]) -> bytes:
        old, new = self.synced[inode], self.content[inode]
        if old == new:
            return new
        if inode in self.truncated or not new.startswith(old):
            options = [old, new, b"", new[: rng.randint(0, len(new))]]
        else:
            options = [old, new, new[: rng.randint(len(old), len(new))]]
        data = rng.choice(options)
        kind = "durable" if data == old else "volatile" if data == new else f"{len(data)} bytes"
        choices.append(f"{path}: {kind}")
        return data

    def lose(self, path: str, rng: random.Random) -> CrashState:
        """The state the process saw, but for the file `path` alone: gone when its name is
        not durable, else its content as durable (or a torn write): one of the states rule 4
        and 5 allow, the one where a power cut took that file and nothing else."""
        tree, choices = self.volatile.copy(), []
        inode = tree.names[path]
        if self.durable.names.get(path) != inode:
            del tree.names[path]
            choices.append(f"-{path}")
        files = {p: self.content[i] for p, i in tree.names.items()}
        if path in tree.names:
            old, new = self.synced[inode], self.content[inode]
            start = 0 if inode in self.truncated or not new.startswith(old) else len(old)
            torn = new[: rng.randint(start, len(new) - 1)] if start < len(new) else old
            files[path] = old if rng.random() < 0.5 else torn
            kind = "durable" if files[path] == old else f"{len(files[path])} bytes"
            choices.append(f"{path}: {kind}")
        return CrashState(files, set(tree.dirs), choices)

    def lost_alone(self, under: str) -> list[str]:
        """The files under `under` a power cut now could take alone: their name or their
        content is not durable (temp files and the lock's files aside)."""
        return [
            path
            for path, inode in sorted(self.volatile.names.items())
            if path.startswith(under)
            and not os.path.basename(path).startswith(".")
            and (self.durable.names.get(path) != inode or self.synced[inode] != self.content[inode])
        ]

    def durable_state(self) -> CrashState:
        """The crash state that keeps only what is durable."""
        files = {path: self.synced[inode] for path, inode in self.durable.names.items()}
        return CrashState(files, set(self.durable.dirs), [])

    def volatile_state(self) -> CrashState:
        files = {path: self.content[inode] for path, inode in self.volatile.names.items()}
        return CrashState(files, set(self.volatile.dirs), [])


def _touches(op: Op, directory: str) -> bool:
    return directory in _dirs_of(op)


def _dirs_of(op: Op) -> set[str]:
    """The directories whose entries `op` changes."""
    return {parent(op.path)} | ({parent(op.dst)} if op.kind in ("rename", "exchange") else set())


def snapshot(root: Path) -> tuple[dict[str, bytes], set[str]]:
    """The files and directories under `root`, relative to it: the state before a run."""
    files, dirs = {}, set()
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_dir():
            dirs.add(rel)
        else:
            files[rel] = path.read_bytes()
    return files, dirs
