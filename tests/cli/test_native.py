"""A native CLI (issue 36 part 4): `-h` everywhere, examples in every `--help` that parse,
`OPENAI_BASE_URL`/`OPENAI_API_KEY` behind `--url`/`--api-key`, `-v`/`-q` setting Python
logging, opt-in shell completion. Parsing only: no example reaches a server."""

from __future__ import annotations

import ast
import logging
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import typer.main
from typer.core import TyperCommand, TyperGroup

from infertriage.cli import main
from infertriage.cli.app import app, build_app
from infertriage.cli.commands import COMMANDS
from infertriage.cli.examples import EXAMPLES, epilog
from infertriage.cli.logging_setup import levels
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

_ENTRY = (
    "import sys; from infertriage.cli import main; sys.argv[0] = 'infertriage'; sys.exit(main())"
)


def _command_paths() -> list[tuple[str, ...]]:
    """Every command and subcommand as the words that name it: ("bench",), ("baseline", "save")."""
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    paths: list[tuple[str, ...]] = []
    for name, command in root.commands.items():
        paths.append((name,))
        if isinstance(command, TyperGroup):
            paths += [(name, sub) for sub in command.commands]
    return paths


PATHS = _command_paths()


def test_the_table_of_examples_covers_every_command_and_subcommand() -> None:
    assert len(PATHS) > len(COMMANDS)  # baseline's subcommands too
    assert set(EXAMPLES) == {" ".join(path) for path in PATHS}
    for name, examples in EXAMPLES.items():
        assert 2 <= len(examples) <= 4, name
        for invocation, what in examples:
            assert what.strip()
            words = [w for w in shlex.split(invocation) if "=" not in w or w.startswith("-")]
            assert words[: 1 + name.count(" ") + 1] == ["infertriage", *name.split()], invocation


@pytest.mark.parametrize("path", PATHS, ids=" ".join)
@pytest.mark.parametrize("help_flag", ["-h", "--help"])
def test_every_help_answers_with_its_examples(
    path: tuple[str, ...], help_flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*path, help_flag]) == 0
    shown = capsys.readouterr().out
    assert f"Usage: infertriage {' '.join(path)}" in shown
    assert "Examples:" in shown
    for invocation, _ in EXAMPLES[" ".join(path)]:
        assert invocation.split(" --")[0] in shown
    assert "<bool>" not in shown and "<float>" not in shown


def _environment_and_words(invocation: str) -> tuple[dict[str, str], list[str]]:
    words = shlex.split(invocation)
    env: dict[str, str] = {}
    while "=" in words[0] and not words[0].startswith("-"):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    assert words.pop(0) == "infertriage"
    return env, words


def _parse(words: list[str]) -> tuple[str, dict[str, object]]:
    """The command line parsed as the app would, every parser and callback run, and the
    command not invoked: (the command's name, its parameters)."""
    root = typer.main.get_command(build_app(next(w for w in words if not w.startswith("-"))))
    assert isinstance(root, TyperGroup)
    ctx = root.make_context("infertriage", list(words))
    rest = [*ctx._protected_args, *ctx.args]
    command: TyperCommand | TyperGroup = root
    names = []
    while isinstance(command, TyperGroup):
        name, *rest = rest
        found = command.get_command(ctx, name)
        assert found is not None, name
        command, names = found, [*names, name]
        ctx = command.make_context(name, rest, parent=ctx)
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
    assert rest == []
    return " ".join(names), ctx.params


EXAMPLE_CASES = [
    pytest.param(name, invocation, id=f"{name}: {invocation}")
    for name, examples in EXAMPLES.items()
    for invocation, _ in examples
]


@pytest.mark.parametrize(("name", "invocation"), EXAMPLE_CASES)
def test_every_example_parses(
    name: str, invocation: str, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.chdir(str(tmp_path))  # `--html prod.html`: its folder is there
    env, words = _environment_and_words(invocation)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    parsed_name, params = _parse(words)
    assert parsed_name == name or (name == "baseline" and parsed_name.startswith("baseline "))
    if "OPENAI_BASE_URL" in env:
        assert params["url"] == env["OPENAI_BASE_URL"]


# --- the environment ---------------------------------------------------------------------


def _options_by_flag() -> Iterator[tuple[str, str, object]]:
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    for name, command in root.commands.items():
        for param in command.params:
            for flag in getattr(param, "opts", ()):
                yield name, flag, param


def test_url_and_api_key_default_from_the_openai_variables_on_every_command() -> None:
    seen = {"--url": set(), "--api-key": set()}
    for name, flag, param in _options_by_flag():
        if flag in seen:
            seen[flag].add(name)
            expected = {"--url": "OPENAI_BASE_URL", "--api-key": "OPENAI_API_KEY"}[flag]
            if (name, flag) == ("compare", "--url"):  # A/B takes two: no variable holds them
                assert getattr(param, "envvar", None) is None
            else:
                assert getattr(param, "envvar", None) == expected, (name, flag)
    assert seen["--url"] >= {"bench", "diagnose", "validate", "compare"}
    assert seen["--api-key"] >= {"bench", "diagnose", "validate", "compare"}


@pytest.mark.parametrize("command", ["bench", "diagnose", "validate"])
def test_help_names_the_variables(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "240")  # one row per option: the bracket not cut
    assert main([command, "--help"]) == 0
    shown = capsys.readouterr().out
    assert "env var: OPENAI_BASE_URL" in shown
    assert "env var: OPENAI_API_KEY" in shown


def test_openai_base_url_is_the_url_and_a_given_url_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://10.0.0.5:8000/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    _, params = _parse(["bench", "--concurrency", "1"])
    assert params["url"] == "http://10.0.0.5:8000/v1"
    assert params["api_key"] == "sk-from-env"
    _, params = _parse(["bench", "--url", "http://127.0.0.1:9000", "--api-key", "sk-flag"])
    assert params["url"] == "http://127.0.0.1:9000"
    assert params["api_key"] == "sk-flag"
    _, params = _parse(["diagnose"])  # no --url: the variable's server, not the twin
    assert params["url"] == "http://10.0.0.5:8000/v1"
    _, params = _parse(["compare", "prod-v1", "runs/today"])  # runs, not an A/B of one URL
    assert params["url"] == []


def test_a_bad_openai_base_url_is_one_sentence(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "localhost-without-scheme")
    assert main(["bench", "--concurrency", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("infertriage: error: --url 'localhost-without-scheme'")
    assert len(err.strip().splitlines()) == 1


def test_without_the_variable_bench_still_needs_a_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert "OPENAI_BASE_URL" not in os.environ  # tests/conftest.py clears it
    assert main(["bench", "--concurrency", "1"]) == 2
    assert "--url" in capsys.readouterr().err


# --- verbosity ---------------------------------------------------------------------------


def test_levels_of_verbose_and_quiet() -> None:
    assert levels(0, False) == (logging.WARNING, logging.WARNING)
    assert levels(1, False) == (logging.INFO, logging.WARNING)
    assert levels(2, False) == (logging.DEBUG, logging.INFO)
    assert levels(5, False) == (logging.DEBUG, logging.DEBUG)
    assert levels(2, True) == (logging.ERROR, logging.ERROR)  # -q wins


_PLAN = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--concurrency", "16", "--json"]
_LOGS = (
    "import sys; from infertriage.cli import main; code = main({argv!r}); "
    "loaded = sorted(m for m in sys.modules if m.startswith(('infertriage.cli.', 'logging'))); "
    "import logging; "
    "logging.getLogger('infertriage.probe').info('an info line'); "
    "logging.getLogger('infertriage.probe').debug('a debug line'); "
    "logging.getLogger('infertriage.probe').warning('a warning line'); "
    "logging.getLogger('some.library').info('a library line'); "
    "print(loaded); print(code)"
)


def _run_with(argv: list[str]) -> tuple[str, set[str], int]:
    found = subprocess.run(
        [sys.executable, "-c", _LOGS.format(argv=argv)],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    *_, modules, code = found.stdout.strip().splitlines()
    return found.stderr, set(ast.literal_eval(modules)), int(code)


@pytest.mark.parametrize(
    ("root_flags", "shown", "hidden"),
    [
        ([], ["a warning line"], ["an info line", "a debug line", "a library line"]),
        (["-v"], ["a warning line", "an info line"], ["a debug line", "a library line"]),
        (["-vv"], ["an info line", "a debug line", "a library line"], []),
        (["--verbose", "--verbose"], ["a debug line"], []),
        (["-q"], [], ["a warning line", "an info line"]),
    ],
    ids=["default", "-v", "-vv", "--verbose --verbose", "-q"],
)
def test_verbose_and_quiet_set_the_log_level_on_stderr(
    root_flags: list[str], shown: list[str], hidden: list[str]
) -> None:
    err, modules, code = _run_with([*root_flags, *_PLAN])
    assert code == 0
    if root_flags:
        assert "logging" in modules  # configured only when asked for
    for line in shown:
        assert line in err
    for line in hidden:
        assert line not in err
    if root_flags:  # one standard format: time, level, logger, message
        for line in err.splitlines():
            assert " infertriage.probe: " in line or " some.library: " in line
    else:  # nothing configured: Python's own last-resort handler, warnings and up
        assert err.splitlines() == ["a warning line"]
    assert "infertriage.cli.bench" not in modules  # `-v plan` builds plan alone, as `plan`


@pytest.mark.parametrize("flag", ["-v", "-vv", "--verbose", "-q", "--quiet"])
def test_a_root_flag_after_the_command_says_where_it_goes(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "--model", "llama-3.1-8b", flag]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"infertriage: error: {flag[:2] if flag == '-vv' else flag} goes before")
    assert "infertriage -" in err and " plan " in err
    assert len(err.strip().splitlines()) == 1


# --- completion --------------------------------------------------------------------------


def test_completion_is_opt_in_and_completes_commands_and_flags() -> None:
    cli = [sys.executable, "-c", _ENTRY]
    # the script `--show-completion` prints, asked for by name: `--show-completion SHELL`
    # detects the calling shell instead (under make, sh: "Shell sh not supported")
    source = {**os.environ, "_INFERTRIAGE_COMPLETE": "source_bash"}
    shown = subprocess.run(
        cli, check=False, capture_output=True, text=True, timeout=120, env=source
    )
    assert shown.returncode == 0, (shown.stdout[-2000:], shown.stderr[-2000:])
    assert "_INFERTRIAGE_COMPLETE" in shown.stdout
    listed = subprocess.run(
        [*cli, "--help"], check=True, capture_output=True, text=True, timeout=120
    )
    assert "--install-completion" in listed.stdout and "--show-completion" in listed.stdout
    for words, cword, expected in (
        ("infertriage ben", "1", "bench"),
        ("infertriage bench --dur", "2", "--duration"),
        ("infertriage baseline s", "2", "save"),
    ):
        env = {**os.environ, "_INFERTRIAGE_COMPLETE": "complete_bash"}
        env |= {"COMP_WORDS": words, "COMP_CWORD": cword}
        done = subprocess.run(cli, check=True, capture_output=True, text=True, timeout=120, env=env)
        assert expected in done.stdout.split(), (words, done.stdout, done.stderr)


def test_the_epilog_lists_each_invocation_on_its_own_line() -> None:
    text = epilog("bench")
    lines = text.splitlines()
    assert lines[0] == "Examples:"
    for invocation, what in EXAMPLES["bench"]:
        assert f"  {invocation}" in lines
        assert f"  # {what}" in lines


OFFLINE_CASES = [
    pytest.param(invocation, id=invocation)
    for name in ("plan", "monitor-config")
    for invocation, _ in EXAMPLES[name]
    if "--from-run" not in invocation
]


@pytest.mark.parametrize("invocation", OFFLINE_CASES)
def test_the_offline_examples_run(
    invocation: str, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    """plan and monitor-config need no server and no run: their examples run as written."""
    monkeypatch.chdir(str(tmp_path))
    _, words = _environment_and_words(invocation)
    assert main(words) == 0


# --- OPENAI_BASE_URL gives way to what the command line asks -----------------------------


def test_the_variable_gives_way_to_a_recorded_run(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    shared_fixture: Callable[[str], Path],
) -> None:
    """A shell with OPENAI_BASE_URL set can still re-diagnose what was recorded: the
    variable is for measuring, and --from-run / --metrics-file measure nothing."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    scrape = shared_fixture("metrics/vllm.txt")
    assert main(["diagnose", "--metrics-file", str(scrape), "--json"]) == 0
    assert "OPENAI_BASE_URL" not in capsys.readouterr().err


def test_url_and_scenario_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("diagnose", "validate"):
        args = [command, "--url", "http://127.0.0.1:9", "--scenario", "kv-pressure"]
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert "--scenario" in err and "--url" in err and "\n" not in err


def test_a_url_from_the_variable_is_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without it the twin would have run: the server the variable names is said on stderr
    (here a closed port: the run ends at the connection, exit 2)."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert main(["diagnose", "--duration", "5s", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "OPENAI_BASE_URL" in err and "127.0.0.1:9" in err


def test_verbose_bench_logs_the_load_as_it_goes(tmp_path: Path) -> None:
    """`-v` shows infertriage's own progress: each worker's load, begun and ended, on stderr
    in the standard format; stdout keeps the result alone."""
    fast = Behavior(ttft_s=0.002, itl_s=0.001)
    with serve_in_thread(ServerConfig(behavior=fast)) as (url, _):
        args = ["-v", "bench", "--url", url, "--concurrency", "2", "--num-requests", "6"]
        done = subprocess.run(
            [sys.executable, "-c", _ENTRY, *args, "--out", str(tmp_path / "run"), "--json"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert " INFO infertriage.loadgen.runner: worker 0: closed loop, 2 users" in done.stderr
    assert " INFO infertriage.loadgen.runner: worker 0: 6 records in " in done.stderr
    assert done.stdout.lstrip().startswith("{")
