"""report, level 4: the recording rules — each engine's names, once, as `infertriage:` series.

Takes the engine's `Exporter`, dcgm-exporter's and the `Timing`; gives the
`Recording`s (per replica: waiting and running requests, KV usage, token,
preemption, finished and failed rates, prefix-cache hit rate; per job: TTFT,
ITL and E2E percentiles and the error ratio; per GPU: utilisation as a
fraction and framebuffer bytes) and the `LeftOut` ones the engine cannot feed.
Alerts, the dashboard and an HPA read these names, never the engine's.
"""

from __future__ import annotations

from infertriage.report.monitoring.model import LeftOut, Recorded, Recording, Timing
from infertriage.report.monitoring.promql import Exporter, duration, why_missing

__all__ = ["recording_rules"]

_GAUGES = (
    (Recorded.WAITING, "queue.waiting", "sum"),
    (Recorded.RUNNING, "queue.running", "sum"),
    (Recorded.KV_USAGE, "kv.usage", "max"),
)
_RATES = (
    (Recorded.GENERATION_TOKENS, "tokens.generation"),
    (Recorded.PROMPT_TOKENS, "tokens.prompt"),
    (Recorded.PREEMPTIONS, "preemptions"),
    (Recorded.FINISHED, "requests.finished"),
    (Recorded.FAILED, "requests.failed"),
)
_QUANTILES = (
    ("server.ttft", (Recorded.TTFT_P50, Recorded.TTFT_P95, Recorded.TTFT_P99)),
    ("server.itl", (Recorded.ITL_P50, Recorded.ITL_P95, Recorded.ITL_P99)),
    ("server.e2e", (Recorded.E2E_P50, Recorded.E2E_P95, Recorded.E2E_P99)),
)
_PERCENTILES = (0.50, 0.95, 0.99)


def _hit_rate(engine: Exporter, window: str) -> tuple[str | None, str]:
    """Hits over lookups where the engine counts both; its own ratio where it exports one;
    cached prompt tokens over prompt tokens (llama.cpp) otherwise."""
    hits = engine.rate("prefix_cache.hits", window)
    queries = engine.rate("prefix_cache.queries", window)
    if hits and queries:
        return f"({hits}) / ({queries})", "prefix_cache.hits / prefix_cache.queries"
    if engine.has("prefix_cache.hit_rate"):
        return engine.gauge("prefix_cache.hit_rate", "avg"), "prefix_cache.hit_rate"
    prompt = engine.rate("tokens.prompt", window)
    if hits and prompt:
        return f"({hits}) / ({prompt})", "prefix_cache.hits / tokens.prompt"
    return None, "prefix_cache.hits"


def recording_rules(
    engine: Exporter, gpu: Exporter, timing: Timing
) -> tuple[list[Recording], list[LeftOut]]:
    """The recording rules and the ones the engine cannot feed (see the module docstring)."""
    window = duration(timing.rate_window_s)
    made: list[Recording] = []
    left: list[LeftOut] = []

    def add(record: Recorded, expr: str | None, source: str) -> None:
        if expr is None:
            left.append(
                LeftOut(record.value, why_missing(engine, source.split(" ", maxsplit=1)[0]))
            )
        else:
            made.append(Recording(record, expr, source))

    for record, name, agg in _GAUGES:
        add(record, engine.gauge(name, agg), name)
    for record, name in _RATES:
        add(record, engine.rate(name, window), name)
    expr, source = _hit_rate(engine, window)
    add(Recorded.PREFIX_HIT_RATE, expr, source)
    failed, finished = (
        engine.rate("requests.failed", window, "job"),
        engine.rate("requests.finished", window, "job"),
    )
    ratio = f"({failed}) / (({failed}) + ({finished}))" if failed and finished else None
    add(Recorded.ERROR_RATIO, ratio, "requests.failed")
    for name, records in _QUANTILES:
        for record, q in zip(records, _PERCENTILES, strict=True):
            add(record, engine.quantile(name, q, window), name)
    add(Recorded.GPU_UTIL, gpu.gauge("gpu.util", "max", gpu.by), "gpu.util")
    add(Recorded.GPU_FB_USED, gpu.gauge("gpu.fb_used_bytes", "max", gpu.by), "gpu.fb_used_bytes")
    return made, left
