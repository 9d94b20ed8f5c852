"""The package's metadata: every import declared, floors pinnable, one version, a licence."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import infertriage

_ROOT = Path(__file__).resolve().parents[1]
_PROJECT = tomllib.loads((_ROOT / "pyproject.toml").read_text())["project"]


# Import roots the test environment may not map to a distribution: an extra not installed
# here (gpu), and pydantic's core, which pydantic pins exactly (a release of its own).
_KNOWN = {"pynvml": ["nvidia-ml-py"], "pydantic_core": ["pydantic"]}


def _owners(root: str) -> set[str]:
    found = _KNOWN.get(root) or importlib.metadata.packages_distributions().get(root, [root])
    return {re.sub(r"[-_.]+", "-", d).lower() for d in found}


def _floors() -> ModuleType:
    spec = importlib.util.spec_from_file_location("floors", _ROOT / "scripts" / "floors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _name(requirement: str) -> str:
    found = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert found is not None, requirement
    return re.sub(r"[-_.]+", "-", found.group(0)).lower()


def _declared() -> set[str]:
    names = {_name(r) for r in _PROJECT["dependencies"]}
    for extra, requirements in _PROJECT["optional-dependencies"].items():
        if extra != "dev":
            names |= {_name(r) for r in requirements}
    return names


def _imports_by_name(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
    )


def _imported_roots() -> set[str]:
    roots: set[str] = set()
    for path in (_ROOT / "src" / "infertriage").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                roots |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                roots.add(node.module.split(".")[0])
            elif _imports_by_name(node):  # importlib.import_module("pynvml")
                assert isinstance(node, ast.Call) and isinstance(node.args[0], ast.Constant)
                roots.add(str(node.args[0].value).split(".")[0])
    return roots - set(sys.stdlib_module_names) - {"infertriage", "__future__"}


def test_every_third_party_import_in_the_package_is_declared() -> None:
    # gevent and geventhttpclient were imported and not declared: a user's install lacked them
    missing = {}
    for root in sorted(_imported_roots()):
        owners = _owners(root)
        if not owners & _declared():
            missing[root] = sorted(owners)
    assert missing == {}, f"imported, not declared in pyproject.toml: {missing}"


def test_every_declared_extra_is_imported_somewhere() -> None:
    # a declared extra nothing imports (plotly was) installs weight for nothing
    imported = {owner for root in _imported_roots() for owner in _owners(root)}
    for extra, requirements in _PROJECT["optional-dependencies"].items():
        if extra == "dev":
            continue
        unused = {_name(r) for r in requirements} - imported
        assert unused == set(), f"extra {extra!r} declares what src never imports: {unused}"


def test_floors_pin_every_runtime_dependency_at_its_declared_minimum() -> None:
    floors = _floors()
    pins = floors.pins(_PROJECT["dependencies"])
    assert {_name(p) for p in pins} == {_name(r) for r in _PROJECT["dependencies"]}
    assert "aiohttp==3.12.7" in pins
    assert floors.floor_pin("uvloop>=0.19,<1; sys_platform != 'win32'") == (
        "uvloop==0.19 ; sys_platform != 'win32'"
    )
    assert floors.floor_pin("types-PyYAML") is None  # no floor: left as it is
    assert floors.floor_pin("grafana-foundation-sdk==1769699998!10.1.0") is None


def test_the_version_is_written_once_and_the_licence_ships() -> None:
    assert "version" not in _PROJECT and "version" in _PROJECT["dynamic"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", infertriage.__version__)
    licence = (_ROOT / "LICENSE").read_text()
    assert _PROJECT["license"] == "Apache-2.0" and "Apache License" in licence
    assert "Version 2.0" in licence
