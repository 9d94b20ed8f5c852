"""cli, level 6: takes typer's help rendering; gives flags without a type column.

typer (0.29) writes `<bool>` after every flag, `--help` and `-v` included, as if
`--force` took a value. `install()` makes a flag (an option that takes no value:
`is_flag`) show no type, and leaves every option that takes a value as it is
(its metavar: `DURATION`, `RATE`, `PATH`, declared once in `cli.flags`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from typer.core import TyperOption

__all__ = ["install"]

# typer 0.29's type column; older typers (0.26, the floor) have none and show a flag bare
_ORIGINAL: Callable[..., Any] | None = getattr(TyperOption, "display_type_rich", None)


def _display_type_rich(self: TyperOption, ctx: object) -> str | None:
    if self.is_flag or _ORIGINAL is None:  # `--force`, `--progress/--no-progress`, `-v`
        return None
    shown: str | None = _ORIGINAL(self, ctx)
    return shown


def install() -> None:
    """Once, when the app is built: a flag's row in `--help` shows no `<bool>` (nothing to
    do on a typer without the type column)."""
    if _ORIGINAL is not None:
        setattr(TyperOption, "display_type_rich", _display_type_rich)  # noqa: B010
