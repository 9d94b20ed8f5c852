"""testing: the floor the client's stamps are judged against — a raw aiohttp reader.

Takes the loopback test server's base URL and a load (streams, requests, tokens);
gives, per request, (request id, sent ns, first-token ns) on `perf_counter_ns`:
the send stamped just before `session.post`, connection set-up included, and the
first read that carries content stamped as it returns — the two moments vLLM's
`bench serve` stamps — with nothing parsed and no record kept. It knows the test
server's bytes only (the role chunk's content is empty, every token starts with
a space). `keepalive=False` opens a connection per request (aiohttp then sends
`Connection: close`). For tests and benchmarks (`benchmarks/bench_client.py --ttft`).
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson

__all__ = ["TtftRow", "raw_ttft"]

TtftRow = tuple[str, int, int]  # request id, sent ns, first-token ns (0: none came)
_CONTENT = b'"content":" '  # a token's delta; the role chunk's content is ""


async def raw_ttft(
    base_url: str,
    *,
    streams: int,
    requests: int,
    tokens: int,
    tag: str,
    keepalive: bool = True,
) -> list[TtftRow]:
    """`requests` chat requests over `streams` closed-loop users; ids are `{tag}-{i}`."""
    body = orjson.dumps({
        "model": "test-model", "max_tokens": tokens, "stream": True,
        "messages": [{"role": "user", "content": "hello " * 16}],
        "stream_options": {"include_usage": True},
    })  # fmt: skip
    url, todo = base_url + "/v1/chat/completions", iter(range(requests))
    out: list[TtftRow] = []

    async def user(session: aiohttp.ClientSession) -> None:
        for i in todo:
            rid, first = f"{tag}-{i}", 0
            headers = {"Content-Type": "application/json", "X-Request-Id": rid}
            sent = time.perf_counter_ns()
            async with session.post(url, data=body, headers=headers) as resp:
                async for data in resp.content.iter_any():
                    ns = time.perf_counter_ns()
                    if not first and _CONTENT in data:
                        first = ns
            out.append((rid, sent, first))

    connector = aiohttp.TCPConnector(limit=0, force_close=not keepalive)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(user(session) for _ in range(streams)))
    return out
