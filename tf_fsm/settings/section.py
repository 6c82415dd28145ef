"""What every settings section shares: strict, frozen, finite numbers, and the string type for
paths and arguments."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict


class Section(BaseModel):
    # allow_inf_nan=False: every float setting is finite (JSON has no Infinity or NaN, and
    # `--json` output must stay JSON).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def no_nul(value: str) -> str:
    if "\0" in value:
        raise ValueError("contains a NUL character (\\u0000), which no path or argument can hold")
    return value


#: a string tf_fsm hands to the OS as a path or a command argument, where NUL cannot go
OsStr = Annotated[str, AfterValidator(no_nul)]
