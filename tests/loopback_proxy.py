"""A real reverse proxy on 127.0.0.1, in its own thread: a load balancer in front of replicas.

`running_proxy(backends, weights)` forwards every request to one backend,
chosen by smooth weighted round-robin (weights 3, 1: three of every four
requests go to the first), and streams the answer back chunk by chunk as a
gateway does. Tests use it to put an unevenly balanced fleet behind one URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator, Sequence

import aiohttp
from aiohttp import web

_HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})


class _Balancer:
    def __init__(self, backends: Sequence[str], weights: Sequence[int]) -> None:
        self.backends, self.weights = list(backends), list(weights)
        self.current = [0] * len(backends)
        self.sent = [0] * len(backends)

    def pick(self) -> int:
        """Smooth weighted round-robin, as nginx does it."""
        total = sum(self.weights)
        for i, weight in enumerate(self.weights):
            self.current[i] += weight
        best = max(range(len(self.backends)), key=lambda i: self.current[i])
        self.current[best] -= total
        self.sent[best] += 1
        return best


async def _forward(
    request: web.Request, balancer: _Balancer, session: aiohttp.ClientSession
) -> web.StreamResponse:
    backend = balancer.backends[balancer.pick()]
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS | {"host"}}
    body = await request.read()
    async with session.request(
        request.method, backend + request.path_qs, data=body, headers=headers
    ) as upstream:
        response = web.StreamResponse(status=upstream.status)
        for key, value in upstream.headers.items():
            if key.lower() not in _HOP_HEADERS:
                response.headers[key] = value
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response


class Proxy:
    def __init__(self, backends: Sequence[str], weights: Sequence[int]) -> None:
        self.balancer = _Balancer(backends, weights)
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        return await _forward(request, self.balancer, self._session)

    async def _start(self) -> str:
        app = web.Application()
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        return f"http://127.0.0.1:{port}"

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def start(self) -> None:
        self._thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@contextlib.contextmanager
def running_proxy(backends: Sequence[str], weights: Sequence[int]) -> Iterator[Proxy]:
    proxy = Proxy(backends, weights)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
