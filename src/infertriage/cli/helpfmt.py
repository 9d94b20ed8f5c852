"""cli, level 6: takes typer's help rendering; gives flags without a type column.

typer (0.29) writes `<bool>` after every flag, `--help` and `-v` included, as if
`--force` took a value. `install()` makes a flag (an option that takes no value:
`is_flag`) show no type, and leaves every option that takes a value as it is
(its metavar: `DURATION`, `RATE`, `PATH`, declared once in `cli.flags`).
"""

from __future__ import annotations

from typer.core import TyperOption

__all__ = ["install"]

_ORIGINAL = TyperOption.display_type_rich


def _display_type_rich(self: TyperOption, ctx: object) -> str | None:
    if self.is_flag:  # `--force`, `--progress/--no-progress`, `--help`, `-v` (a count)
        return None
    return _ORIGINAL(self, ctx)  # type: ignore[arg-type]


def install() -> None:
    """Once, when the app is built: a flag's row in `--help` shows no `<bool>`."""
    setattr(TyperOption, "display_type_rich", _display_type_rich)  # noqa: B010
