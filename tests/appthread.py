"""An aiohttp application on 127.0.0.1 from a thread with its own event loop, for tests."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from aiohttp import web


@contextlib.contextmanager
def serve_app(app: web.Application, name: str) -> Iterator[str]:
    """`app` on 127.0.0.1 (a free port) from a thread named `name`; yields its root URL."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    def main() -> None:
        loop = asyncio.new_event_loop()
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        stopped = asyncio.Event()
        box.update(loop=loop, stopped=stopped, port=runner.addresses[0][1])
        ready.set()
        loop.run_until_complete(stopped.wait())
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=main, name=name, daemon=True)
    thread.start()
    assert ready.wait(10.0)
    try:
        yield f"http://127.0.0.1:{box['port']}"
    finally:
        box["loop"].call_soon_threadsafe(box["stopped"].set)
        thread.join(timeout=10.0)
