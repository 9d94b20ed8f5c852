"""Each flag is declared once, and each field of a command's spec has a flag or a reason.

- The source: every flag string of `src/infertriage/cli` is in exactly one
  `typer.Option(` call (a flag shared by commands is one `cli.flags` function),
  but for the names listed in `MEANINGS`, which mean different things to different
  commands: each of those is declared once per meaning.
- The app: every option of every command with the same flag string has the same
  help, environment variable, callback and `--no-` form (they come from one
  declaration), but for `MEANINGS`, at most one variant per meaning.
- The specs: every field of each command's spec (its `ClientSpec` too) names a flag
  the command takes (`--` and the field's name, `_s` dropped, or the flag the field
  names itself), or an argument of that name, or is in `NO_FLAG` with its reason.
- The help: every option and argument says what it is; a flag shows no type
  (`--force`, not `--force <bool>`), an option the kind of value it takes in capitals
  (`DURATION`, `RATE`, `PATH`: typer's `<float>` never), every time option `DURATION`.
- The ranges: every int or float option is checked once — its spec field carries the
  range (`Field(gt=…, ge=…, le=…)`), or, with no spec field to hold it, a callback.
"""

from __future__ import annotations

import ast
import inspect
import typing
from collections import defaultdict
from pathlib import Path
from typing import Any

import annotated_types
import pytest
import typer
from pydantic import BaseModel
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from infertriage.api.specs import (
    BenchSpec,
    ClientSpec,
    CompareABSpec,
    CompareRunsSpec,
    DiagnoseSpec,
    FleetSpec,
    LogsSpec,
    MonitorConfigSpec,
    PlanSpec,
    ReportSpec,
    SimulateSpec,
    TopologySpec,
    TwinSpec,
    ValidateSpec,
)
from infertriage.cli.app import app
from infertriage.cli.options import milliseconds, seconds

CLI = Path(__file__).resolve().parents[2] / "src" / "infertriage" / "cli"

# A flag name that means different things to different commands: one declaration each.
MEANINGS: dict[str, tuple[str, ...]] = {
    "--url": (
        "the server (bench, diagnose, validate; OPENAI_BASE_URL when not given)",
        "compare A/B: the two servers, A then B (no environment variable: it holds one)",
    ),
    "--model": (
        "the served model's name (bench, diagnose, validate, compare)",
        "a catalog preset or config.json (plan, topology)",
    ),
    "--concurrency": ("closed-loop users of a load", "the batch a plan serves"),
    "--max-model-len": (
        "the server's context, where it does not say it",
        "the longest request a plan serves",
    ),
    "--duration": ("the load's length", "metrics: how long to scrape (or the fleet's window)"),
    "--force": ("replace what --out holds", "baseline save: replace a baseline of that name"),
    "--out": ("a run directory", "monitor-config: the required folder its files go to"),
    "--from-run": (
        "diagnose: the run to re-diagnose",
        "plan: the run whose lengths it takes",
        "monitor-config: the run whose measurements set the thresholds",
    ),
    "--log": (
        "diagnose: the server's logs, read after the load",
        "trace: one TORCH_LOGS=recompiles log",
    ),
    "--engine": (
        "monitor-config: whose metric names the rules read (every engine)",
        "logs: whose log format it is (vllm or sglang; detected when not given)",
    ),
    "--arrival": (
        "bench: the arrival process (ramp too)",
        "simulate: an alias of --arrivals (no ramp on a virtual clock)",
    ),
}

# What each command builds from its options.
SPECS: dict[str, tuple[type[BaseModel], ...]] = {
    "bench": (BenchSpec, ClientSpec),
    "diagnose": (DiagnoseSpec, ClientSpec),
    "validate": (ValidateSpec, ClientSpec),
    "compare": (CompareABSpec, CompareRunsSpec, ClientSpec),
    "plan": (PlanSpec,),
    "simulate": (SimulateSpec,),
    "twin": (TwinSpec,),
    "monitor-config": (MonitorConfigSpec,),
    "logs": (LogsSpec,),
    "topology": (TopologySpec,),
    "report": (ReportSpec,),
    "metrics": (FleetSpec,),
}

_NOT_SENT_BY_COMPARE = "compare's A/B sends the workload's own prompts: no tokenizer, no header"
# (command, "Spec.field"): why the field has no flag of its own.
NO_FLAG: dict[tuple[str, str], str] = {
    ("bench", "BenchSpec.client"): "the ClientSpec: its fields are checked one by one",
    ("bench", "BenchSpec.thresholds"): "--slo, loaded by the command (`load_thresholds`)",
    ("bench", "BenchSpec.drain_settle_share"): "set by diagnose's measured level, not a flag",
    ("bench", "BenchSpec.labels"): "set by validate (phase) and compare (arm, block)",
    ("diagnose", "DiagnoseSpec.client"): "the ClientSpec: its fields are checked one by one",
    ("diagnose", "DiagnoseSpec.deployment"): "--model-config, --gpu and --tp, as one mapping",
    ("diagnose", "ClientSpec.headers"): "diagnose sends no extra header (bench --header does)",
    ("validate", "ValidateSpec.client"): "the ClientSpec: its fields are checked one by one",
    ("validate", "ClientSpec.headers"): "validate sends no extra header (bench --header does)",
    ("compare", "CompareABSpec.client"): "the ClientSpec: its fields are checked one by one",
    ("compare", "ClientSpec.headers"): _NOT_SENT_BY_COMPARE,
    ("compare", "ClientSpec.tokenizer"): _NOT_SENT_BY_COMPARE,
    ("compare", "ClientSpec.max_model_len"): _NOT_SENT_BY_COMPARE,
    ("monitor-config", "MonitorConfigSpec.thresholds"): "--slo, loaded by the command",
    ("metrics", "FleetSpec.end_unix_s"): "now; diagnose's fleet sets the run's end",
    ("metrics", "FleetSpec.step_s"): "chosen from the window",
    ("metrics", "FleetSpec.rate_window_s"): "chosen from the step",
    ("metrics", "FleetSpec.imbalance_ratio"): "the documented 1.5x, not a knob",
}


def _commands() -> dict[str, TyperCommand]:
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    found: dict[str, TyperCommand] = {}
    for name, command in root.commands.items():
        inner = command.commands if isinstance(command, TyperGroup) else {"": command}
        for sub, found_command in inner.items():
            assert isinstance(found_command, TyperCommand)
            found[f"{name} {sub}".strip()] = found_command
    return found


def _options(command: TyperCommand) -> list[TyperOption]:
    return [p for p in command.params if isinstance(p, TyperOption)]


def _declared_flags() -> dict[str, list[str]]:
    """Each flag string of a `typer.Option(` call in src/infertriage/cli: where it is."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "Option"
            ):
                continue
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    for flag in arg.value.split("/"):
                        if flag.startswith("-"):
                            where[flag].append(f"{path.name}:{node.lineno}")
    return where


def test_each_flag_is_declared_once_in_the_source() -> None:
    declared = _declared_flags()
    assert len(declared) > 100
    twice = {
        flag: places
        for flag, places in declared.items()
        if len(places) != len(MEANINGS.get(flag, ("one",)))
    }
    assert twice == {}


def _variant(option: TyperOption) -> tuple[Any, ...]:
    callback = getattr(option.callback, "__wrapped__", option.callback)
    return (option.help, option.envvar, tuple(option.secondary_opts), repr(callback))


def test_commands_share_a_flag_from_one_declaration() -> None:
    variants: dict[str, set[tuple[Any, ...]]] = defaultdict(set)
    users: dict[str, set[str]] = defaultdict(set)
    for name, command in _commands().items():
        for option in _options(command):
            for flag in option.opts:
                variants[flag].add(_variant(option))
                users[flag].add(name)
    shared = [flag for flag, names in users.items() if len(names) > 1]
    assert len(shared) >= 35
    apart = {
        flag: found
        for flag, found in variants.items()
        if len(found) > len(MEANINGS.get(flag, ("one",)))
    }
    assert apart == {}
    assert set(MEANINGS) <= set(shared)  # a reason for a name no two commands share is stale


def _flag_of(spec: type[BaseModel], field: str) -> str:
    extra = spec.model_fields[field].json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("flag"), str):
        return str(extra["flag"])
    return "--" + field.removesuffix("_s").replace("_", "-")


def _names(command: TyperCommand) -> set[str]:
    flags = {
        flag for option in _options(command) for flag in [*option.opts, *option.secondary_opts]
    }
    arguments = {f"arg:{p.name}" for p in command.params if isinstance(p, TyperArgument)}
    return flags | arguments


def test_every_spec_field_has_a_flag_or_a_reason() -> None:
    commands = _commands()
    missing, stale = [], []
    for name, specs in SPECS.items():
        taken = _names(commands[name])
        for spec in specs:
            for field in spec.model_fields:
                key = (name, f"{spec.__name__}.{field}")
                has = _flag_of(spec, field) in taken or f"arg:{field}" in taken
                if not has and key not in NO_FLAG:
                    missing.append(key)
                if has and key in NO_FLAG:
                    stale.append(key)
    assert missing == []
    assert stale == []
    assert all(reason.strip() for reason in NO_FLAG.values())
    assert {name for name, _ in NO_FLAG} <= set(SPECS)


def _spec_field(command: str, flag: str) -> Any:
    for spec in SPECS.get(command, ()):
        for field, info in spec.model_fields.items():
            if _flag_of(spec, field) == flag:
                return info
    return None


# An option whose range its spec checks in a validator rather than a bound on a field.
RANGED_BY_VALIDATOR = {
    ("twin", "--port"): "TwinSpec._tcp_port: 0 (any free port) to 65535, in the port's words",
    ("diagnose", "--tp"): "DiagnoseSpec._tensor_parallel: --tp is the deployment's mapping",
    ("diagnose", "--pp"): "DiagnoseSpec._tensor_parallel: --pp is the deployment's mapping",
    ("diagnose", "--ep"): "DiagnoseSpec._tensor_parallel: --ep is the deployment's mapping",
}


def _ranged(info: Any) -> bool:
    """A field whose value (or each item's) carries a bound: gt, ge, lt or le."""
    bounds = (annotated_types.Gt, annotated_types.Ge, annotated_types.Lt, annotated_types.Le)
    if any(isinstance(m, bounds) for m in info.metadata):
        return True
    for arg in typing.get_args(info.annotation):
        for inner in typing.get_args(arg):
            if any(isinstance(m, bounds) for m in getattr(inner, "__metadata__", ())):
                return True
    return False


def test_every_numeric_option_is_checked_once() -> None:
    """An int or float option: its range on its spec's field, or (no such field) a callback;
    never both."""
    unchecked, twice = [], []
    numeric = 0
    for command in app.registered_commands:
        assert command.callback is not None and command.name is not None
        hints = typing.get_type_hints(command.callback)
        for param, default in inspect.signature(command.callback).parameters.items():
            kinds = {hints[param], *typing.get_args(hints[param])}
            if not kinds & {int, float} or not hasattr(default.default, "param_decls"):
                continue
            numeric += 1
            flag = next(d for d in default.default.param_decls if d.startswith("--"))
            info = _spec_field(command.name, flag)
            ranged = (info is not None and _ranged(info)) or (
                (command.name, flag) in RANGED_BY_VALIDATOR
            )
            callback = default.default.callback is not None
            if not ranged and not callback:
                unchecked.append((command.name, flag))
            if ranged and callback:
                twice.append((command.name, flag))
    assert numeric > 40
    assert unchecked == []
    assert twice == []


@pytest.mark.parametrize("flag", sorted(MEANINGS))
def test_each_meaning_has_its_reason(flag: str) -> None:
    assert len(MEANINGS[flag]) >= 2 and all(m.strip() for m in MEANINGS[flag])


# An option whose default is not its field's, on purpose.
DEFAULT_APART = {
    ("validate", "--skip-functional"): "the flag is the field's negation (functional=True)",
    ("validate", "--duration"): "not given: the spec's 60 s, or 600 s with --standard mlperf",
}


def _plain(value: Any) -> Any:
    """A default as the spec would hold it: a list as a tuple, a parsed workload as its text."""
    if isinstance(value, list | tuple):
        return tuple(_plain(item) for item in value)
    return getattr(value, "text", value)


def test_every_flag_starts_from_its_spec_fields_default() -> None:
    """A default is written twice (the option, the field): they must agree, so `bench` and
    `api.run_bench(BenchSpec(url=…))` run the same load."""
    apart, compared = [], 0
    for name, command in _commands().items():
        if name not in SPECS:
            continue
        ctx = command.make_context(name, [], resilient_parsing=True)
        for option in _options(command):
            info = _spec_field(name, option.opts[0])
            if info is None or info.is_required() or option.required:
                continue
            default = ctx.params[str(option.name)]  # parsed, as a command line without it
            field = info.get_default(call_default_factory=True)
            compared += 1
            if _plain(default) != _plain(field) and (name, option.opts[0]) not in DEFAULT_APART:
                apart.append((name, option.opts[0], default, field))
    assert compared > 100
    assert apart == []


def _parser(param: TyperOption | TyperArgument) -> Any:
    return param.type_descriptor.parameter_info.parser


def test_every_option_and_argument_has_help() -> None:
    bare = [
        (name, param.name)
        for name, command in _commands().items()
        for param in command.params
        if not (param.help or "").strip()
    ]
    assert bare == []


def test_a_flag_shows_no_type_and_an_option_its_metavar() -> None:
    """`--force` is a flag, not `--force <bool>`; an option that takes a value says what in
    capitals (`DURATION`, `RATE`, `PATH`), not typer's `<float>`; a time is `DURATION`."""
    if not hasattr(TyperOption, "display_type_rich"):
        pytest.skip("typer before 0.29 has no type column (a flag shows bare there)")
    wrong: list[tuple[str, str, str | None]] = []
    durations = 0
    for name, command in _commands().items():
        ctx = command.make_context(name, [], resilient_parsing=True)
        for option in _options(command):
            shown = option.display_type_rich(ctx)
            flag = option.opts[0]
            if option.is_flag:
                if shown is not None:
                    wrong.append((name, flag, shown))
                continue
            if option.type_descriptor.is_choice:  # monitor-config --engine: its choices
                assert shown is not None and "|" in shown
                continue
            # capitals (a kind of value), or the literal values it takes (chat|completions)
            if shown is None or "<" in shown or not (shown.isupper() or shown.islower()):
                wrong.append((name, flag, shown))
            if _parser(option) in (seconds, milliseconds):
                durations += 1
                if shown != "DURATION":
                    wrong.append((name, flag, shown))
        help_option = command.get_help_option(ctx)
        assert help_option is not None and help_option.display_type_rich(ctx) is None
    assert durations > 20
    assert wrong == []


def test_each_metavar_names_one_kind_of_value_per_flag() -> None:
    """One declaration per flag: a flag's metavar is the same wherever it is taken (but for
    the names whose meanings differ)."""
    shown: dict[str, set[str | None]] = defaultdict(set)
    for command in _commands().values():
        for option in _options(command):
            shown[option.opts[0]].add(option.metavar)
    apart = {
        flag: found for flag, found in shown.items() if len(found) > len(MEANINGS.get(flag, "1"))
    }
    assert apart == {}
