"""schemas, level 0: the base of every command's spec, where each field's range is checked once.

Gives `CommandSpec`, a frozen model: a value out of a field's range (`Field(gt=0)`, `ge=1`,
`le=…`, a finite number) is refused as the spec is made, in one sentence naming the
field's flag, a `UserError`; any other error (an unknown field, a wrong type) is the
caller's and stays pydantic's `ValidationError`. And `flag_of`, a field's flag: `--` and
its name with `_s` dropped and `_` as `-` (`duration_s` is `--duration`), unless the field
names its own, `Field(json_schema_extra={"flag": "--tokenize-check"})`. The CLI checks no
range of its own: it makes the spec before any work, so a refused value starts no server
and creates no run directory.
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import ConfigDict, ValidationError, ValidatorFunctionWrapHandler, model_validator
from pydantic_core import ErrorDetails

from infertriage.schemas.errors import UserError
from infertriage.schemas.frozen import FrozenModel

__all__ = ["CommandSpec", "flag_of"]

Bound = tuple[str, float]  # ("gt", 0): above 0


def flag_of(model: type[FrozenModel], field: str) -> str:
    """The command-line flag of `model`'s `field` (see the module docstring)."""
    info = model.model_fields.get(field)
    extra = info.json_schema_extra if info is not None else None
    if isinstance(extra, dict) and isinstance(extra.get("flag"), str):
        return str(extra["flag"])
    return "--" + field.removesuffix("_s").replace("_", "-")


def _shown(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _whole(model: type[FrozenModel], field: str | None, given: object) -> bool:
    """A count (`at least 1`) rather than an amount (`a positive number`): by the field's type
    where it says (`int | None`), else by the value's."""
    info = model.model_fields.get(field) if field is not None else None
    kinds = {info.annotation, *get_args(info.annotation)} if info is not None else set()
    if float in kinds or int in kinds:
        return float not in kinds
    return isinstance(given, int) and not isinstance(given, bool)


_RANGE_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}


def _bounds(model: type[FrozenModel], field: str | None, detail: ErrorDetails) -> list[Bound]:
    """The field's bounds (`Field(gt=0, le=1)`), in order; else the one the error names."""
    info = model.model_fields.get(field) if field is not None else None
    found: list[Bound] = []
    for meta in info.metadata if info is not None else []:
        for name in ("gt", "ge", "lt", "le"):
            value = getattr(meta, name, None)
            if isinstance(value, int | float):
                found.append((name, value))
    if not found and detail["type"] in _RANGE_ERRORS:
        found = [(name, value) for name, value in detail.get("ctx", {}).items()]
    return found


def _phrase(bound: Bound, *, whole: bool) -> str:
    """One bound in the words of every range sentence: `a positive number`, `0 or more`."""
    name, value = bound
    if (name, value) == ("gt", 0) or ((name, value) == ("ge", 1) and whole):
        return "at least 1" if whole else "a positive number"
    if (name, value) == ("ge", 0):
        return "0 or more"
    words = {"gt": "above", "ge": "at least", "lt": "below", "le": "at most"}
    return f"{words[name]} {_shown(value)}"


def _sentence(model: type[FrozenModel], err: ValidationError) -> str | None:
    """The one sentence of a value out of its field's range; None for any other error (a
    field unknown or missing, a wrong type: the caller's bug, not the user's)."""
    detail = err.errors()[0]
    if detail["type"] not in {*_RANGE_ERRORS, "finite_number"}:
        return None
    loc = [str(part) for part in detail["loc"] if isinstance(part, str)]
    field = loc[0] if loc else None
    flag = flag_of(model, field) if field is not None else "a value"
    given = detail.get("input")
    whole = _whole(model, field, given)
    bounds = [_phrase(bound, whole=whole) for bound in _bounds(model, field, detail)]
    must = " and ".join(bounds) or "a finite number"
    return f"{flag} must be {must}, not {_shown(given)}."


class CommandSpec(FrozenModel):
    """A command's spec: refused in one sentence naming the flag (see the module docstring).
    A number is finite unless its field says otherwise (`Field(allow_inf_nan=True)`).

    Its validator is built when the spec is first made (`defer_build`), not when its
    module loads: a command imports the modules of specs it never makes."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, defer_build=True)

    @model_validator(mode="wrap")
    @classmethod
    def _one_sentence(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(data)
        except ValidationError as err:
            sentence = _sentence(cls, err)
            if sentence is None:
                raise
            raise UserError(sentence) from None
