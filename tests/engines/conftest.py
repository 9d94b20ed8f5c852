"""Real engines for `make test-engines`: vLLM's CPU build and llama.cpp's llama-server.

The scripts in scripts/engines/ install each engine once into a cache folder outside the
repository ($INFERTRIAGE_ENGINE_CACHE, else ~/.cache/infertriage/engines), make its tiny
model and start it on 127.0.0.1. Without INFERTRIAGE_ENGINES=1 (what `make test-engines`
sets) every test here is skipped: `make test` stays fast and needs no engine.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from infertriage.cli.app import main

_HERE = Path(__file__).resolve().parent
_SCRIPTS = _HERE.parent.parent / "scripts" / "engines"
ENABLED = os.environ.get("INFERTRIAGE_ENGINES") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if ENABLED:
        return
    skip = pytest.mark.skip(reason="real-engine tests: run `make test-engines`")
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(skip)


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"infertriage_engine_{name}", _SCRIPTS / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def vllm() -> ModuleType:
    """The vLLM script, its engine installed and its model made (once per machine)."""
    module = _load("vllm_cpu")
    module.install()
    module.make_model()
    return module


@pytest.fixture(scope="session")
def llama() -> ModuleType:
    module = _load("llama_cpp")
    module.install()
    module.make_model()
    return module


@pytest.fixture(scope="session")
def vllm_tokenizer(vllm: ModuleType) -> Path:
    return Path(vllm.make_model()) / "tokenizer.json"


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    """`infertriage ARGS --json`: its exit code and its JSON document (or, when it printed
    none, what it wrote on stderr, so a failed assertion says why the command stopped)."""
    capsys.readouterr()
    code = main([*args, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else captured.err


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[[list[str]], tuple[int, Any]]:
    return lambda args: run_cli(args, capsys)
