"""The front door: `--version` and `--help` answer without loading the application, and
list the commands the application has."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
import typer.main

from infertriage import __version__
from infertriage.cli import main
from infertriage.cli.app import app
from infertriage.cli.commands import COMMANDS, top_help
from infertriage.cli.usage import CLICK_ERRORS, ClickException

_LOADED = (
    "import sys; from infertriage.cli import main; main({argv!r}); "
    "print(sorted(m for m in sys.modules if m.startswith('infertriage')))"
)


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["-h"]])
def test_the_front_door_imports_nothing_of_the_application(argv: list[str]) -> None:
    found = subprocess.run(
        [sys.executable, "-c", _LOADED.format(argv=argv)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    *printed, loaded = found.stdout.strip().splitlines()
    assert set(ast.literal_eval(loaded)) <= {
        "infertriage",
        "infertriage.cli",
        "infertriage.cli.commands",
    }
    assert "typer" not in found.stdout
    if argv == ["--version"]:
        assert printed == [f"infertriage {__version__}"]
    else:
        assert printed[0].startswith("Usage: infertriage [OPTIONS] COMMAND")


def test_the_help_lists_each_command_the_app_has_with_its_line() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    ctx = group.make_context("infertriage", [], resilient_parsing=True)
    listed = {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}
    assert [name for name, _ in COMMANDS] == list(listed)
    for name, line in COMMANDS:
        command = listed[name]
        assert command is not None and command.help == line, name
        assert name in top_help() and line in top_help()


def test_version_and_help_through_main(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"infertriage {__version__}\n"
    assert main(["plan", "-h"]) == 0  # a command's help is typer's, with its flags
    assert "--max-model-len" in capsys.readouterr().out


def test_clicks_errors_are_found_from_the_one_typer_exports() -> None:
    assert issubclass(typer.BadParameter, ClickException)
    for name in ("UsageError", "NoSuchOption", "MissingParameter", "BadOptionUsage"):
        assert issubclass(CLICK_ERRORS[name], ClickException), name
    assert issubclass(CLICK_ERRORS["NoSuchOption"], CLICK_ERRORS["UsageError"])
