"""`api.preflight` orchestrates and runs no event loop: the HTTP is `loadgen.preflight`."""

from __future__ import annotations

import ast
from pathlib import Path

PREFLIGHT = Path(__file__).resolve().parents[2] / "src" / "infertriage" / "api" / "preflight.py"


def test_api_preflight_has_no_http_and_no_event_loop() -> None:
    tree = ast.parse(PREFLIGHT.read_text())
    modules = {
        (n.module or "") if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not {"aiohttp", "asyncio", "infertriage.loadgen.runner"} & modules
    assert not {"run_sync", "open_session"} & names
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef)]
