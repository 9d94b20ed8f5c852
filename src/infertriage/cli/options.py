"""cli, level 6: the parsers and callbacks of the command line, one per unit.

Each turns a value the user typed into what the spec takes, or refuses it in one
sentence naming the flag (a `UserError`, exit 2); ranges are not checked here but
once, on the command's spec (`schemas.spec.CommandSpec`):

- durations: `seconds`, the parser of every time option, through the one
  `schemas.parse_duration` (`30` is seconds, `30s`, `2m`, `500ms`), so every
  command takes the same units (`milliseconds` is the same parser where a
  bare number is a per-token time in ms);
- `http_url`: an http:// or https:// URL with a host (and a port that can be);
  one refused is quoted without its `user:password@`;
- names and specs: `gpu_name`, `model_name` (a preset or a config.json),
  `scenario_name` (a packaged twin scenario or a YAML file, read now),
  `workload_spec` (parsed once into a `WorkloadSpec`) and `arrival_spec`, each
  refused as `plan`, the twin and `bench` refuse them, with the known names;
- files: `workload_spec`'s file and `nonempty_files` (read after the load)
  must be there, be files and not be empty; `new_file` (written after it)
  needs its folder now;
- `positive`: `metrics --duration`'s range, the one number with no spec to hold it.

A callback runs while the command line is parsed, and the command makes its spec
before any work, so a refused value starts no server, sends no request and creates
no run directory.
"""

from __future__ import annotations

import codecs
import math
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit

import typer

from infertriage.net import strip_userinfo
from infertriage.schemas import UserError, parse_duration
from infertriage.schemas.inputs import why_missing

if TYPE_CHECKING:
    from infertriage.workload import WorkloadSpec

__all__ = [
    "arrival_spec",
    "gpu_name",
    "http_url",
    "milliseconds",
    "model_name",
    "new_file",
    "nonempty_files",
    "positive",
    "scenario_name",
    "seconds",
    "workload_spec",
]

_TEXT_PROBE_BYTES = 64 * 1024
N = TypeVar("N", int, float)
U = TypeVar("U", str, list[str])


def _flag(param: typer.CallbackParam) -> str:
    return param.opts[0] if param.opts else str(param.name)


def _shown(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def positive(param: typer.CallbackParam, value: N | None) -> N | None:
    """A time with no spec to check it (`metrics --duration`): finite and above 0."""
    if value is None or (math.isfinite(value) and value > 0):
        return value
    if isinstance(value, int):
        raise UserError(f"{_flag(param)} must be at least 1, not {value}.")
    raise UserError(f"{_flag(param)} must be a positive number, not {_shown(value)}.")


def seconds(text: str) -> float:
    """The parser of every time option: `30` (seconds), `30s`, `2m`, `500ms`, `1.5h`."""
    try:
        return parse_duration(text)
    except UserError as err:
        # click names the flag: the sentence becomes "--duration 'x' is not a duration …"
        raise typer.BadParameter(str(err)) from None


def milliseconds(text: str) -> float:
    """`seconds` for a per-token time, where a bare number is milliseconds: `21`, `21ms`."""
    try:
        return parse_duration(text, "ms")
    except UserError as err:
        raise typer.BadParameter(str(err)) from None


def _url_problem(url: str) -> str | None:
    try:
        parts = urlsplit(url.strip())
        _ = parts.port  # a port out of range or not a number raises ValueError
    except ValueError as err:
        return f"is not a URL ({err})"
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        return "is not an http:// or https:// URL"
    return None


def http_url(param: typer.CallbackParam, value: U | None) -> U | None:
    """A server's address: http:// or https://, a host, and a port that can be (`--url`…)."""
    for url in [value] if isinstance(value, str) else value or []:
        problem = _url_problem(url)
        if problem is not None:
            raise UserError(f"{_flag(param)} {strip_userinfo(url)!r} {problem}.")
    return value


def new_file(param: typer.CallbackParam, value: Path | None) -> Path | None:
    """A file written after the work (`--markdown`): its folder must exist now, not later."""
    if value is None:
        return value
    if value.is_dir():
        raise UserError(f"{_flag(param)} {value} is a folder, not a file.")
    if not value.parent.is_dir():
        raise UserError(f"{_flag(param)} {value}: the folder {value.parent} does not exist.")
    return value


def folder(param: typer.CallbackParam, value: Path | None) -> Path | None:
    """A folder a command reads, or makes when absent (`--store`): a file there is no folder."""
    if value is not None and value.exists() and not value.is_dir():
        raise UserError(f"{_flag(param)} {value} is a file, not a folder.")
    return value


def arrival_spec(value: str) -> str:
    """`--arrival`: poisson, constant, gamma:B (B above 0) or ramp:R0 (R0 of 0 or more)."""
    from infertriage.workload import parse_arrivals  # noqa: PLC0415  # numpy: only when given

    parse_arrivals(value, 1.0)
    return value


def _check_text_file(path: Path, flag: str) -> None:
    """A file a command reads later (after the server is reached): there, text, not empty."""
    if not path.exists():
        raise UserError(f"{flag} {path} {why_missing(path)}.")
    if not path.is_file():
        raise UserError(f"{flag} {path} is not a file.")
    try:
        with path.open("rb") as stream:
            head = stream.read(_TEXT_PROBE_BYTES)
    except OSError as err:
        raise UserError(f"{flag} {path} cannot be read ({err.strerror}).") from err
    if not head.strip():
        raise UserError(f"{flag} {path} is empty.")
    try:  # a multi-byte character cut at the probe's end is fine: final=False
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        raise UserError(f"{flag} {path} is not a text file (JSON or JSON lines).") from None
    if b"\x00" in head:
        raise UserError(f"{flag} {path} is not a text file (JSON or JSON lines).")


def nonempty_files(param: typer.CallbackParam, value: list[Path]) -> list[Path]:
    """Files read after the load (`--trace`, `--log`): there, files, not empty."""
    for path in value:
        if not path.exists():
            raise UserError(f"{_flag(param)} {path} {why_missing(path)}.")
        if not path.is_file():
            raise UserError(f"{_flag(param)} {path} is not a file.")
        if path.stat().st_size == 0:
            raise UserError(f"{_flag(param)} {path} is empty.")
    return value


def workload_spec(text: str) -> WorkloadSpec:
    """`--workload`'s parser: a known kind with its options, parsed once; a file it names is
    there, text, not empty, and one request of any other kind is built (every option's
    value checked)."""
    from infertriage.workload import make_specs, parse_workload  # noqa: PLC0415  # numpy

    spec = parse_workload(text)
    if spec.path is not None:
        _check_text_file(spec.path, "--workload")
    else:
        make_specs(spec, 1)
    return spec


def gpu_name(value: str | None) -> str | None:
    """A GPU of the catalogue (as `plan --gpu` takes it); the known ones listed when not."""
    if value is not None:
        from infertriage.plan import get_gpu  # noqa: PLC0415  # the catalogue: only when given

        get_gpu(value)
    return value


def model_name(value: str | None) -> str | None:
    """A model preset or a config.json (as `plan --model` takes it); the presets when not."""
    if value is not None:
        from infertriage.plan import load_model  # noqa: PLC0415  # the presets: only when given

        load_model(value)
    return value


def scenario_name(value: str) -> str:
    """A packaged twin scenario or a scenario YAML file, read and checked now."""
    from infertriage.twin import load_scenario  # noqa: PLC0415  # the twin: only when given

    load_scenario(value)
    return value
