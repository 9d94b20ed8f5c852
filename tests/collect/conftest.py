"""Helpers for the collect tests: a real aiohttp server on 127.0.0.1 in its own thread.

The server serves whatever text and JSON the test gives it (the real fixture
captures, with values changed between scrapes), can answer slowly or cut its
body short, and can be stopped and started again on the same port to
simulate a server restart. It runs on its own event loop in a thread so
that code under test can run `asyncio.run` in the test's thread.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from aiohttp import web


@dataclass
class Route:
    body: str | bytes = ""
    status: int = 200
    content_type: str = "text/plain"
    delay_s: float = 0.0
    cut: bool = False  # declare a longer body than is sent, then close
    make: Callable[[], tuple[int, str]] | None = None  # (status, body) per request


@dataclass
class _Shared:
    routes: dict[str, Route] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class LiveServer:
    """A real HTTP server; `set(path, ...)` changes what a path answers."""

    def __init__(self) -> None:
        self._shared = _Shared()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set(self, path: str, body: str | bytes = "", **options: Any) -> None:
        with self._shared.lock:
            self._shared.routes[path] = Route(body, **options)

    def set_json(self, path: str, document: object, **options: Any) -> None:
        self.set(path, orjson.dumps(document), content_type="application/json", **options)

    def hits(self, path: str) -> int:
        with self._shared.lock:
            return self._shared.hits.get(path, 0)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        with self._shared.lock:
            route = self._shared.routes.get(request.path)
            self._shared.hits[request.path] = self._shared.hits.get(request.path, 0) + 1
        if route is None:
            return web.Response(status=404, text="404: Not Found")
        if route.delay_s:
            await asyncio.sleep(route.delay_s)
        status, body = route.make() if route.make else (route.status, route.body)
        data = body.encode() if isinstance(body, str) else body
        if route.cut:
            response = web.StreamResponse(status=route.status)
            response.content_length = len(data) * 2
            response.content_type = route.content_type
            await response.prepare(request)
            await response.write(data[: len(data) // 2])
            assert request.transport is not None
            request.transport.close()
            return response
        return web.Response(body=data, status=status, content_type=route.content_type)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _call(self, coro: Any) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    def start(self) -> None:
        self._call(self._start())

    def stop(self) -> None:
        """Stop listening: connections are refused until `start()` (same port)."""
        self._call(self._stop())

    # Text edits, here so tests reach them through the fixture (conftest is not importable).
    @staticmethod
    def with_values(text: str, values: dict[str, float]) -> str:
        return with_values(text, values)

    @staticmethod
    def with_bucket_counts(text: str, family: str, counts: dict[str, float]) -> str:
        return with_bucket_counts(text, family, counts)

    def close(self) -> None:
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


@pytest.fixture
def live_server() -> Iterator[LiveServer]:
    server = LiveServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def make_live_server() -> Iterator[Callable[[], LiveServer]]:
    """Start as many servers as a test needs; all are closed after it."""
    servers: list[LiveServer] = []

    def make() -> LiveServer:
        servers.append(LiveServer())
        return servers[-1]

    try:
        yield make
    finally:
        for server in servers:
            server.close()


@pytest.fixture
def free_port() -> int:
    """A port nothing listens on (bound, then released): connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def with_values(text: str, values: dict[str, float]) -> str:
    """The text with the value of every sample line of these exact names (any labels) replaced."""
    for name, value in values.items():
        pattern = re.compile(rf"^({re.escape(name)}(?:\{{[^}}]*\}})?) \S+$", re.MULTILINE)
        text, count = pattern.subn(lambda m, v=value: f"{m.group(1)} {v!r}", text)
        assert count, f"{name} not in the text"
    return text


def with_bucket_counts(text: str, family: str, counts: dict[str, float]) -> str:
    """Set `family_bucket{le=...}` cumulative counts (every label set), and `_count` to +Inf's."""
    for le, value in counts.items():
        pattern = re.compile(
            rf'^({re.escape(family)}_bucket\{{le="{re.escape(le)}"[^}}]*\}}) \S+$', re.MULTILINE
        )
        text, count = pattern.subn(lambda m, v=value: f"{m.group(1)} {v!r}", text)
        assert count, f'{family} has no le="{le}" bucket'
    return with_values(text, {f"{family}_count": counts["+Inf"]})
