"""Shared test helpers: the one way to reach the real artifacts in ../shared/fixtures, and
one environment for every run of the suite.

The suite runs the same in every shell and on every day: the caller's API key, base URL,
baseline store, terminal width and colour wishes are not read, local time is UTC, and
baselines go to a folder of the session's own (never the user's data folder). The
fixtures' folder (`INFERTRIAGE_FIXTURES`), the real-engine switch (`INFERTRIAGE_ENGINES`)
and the opt-in seed (`INFERTRIAGE_SEED`) are the only settings read.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .badserver import serve_bad_server

_PROJECT = Path(__file__).resolve().parent.parent
# read by the tool, by rich or by the OpenAI client when set: a shell's values would change
# what a test sees
_CALLERS_SETTINGS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "INFERTRIAGE_HOME",
    "XDG_DATA_HOME",
    "COLUMNS",
    "LINES",
    "NO_COLOR",
    "FORCE_COLOR",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
)
for _name in _CALLERS_SETTINGS:
    os.environ.pop(_name, None)
os.environ["TZ"] = "UTC"  # servers' log stamps are local time: one zone, no daylight saving
time.tzset()


@pytest.fixture(autouse=True, scope="session")
def _own_baseline_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """`baseline save` without `--store` writes here, not into the user's data folder."""
    os.environ["INFERTRIAGE_HOME"] = str(tmp_path_factory.mktemp("home"))
    yield
    os.environ.pop("INFERTRIAGE_HOME", None)


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
