"""cli, level 6: the command-line framework's usage errors as one sentence of ours.

Takes an error of the click that typer vendors (an unknown option or command,
a missing option or argument, a value of the wrong type, an option without its
value) and gives the one line `main` prints on stderr before exit 2, in the
wording of our own errors: what is wrong, naming the flag and the value, then
where the command's flags are listed, e.g. "plan has no option --tpp (did you mean
--tp?); see `infertriage plan --help`."
A bare group (`infertriage`, `infertriage baseline`) still shows its help.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from typer._click.exceptions import (
    BadOptionUsage,
    BadParameter,
    ClickException,
    MissingParameter,
    NoArgsIsHelpError,
    NoSuchOption,
    UsageError,
)
from typer.core import TyperGroup

__all__ = ["PROG", "usage_sentence"]

PROG = "infertriage"
# pydantic's error types (typer converts with it) → our wording
_TYPE_WORDS = {
    "int_parsing": "is not a whole number",
    "int_from_float": "is not a whole number",
    "float_parsing": "is not a number",
    "bool_parsing": "is not true or false",
}


def _command_path(err: ClickException, argv: Sequence[str]) -> str:
    """`infertriage plan`: from the error's context, else the leading words of the argv."""
    ctx = getattr(err, "ctx", None)
    if ctx is not None:
        return str(ctx.command_path)
    words = [PROG]
    for token in argv:
        if token.startswith("-"):
            break
        words.append(token)
    return " ".join(words[:3])


def _hint(err: BadParameter) -> str:
    if err.param is not None and err.param.opts:
        opts = err.param.opts
        return opts[0] if opts[0].startswith("-") else opts[0].upper()
    return str(err.param_hint or "a value")


def _bad_value(err: BadParameter) -> str:
    cause = err.__cause__
    errors = getattr(cause, "errors", None)
    found = errors()[0] if callable(errors) and errors() else None
    if found is not None and found.get("type") in _TYPE_WORDS:
        return f"{_hint(err)} {found.get('input')!r} {_TYPE_WORDS[found['type']]}"
    text = err.message.rstrip(".")
    if found is not None and "input" in found:
        return f"{_hint(err)} {found['input']!r}: {text[:1].lower()}{text[1:]}"
    # our parsers' sentences start with the value: "--duration 'x' is not a duration …"
    return f"{_hint(err)} {text}" if text.startswith("'") else f"{_hint(err)}: {text}"


def _no_such_command(err: UsageError, where: str) -> str | None:
    ctx = err.ctx
    if ctx is None or not isinstance(ctx.command, TyperGroup):
        return None
    if "No such command" not in err.message:
        return None
    name = err.message.split("'")[1] if err.message.count("'") >= 2 else ""
    close = difflib.get_close_matches(name, ctx.command.list_commands(ctx), n=1)
    guess = f" (did you mean {close[0]}?)" if close else ""
    return f"{where} has no command {name!r}{guess}"


def _what(err: ClickException, where: str) -> str:
    if isinstance(err, NoSuchOption):
        guess = sorted(err.possibilities or ())
        said = f" (did you mean {' or '.join(guess)}?)" if guess else ""
        return f"{where.removeprefix(PROG + ' ') or PROG} has no option {err.option_name}{said}"
    if isinstance(err, MissingParameter):
        return f"{where.removeprefix(PROG + ' ') or PROG} needs {_hint(err)}"
    if isinstance(err, BadParameter):
        return _bad_value(err)
    if isinstance(err, BadOptionUsage) and "requires an argument" in err.message:
        return f"{err.option_name} needs a value"
    if isinstance(err, UsageError):
        command = _no_such_command(err, where.removeprefix(PROG + " ") or PROG)
        if command is not None:
            return command
        if err.message.startswith("Got unexpected extra argument"):
            extra = err.message.rpartition("(")[2].rstrip(")")  # "argument(s) (c d)"
            return f"{where.removeprefix(PROG + ' ') or PROG} takes no argument {extra!r}"
    text = " ".join(err.format_message().split()).rstrip(".")
    return text[:1].lower() + text[1:]


def usage_sentence(err: ClickException, argv: Sequence[str]) -> str | None:
    """The one sentence for `err`; None for a bare group's help, which shows itself."""
    if isinstance(err, NoArgsIsHelpError):
        return None
    where = _command_path(err, argv)
    what = _what(err, where)
    structural = not isinstance(err, BadParameter) or isinstance(err, MissingParameter)
    if isinstance(err, UsageError) and structural:  # the flags it has are in its help
        return f"{what}; see `{where} --help`."
    return f"{what}."
