"""cli, level 6: the command-line framework's usage errors as one sentence of ours.

Takes an error of the click that typer builds on (an unknown option or command,
a missing option or argument, a value of the wrong type, an option without its
value) and gives the one line `main` prints on stderr before exit 2, in the
wording of our own errors: what is wrong, naming the flag and the value, then
where the command's flags are listed, e.g. "plan has no option --tpp (did you mean
--tp?); see `infertriage plan --help`."
A bare group (`infertriage`, `infertriage baseline`) still shows its help.

Typer exports one of click's exceptions (`typer.BadParameter`) and, since 0.26, keeps
click itself in a private module (`typer._click`); older releases use the `click`
package. The other classes are reached from the exported one by their names
(`CLICK_ERRORS`), so no private module is imported and both kinds of typer work.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from infertriage.cli.commands import is_root_flag

__all__ = ["CLICK_ERRORS", "PROG", "ClickException", "usage_sentence"]


def _click_errors() -> dict[str, type[Exception]]:
    """Click's exception classes by name: `ClickException` (a base of the one typer exports)
    and every class below it, the nearest first (a later class of the same name, another
    library's, does not replace click's)."""
    root = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    found: dict[str, type[Exception]] = {}
    todo: list[type[Exception]] = [root]
    while todo:
        cls = todo.pop(0)
        found.setdefault(cls.__name__, cls)
        todo.extend(cls.__subclasses__())
    return found


CLICK_ERRORS = _click_errors()
ClickException = CLICK_ERRORS["ClickException"]
BadParameter = typer.BadParameter
_NAMES = ("UsageError", "NoSuchOption", "MissingParameter", "BadOptionUsage", "NoArgsIsHelpError")
assert all(name in CLICK_ERRORS for name in _NAMES), sorted(CLICK_ERRORS)


def _is(err: Exception, name: str) -> bool:
    return isinstance(err, CLICK_ERRORS[name])


def _text(err: Any, attr: str) -> str:
    return str(getattr(err, attr, "") or "")


PROG = "infertriage"
# pydantic's error types (typer converts with it) → our wording
_TYPE_WORDS = {
    "int_parsing": "is not a whole number",
    "int_from_float": "is not a whole number",
    "float_parsing": "is not a number",
    "bool_parsing": "is not true or false",
}
# the same errors as older typers word them (click's own types: "'x' is not a valid integer.")
_CLICK_TYPE_WORDS = {
    "is not a valid integer": "is not a whole number",
    "is not a valid float": "is not a number",
    "is not a valid boolean": "is not true or false",
}


def _command_path(err: Exception, argv: Sequence[str]) -> str:
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


def _hint(err: Any) -> str:
    param = getattr(err, "param", None)
    if param is not None and param.opts:
        opts = param.opts
        return str(opts[0] if opts[0].startswith("-") else opts[0].upper())
    return _text(err, "param_hint") or "a value"


def _bad_value(err: Any) -> str:
    cause = err.__cause__
    errors = getattr(cause, "errors", None)
    found = errors()[0] if callable(errors) and errors() else None
    if found is not None and found.get("type") in _TYPE_WORDS:
        return f"{_hint(err)} {found.get('input')!r} {_TYPE_WORDS[found['type']]}"
    text = _text(err, "message").rstrip(".")
    for said, words in _CLICK_TYPE_WORDS.items():
        if text.endswith(said):
            return f"{_hint(err)} {text.removesuffix(said).rstrip()} {words}"
    if found is not None and "input" in found:
        return f"{_hint(err)} {found['input']!r}: {text[:1].lower()}{text[1:]}"
    # our parsers' sentences start with the value: "--duration 'x' is not a duration …"
    return f"{_hint(err)} {text}" if text.startswith("'") else f"{_hint(err)}: {text}"


def _no_such_command(err: Exception, where: str) -> str | None:
    ctx = getattr(err, "ctx", None)
    if ctx is None or not isinstance(ctx.command, TyperGroup):
        return None
    message = _text(err, "message")
    if "No such command" not in message:
        return None
    name = message.split("'")[1] if message.count("'") >= 2 else ""
    close = difflib.get_close_matches(name, ctx.command.list_commands(ctx), n=1)
    guess = f" (did you mean {close[0]}?)" if close else ""
    return f"{where} has no command {name!r}{guess}"


def _what(err: Exception, where: str) -> str:
    command = where.removeprefix(PROG + " ") or PROG
    message = _text(err, "message")
    if _is(err, "NoSuchOption"):
        option = _text(err, "option_name")
        if is_root_flag(option) and command != PROG:  # `bench … -v`
            return f"{option} goes before the command: {PROG} {option} {command} …"
        guess = sorted(getattr(err, "possibilities", None) or ())
        said = f" (did you mean {' or '.join(guess)}?)" if guess else ""
        return f"{command} has no option {option}{said}"
    if _is(err, "MissingParameter"):
        return f"{command} needs {_hint(err)}"
    if isinstance(err, BadParameter):
        return _bad_value(err)
    if _is(err, "BadOptionUsage") and "requires an argument" in message:
        return f"{_text(err, 'option_name')} needs a value"
    if _is(err, "UsageError"):
        found = _no_such_command(err, command)
        if found is not None:
            return found
        if message.startswith("Got unexpected extra argument"):
            extra = message.rpartition("(")[2].rstrip(")")  # "argument(s) (c d)"
            return f"{command} takes no argument {extra!r}"
    format_message = getattr(err, "format_message", None)
    said = format_message() if callable(format_message) else str(err)
    text = " ".join(str(said).split()).rstrip(".")
    return text[:1].lower() + text[1:]


def usage_sentence(err: Exception, argv: Sequence[str]) -> str | None:
    """The one sentence for `err` (one of `CLICK_ERRORS`); None for a bare group's help,
    which shows itself."""
    if _is(err, "NoArgsIsHelpError"):
        return None
    where = _command_path(err, argv)
    what = _what(err, where)
    structural = not isinstance(err, BadParameter) or _is(err, "MissingParameter")
    if _is(err, "UsageError") and structural:  # the flags it has are in its help
        return f"{what}; see `{where} --help`."
    return f"{what}."
