"""loadgen, level 2: a server's cold start — from its process start to a warm prefix cache.

Takes a `ClientConfig`, how long ago the server's process started and when
its `/health` first answered 200 (the caller started it and watched); gives a
`ColdStart`: process start → `/health` ready, → the first token of the first
request, and how long after ready the prefix cache is warm. For that, one
request at a time shares one long prefix (a system prompt a real fleet
sends with every request): the first pays its whole prefill (cold TTFT), the
later ones find it cached (warm TTFT, the median of the last ones). The cache
is warm from the send of the first request whose TTFT is within
`_WARM_WITHIN` of the warm TTFT; when the first is already that fast the
server shows no prefix-cache warm-up (caching off, or prefill too cheap to
see) and the figure is None.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass

from infertriage.loadgen.client import ClientConfig, RequestClient, make_session
from infertriage.workload import RequestSpec, SynthText, Turn

__all__ = ["ColdStart", "measure_cold_start"]

_WARM_WITHIN = 1.25  # a TTFT this close to the warm one found its prefix cached
_NUM_PROBES = 5
_LAST = 3  # the warm TTFT: the median of this many last probes
_PREFIX_KEY = 0x0C01D  # one synthetic text, the same in every probe


@dataclass(frozen=True, slots=True)
class ColdStart:
    health_ready_s: float  # process start → /health 200
    first_token_s: float  # process start → the first request's first token
    cold_ttft_s: float  # the first request's TTFT: its whole prefix prefilled
    warm_ttft_s: float  # the median TTFT of the last probes: the prefix cached
    prefix_cache_warm_s: float | None  # /health ready → the prefix served from the cache
    prefix_tokens: int
    error: str = ""  # a probe that failed: what it said (the figures are then partial)


def _spec(index: int, prefix_tokens: int) -> RequestSpec:
    turns = (
        Turn("system", SynthText(prefix_tokens, _PREFIX_KEY)),
        Turn("user", SynthText(8, index + 1)),
    )
    return RequestSpec(index, turns, prefix_tokens + 8, max_tokens=4, ignore_eos=True)


async def _probes(config: ClientConfig, prefix_tokens: int) -> list[tuple[int, int | None, str]]:
    """(sent ns, first-token ns or None, error text) of each probe, one after another."""
    out: list[tuple[int, int | None, str]] = []
    async with make_session(config) as session:
        client = RequestClient(config, session)
        try:
            for index in range(_NUM_PROBES):
                state = client.new_state(_spec(index, prefix_tokens), time.perf_counter_ns())
                await client.fetch(state, f"cold-start-{index}")
                first = state.chunks[0][0] if state.chunks else None
                out.append((state.sent_ns, first, state.error_text or state.error_kind.value))
                if first is None:
                    break
        finally:
            await client.aclose()
    return out


def measure_cold_start(
    config: ClientConfig, since_start_s: float, health_ready_s: float, prefix_tokens: int
) -> ColdStart:
    """The figures of `ColdStart`; `since_start_s` is how long ago the process started."""
    origin_ns = time.perf_counter_ns() - round(since_start_s * 1e9)  # the process start

    def since(ns: int) -> float:
        return (ns - origin_ns) * 1e-9

    probes = asyncio.run(_probes(config, prefix_tokens))
    ttfts = [(first - sent) * 1e-9 for sent, first, _ in probes if first is not None]
    first_ns = probes[0][1]
    if first_ns is None or not ttfts:
        nan = float("nan")
        return ColdStart(health_ready_s, nan, nan, nan, None, prefix_tokens, probes[0][2])
    warm = statistics.median(ttfts[-_LAST:])
    warm_at = None
    if ttfts[0] > _WARM_WITHIN * warm:
        index = next(i for i, t in enumerate(ttfts) if t <= _WARM_WITHIN * warm)
        warm_at = max(0.0, since(probes[index][0]) - health_ready_s)
    error = "" if len(ttfts) == len(probes) == _NUM_PROBES else probes[-1][2]
    return ColdStart(
        health_ready_s=health_ready_s,
        first_token_s=since(first_ns),
        cold_ttft_s=ttfts[0],
        warm_ttft_s=warm,
        prefix_cache_warm_s=warm_at,
        prefix_tokens=prefix_tokens,
        error=error,
    )
