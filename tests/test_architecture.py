"""The shape the product keeps, read from its source (no import): small modules, no test code.

- No module in `src/infertriage` has more than 600 lines.
- No aiohttp test server ships in the product: an `aiohttp.web.Application` is
  built only by the twin (a product server); the loopback test servers live in
  `testing/infertriage_testing`.
- No trace synthesiser ships in the product: Chrome-trace events (dict literals
  with `"ph"` and `"cat"`) are written only by the twin's profiler.
- Nothing in the product imports `infertriage_testing`, and the product's
  distribution packages `src` alone, so `pip install infertriage` ships none of it.

Each detector is also run on `testing/infertriage_testing`, where it must find
the test server and the trace synthesiser, so a rule cannot pass by finding nothing.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ROOT / "src" / "infertriage"
TESTING = ROOT / "testing" / "infertriage_testing"
MAX_MODULE_LINES = 600
# The twin is a product server (a stand-in engine that serves and profiles), so it may do both.
SERVER_PACKAGES = ("twin",)
# Trace-event writers that export what was measured, never a synthesised profile:
# `--export timeline` writes the client's own timeline (its sends, first tokens, chunks).
MEASURED_TIMELINES = ("infertriage.report.client_trace",)


def _modules(root: Path) -> Iterator[Path]:
    return iter(sorted(root.rglob("*.py")))


def _name(path: Path, root: Path) -> str:
    return path.relative_to(root.parent).with_suffix("").as_posix().replace("/", ".")


def _in_server_package(name: str) -> bool:
    return name.split(".")[1] in SERVER_PACKAGES


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _builds_web_app(tree: ast.Module) -> bool:
    """`web.Application`, `aiohttp.web.Application`, or `Application` from `aiohttp.web`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "aiohttp.web":
            found = any(alias.name in {"Application", "*"} for alias in node.names)
        elif isinstance(node, ast.Attribute) and node.attr == "Application":
            found = _dotted(node.value).endswith("web")
        else:
            found = False
        if found:
            return True
    return False


def _writes_trace_events(tree: ast.Module) -> bool:
    """A dict literal with the keys of a Chrome trace event (`"ph"` and `"cat"`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if {"ph", "cat"} <= keys:
                return True
    return False


def _imports_testing(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        if any(name.split(".")[0] == "infertriage_testing" for name in names):
            return True
    return False


def _num_lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_no_product_module_over_600_lines() -> None:
    sizes = {_name(p, PRODUCT): _num_lines(p) for p in _modules(PRODUCT)}
    assert sizes, PRODUCT
    over = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split them): {over}"


def test_no_test_server_in_the_product() -> None:
    servers = [_name(p, PRODUCT) for p in _modules(PRODUCT) if _builds_web_app(_parse(p))]
    assert any(map(_in_server_package, servers)), "the twin's server not found: detector broken"
    outside = [n for n in servers if not _in_server_package(n)]
    assert not outside, f"aiohttp applications outside the twin (move to testing/): {outside}"


def test_no_trace_synthesiser_in_the_product() -> None:
    writers = [_name(p, PRODUCT) for p in _modules(PRODUCT) if _writes_trace_events(_parse(p))]
    outside = [n for n in writers if not _in_server_package(n) and n not in MEASURED_TIMELINES]
    assert not outside, f"Chrome-trace writers outside the twin (move to testing/): {outside}"


def test_the_detectors_find_the_testing_package() -> None:
    trees = {p.stem: _parse(p) for p in _modules(TESTING)}
    assert _builds_web_app(trees["testserver"])
    assert _writes_trace_events(trees["tracesynth"])


def test_the_product_does_not_import_the_testing_package() -> None:
    importers = [_name(p, PRODUCT) for p in _modules(PRODUCT) if _imports_testing(_parse(p))]
    assert not importers, f"product modules importing infertriage_testing: {importers}"


def test_the_product_distribution_packages_src_alone() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["tool"]["setuptools"]["packages"]["find"]["where"] == ["src"]
