"""collect, level 2: fleets, through the Prometheus HTTP API instead of scraping.

Takes a Prometheus URL, a series selector (`job="vllm"`) and the run's window
in Unix time; gives a `FleetView`: the engine the selected series come from,
and per instance the key figures over the window (token and request rates,
queue, KV usage, TTFT/ITL p95 from `histogram_quantile` over bucket rates),
from range queries grouped `by (instance)`. Each figure has its imbalance
(the busiest replica over the mean); a ratio at or over `imbalance_ratio`
is flagged as load imbalance between replicas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson

from infertriage.collect.adapters import Adapter, pick_engine
from infertriage.collect.http import fetch
from infertriage.engines import metric_tables
from infertriage.schemas import VOCABULARY, MetricKind, UserError

__all__ = [
    "FLEET_FIGURES",
    "FleetFigure",
    "FleetView",
    "InstanceValue",
    "PromSeries",
    "PrometheusClient",
    "collect_fleet",
    "required_matchers",
    "selector_matchers",
]

# (normalised name, figure): the figures compared across replicas.
FLEET_FIGURES: tuple[tuple[str, str], ...] = (
    ("tokens.generation", "rate"),
    ("tokens.prompt", "rate"),
    ("requests.finished", "rate"),
    ("queue.waiting", "mean"),
    ("queue.running", "mean"),
    ("kv.usage", "mean"),
    ("server.ttft", "p95"),
    ("server.itl", "p95"),
)


@dataclass(frozen=True, slots=True)
class PromSeries:
    labels: dict[str, str]
    points: tuple[tuple[float, float], ...]  # (Unix time, value), NaN left out


class PrometheusClient:
    """The two calls we need of `/api/v1`: `query` (instant) and `query_range`."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, timeout_s: float = 10.0):
        self.session = session
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    async def _get(self, path: str, params: dict[str, str]) -> Any:
        url = f"{self.base_url}{path}?{urlencode(params)}"
        fetched = await fetch(self.session, url, timeout_s=self.timeout_s, raise_for_status=False)
        try:
            document = orjson.loads(fetched.text)
        except orjson.JSONDecodeError as err:
            raise UserError(
                f"{self.base_url} is not a Prometheus server (HTTP {fetched.status}, not JSON)."
            ) from err
        if not isinstance(document, dict) or document.get("status") != "success":
            error = document.get("error", "unknown error") if isinstance(document, dict) else ""
            raise UserError(f"Prometheus at {self.base_url} refused {params['query']!r}: {error}.")
        return document["data"]

    @staticmethod
    def _series(data: Any) -> list[PromSeries]:
        out = []
        for result in data.get("result", []):
            raw = result.get("values") or ([result["value"]] if "value" in result else [])
            points = tuple((float(t), float(v)) for t, v in raw if math.isfinite(float(v)))
            out.append(PromSeries(dict(result.get("metric", {})), points))
        return out

    async def query(self, expr: str, at_unix: float) -> list[PromSeries]:
        data = await self._get("/api/v1/query", {"query": expr, "time": f"{at_unix:.3f}"})
        return self._series(data)

    async def query_range(
        self, expr: str, start_unix: float, end_unix: float, step_s: float
    ) -> list[PromSeries]:
        params = {
            "query": expr,
            "start": f"{start_unix:.3f}",
            "end": f"{end_unix:.3f}",
            "step": f"{step_s:g}",
        }
        return self._series(await self._get("/api/v1/query_range", params))


@dataclass(frozen=True, slots=True)
class InstanceValue:
    instance: str
    mean: float
    last: float
    num_points: int


@dataclass(frozen=True)
class FleetFigure:
    name: str  # normalised name
    figure: str  # rate, mean, p95
    unit: str
    expr: str
    instances: tuple[InstanceValue, ...]
    imbalance: float | None  # max over mean of the instances' means
    flagged: bool


@dataclass(frozen=True)
class FleetView:
    prometheus_url: str
    selector: str
    engine: str | None
    window: tuple[float, float]  # Unix seconds
    step_s: float
    instances: tuple[str, ...]
    figures: tuple[FleetFigure, ...]
    notes: tuple[str, ...] = ()

    @property
    def imbalanced(self) -> tuple[FleetFigure, ...]:
        return tuple(f for f in self.figures if f.flagged)


def selector_matchers(selector: str) -> str:
    """The label matchers of a selector, without braces: `{job="vllm"}` → `job="vllm"`."""
    selector = selector.strip()
    return (
        selector[1:-1].strip() if selector.startswith("{") and selector.endswith("}") else selector
    )


def required_matchers(selector: str) -> str:
    """The matchers of a selector a fleet command cannot do without; one sentence when empty."""
    matchers = selector_matchers(selector)
    if not matchers:
        raise UserError("--prometheus needs --selector, e.g. --selector 'job=\"vllm\"'.")
    return matchers


def _detect(names: set[str]) -> Adapter | None:
    counts = {a.engine: sum(1 for n in names if n.startswith(a.prefixes)) for a in metric_tables()}
    return pick_engine(counts)


def _raw_name(adapter: Adapter, name: str, names: set[str]) -> str | None:
    histogram = VOCABULARY[name].kind is MetricKind.HISTOGRAM
    for mapping in adapter.mappings:
        if mapping.name != name:
            continue
        for source in mapping.sources:
            if source.where or source.from_label or source.scale != 1.0:
                continue
            if (f"{source.raw}_bucket" if histogram else source.raw) in names:
                return source.raw
    return None


def _expr(raw: str, figure: str, selector: str, window_s: float, *, summed: bool = True) -> str:
    matcher = f"{raw}{{{selector}}}" if selector else raw
    window = f"[{max(round(window_s * 1000), 1)}ms]"  # PromQL durations are integers
    if figure == "rate":
        return f"sum by (instance) (rate({matcher}{window}))"
    if figure == "p95":
        bucket = f"{raw}_bucket{{{selector}}}" if selector else f"{raw}_bucket"
        return f"histogram_quantile(0.95, sum by (instance, le) (rate({bucket}{window})))"
    # a gauge of requests or tokens is the replica's sum over its series (one per engine core
    # with data parallelism), the tensor- and pipeline-parallel ranks of one scheduler taken
    # once (SGLang exports one series per rank with --enable-metrics-for-all-schedulers, each
    # the scheduler's whole state); a fraction (KV use) their mean
    if summed:
        return f"sum by (instance) (max without (tp_rank, pp_rank) ({matcher}))"
    return f"avg by (instance) ({matcher})"


def _figure(
    name: str, figure: str, expr: str, series: Sequence[PromSeries], imbalance_ratio: float
) -> FleetFigure:
    instances = tuple(
        sorted(
            (
                InstanceValue(
                    s.labels.get("instance", "?"),
                    sum(v for _, v in s.points) / len(s.points),
                    s.points[-1][1],
                    len(s.points),
                )
                for s in series
                if s.points
            ),
            key=lambda i: i.instance,
        )
    )
    means = [i.mean for i in instances]
    overall = sum(means) / len(means) if means else 0.0
    imbalance = max(means) / overall if len(means) >= 2 and overall > 0 else None
    unit = VOCABULARY[name].unit + ("/s" if figure == "rate" else "")
    flagged = imbalance is not None and imbalance >= imbalance_ratio
    return FleetFigure(name, figure, unit, expr, instances, imbalance, flagged)


async def collect_fleet(
    session: aiohttp.ClientSession,
    prometheus_url: str,
    selector: str,
    *,
    start_unix: float,
    end_unix: float,
    step_s: float | None = None,
    rate_window_s: float | None = None,
    imbalance_ratio: float = 1.5,
) -> FleetView:
    """Range queries over `[start_unix, end_unix]` for every figure the fleet's engine exports."""
    if end_unix <= start_unix:
        raise UserError("the fleet window is empty (its end is not after its start).")
    client = PrometheusClient(session, prometheus_url)
    inner = selector_matchers(selector)
    step = step_s or max((end_unix - start_unix) / 120.0, 1.0)
    window = rate_window_s or max(4.0 * step, 60.0)
    names_query = f"count by (__name__) ({{{inner}}})" if inner else "count by (__name__) (up)"
    found = await client.query(names_query, end_unix)
    names = {s.labels.get("__name__", "") for s in found}
    adapter = _detect(names)
    if adapter is None:
        raise UserError(
            f"no engine metrics match {selector!r} in Prometheus at {prometheus_url} "
            "(check --selector and that Prometheus scrapes the servers)."
        )
    figures, notes = [], []
    for name, figure in FLEET_FIGURES:
        raw = _raw_name(adapter, name, names)
        if raw is None:
            notes.append(f"{name}: {adapter.title} exports no such series under {selector!r}.")
            continue
        expr = _expr(raw, figure, inner, window, summed=VOCABULARY[name].unit != "fraction")
        series = await client.query_range(expr, start_unix, end_unix, step)
        figures.append(_figure(name, figure, expr, series, imbalance_ratio))
    instances = sorted({i.instance for f in figures for i in f.instances})
    return FleetView(
        prometheus_url=prometheus_url,
        selector=selector,
        engine=adapter.engine,
        window=(start_unix, end_unix),
        step_s=step,
        instances=tuple(instances),
        figures=tuple(figures),
        notes=tuple(notes),
    )
