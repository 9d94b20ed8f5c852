"""Start-up (issue 35): a command imports its own modules and no other command's.

`plan` and `metrics FILE` answer without numpy, aiohttp, the load generator or the
twin, and without what only another branch needs (PyYAML, psutil, asyncio, the whole
prometheus-client, the sections a plan sizes only on request); `bench --help` loads
bench and no other command; the package re-exports that load on first use
(`schemas.lazy`) stay importable by name. Module sets only, never times
(benchmarks/cli_startup.py times them).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

_DUMP = Path(__file__).parents[1] / "data" / "metrics_dumps" / "vllm_dp2_balanced.txt"
_LOADED = (
    "import sys; from infertriage.cli import main; code = main({argv!r}); "
    "print(sorted(sys.modules)); print(code)"
)
# what only the load, the twin's engine, the trace reader or the diagnosis need
_LENS = ["--concurrency", "16", "--input-len", "4000", "--output-len", "500"]
_HEAVY = ("numpy", "aiohttp", "scipy", "infertriage.loadgen", "infertriage.twin.engine")
# what a plain `plan` or a metrics file never needs: a YAML file (--slo, --traffic), the
# second Ctrl-C (psutil), a URL (asyncio), the client's HTTP server and collectors
_UNNEEDED = ("yaml", "psutil", "asyncio", "gzip", "http.server", "prometheus_client")
# what only an option of `plan` sizes: --nvidia-smi-topo / --nccl-tests, --num-gpus,
# --rate, --offload-gb, --traffic
_PLAN_OPTIONS = (
    "infertriage.api.topology",
    "infertriage.plan.topology",
    "infertriage.plan.parallel_choice",
    "infertriage.plan.disagg",
    "infertriage.plan.pdpools",
    "infertriage.plan.offload",
    "infertriage.plan.traffic",
)
_OTHER_COMMANDS = (
    "infertriage.cli.diagnose",
    "infertriage.cli.bench",
    "infertriage.cli.trace",
    "infertriage.cli.compare",
    "infertriage.cli.validate",
    "infertriage.api.diagnose",
    "infertriage.api.bench",
)


def _loaded(argv: list[str]) -> tuple[set[str], int]:
    found = subprocess.run(
        [sys.executable, "-c", _LOADED.format(argv=argv)],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    *_, modules, code = found.stdout.strip().splitlines()
    return set(ast.literal_eval(modules)), int(code)


def _under(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m.startswith(prefixes))


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--concurrency", "16"],
        ["metrics", str(_DUMP)],
        ["metrics", str(_DUMP), "--json"],
    ],
    ids=["plan", "metrics-file", "metrics-file-json"],
)
def test_plan_and_metrics_file_start_without_the_heavy_modules(argv: list[str]) -> None:
    modules, code = _loaded(argv)
    assert code == 0
    assert _under(modules, _HEAVY) == []
    assert _under(modules, _OTHER_COMMANDS) == []
    assert _under(modules, _UNNEEDED) == []


def test_a_plain_plan_loads_no_optional_section() -> None:
    modules, code = _loaded(["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", *_LENS])
    assert code == 0
    assert _under(modules, _PLAN_OPTIONS) == []


@pytest.mark.parametrize(
    ("option", "loaded"),
    [
        (["--rate", "5"], "infertriage.plan.disagg"),
        (["--num-gpus", "4"], "infertriage.plan.parallel_choice"),
        (["--offload-gb", "64", "--prefix-reuse", "0.5"], "infertriage.plan.offload"),
    ],
    ids=["rate", "num-gpus", "offload"],
)
def test_a_plan_option_loads_its_section(option: list[str], loaded: str) -> None:
    argv = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", *_LENS, *option, "--json"]
    modules, code = _loaded(argv)
    assert code == 0
    assert loaded in modules


_PARSED_BOTH_WAYS = (
    "import sys; from pathlib import Path; import infertriage.collect.parse as parse; "
    "text = Path({path!r}).read_text(); alone = parse.parse_metrics_text(text, 'dump'); "
    "print('prometheus_client' in sys.modules); parse._text_parser.cache_clear(); "
    "import prometheus_client; whole = parse.parse_metrics_text(text, 'dump'); "
    "print(alone == whole, len(alone.samples))"
)


def test_the_parser_loaded_alone_reads_as_the_package_does() -> None:
    found = subprocess.run(
        [sys.executable, "-c", _PARSED_BOTH_WAYS.format(path=str(_DUMP))],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    package_loaded, same = found.stdout.strip().splitlines()
    assert package_loaded == "False"  # the first parse loaded the parser's modules alone
    equal, count = same.split()
    assert equal == "True"
    assert int(count) > 0


def test_a_command_help_loads_that_command_alone() -> None:
    modules, code = _loaded(["bench", "--help"])
    assert code == 0
    assert "infertriage.cli.bench" in modules
    others = tuple(m for m in _OTHER_COMMANDS if not m.endswith(".bench"))
    assert _under(modules, others) == []


@pytest.mark.parametrize("command", ["bench", "diagnose"])
def test_a_load_command_s_help_loads_no_load(command: str) -> None:
    modules, code = _loaded([command, "--help"])
    assert code == 0
    # what only the run needs: the load generator, its specs, the analysis, HTTP
    running = ("infertriage.loadgen", "infertriage.api.specs", "infertriage.analyze", "aiohttp")
    assert _under(modules, running) == []
    assert _under(modules, (f"infertriage.api.{command}",)) == []


def test_a_mistyped_command_still_gets_the_whole_table() -> None:
    found = subprocess.run(
        [sys.executable, "-c", _LOADED.format(argv=["plna"])],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert "plan" in found.stderr  # the suggestion comes from every registered command
    assert found.stdout.strip().splitlines()[-1] == "2"


@pytest.mark.parametrize(
    "package",
    [
        "infertriage.api",
        "infertriage.collect",
        "infertriage.loadgen",
        "infertriage.net",
        "infertriage.plan",
        "infertriage.schemas",
        "infertriage.twin",
        "infertriage.workload",
    ],
)
def test_every_re_export_stays_importable(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        assert not isinstance(value, type(sys)), f"{package}.{name} is a module"


def test_a_function_named_like_its_module_stays_the_function() -> None:
    import infertriage.api.plan  # noqa: PLC0415  # the import that would set the module
    import infertriage.twin.simulate  # noqa: F401, PLC0415
    from infertriage import api, twin  # noqa: PLC0415

    assert callable(api.plan)
    assert api.plan.__module__ == "infertriage.api.plan"
    assert callable(twin.simulate)
    assert twin.simulate.__module__ == "infertriage.twin.simulate"
    assert "infertriage.api.plan" in sys.modules


def test_the_collector_is_on_while_the_command_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # paused while the command's modules load (`cli.app.loading`), never while it works
    import gc  # noqa: PLC0415

    from infertriage import api  # noqa: PLC0415
    from infertriage.cli import main  # noqa: PLC0415

    real = api.plan
    seen: list[bool] = []

    def plan_watched(spec: Any) -> Any:
        seen.append(gc.isenabled())
        return real(spec)

    monkeypatch.setattr("infertriage.api.plan", plan_watched)
    argv = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", *_LENS, "--json"]
    assert main(argv) == 0
    assert seen == [True]
    assert gc.isenabled()
    assert '"schema"' in capsys.readouterr().out
