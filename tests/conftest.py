"""Shared test helpers: the one way to reach the real artifacts in ../shared/fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .badserver import serve_bad_server

_PROJECT = Path(__file__).resolve().parent.parent


def fixtures_dir() -> Path | None:
    """$INFERTRIAGE_FIXTURES, else ../shared/fixtures beside the project, else None."""
    candidates = []
    if env := os.environ.get("INFERTRIAGE_FIXTURES"):
        candidates.append(Path(env))
    candidates.append(_PROJECT.parent / "shared" / "fixtures")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


@pytest.fixture
def shared_fixture():  # type: ignore[no-untyped-def]
    """`shared_fixture("metrics/vllm.txt")` → its Path, or skip with the reason."""

    def get(relative: str) -> Path:
        root = fixtures_dir()
        if root is None:
            pytest.skip(
                "real fixtures absent: set INFERTRIAGE_FIXTURES or put ../shared beside the project"
            )
        path = root / relative
        if not path.exists():
            pytest.skip(f"real fixture {relative} absent from {root}")
        return path

    return get


@pytest.fixture
def bad_server():  # type: ignore[no-untyped-def]
    """A faulty OpenAI-compatible server on 127.0.0.1 (see tests/badserver.py); its base URL."""
    with serve_bad_server() as url:
        yield url
