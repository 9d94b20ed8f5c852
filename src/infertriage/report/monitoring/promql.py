"""report, level 4: PromQL over one exporter's own metric names, read from its adapter.

Takes an engine's `MetricTable`s (`infertriage.engines`) or dcgm-exporter's
(`collect.adapters.dcgm`) and a normalised name of the vocabulary; gives the
PromQL that selects it, aggregated, in SI units: every raw name that carries
it (vLLM's V1 name before its V0 one, with their `_total` as the server
exports them) as alternatives joined by `or`, so a server of either
generation matches and one that exports both counts once (each alternative
is aggregated first, which drops `__name__`, so the newer one wins label set
by label set). None when the exporter has no such metric; `why_missing`
says why, in the adapter's words.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infertriage.engines import MetricTable, Source
from infertriage.schemas.recorded import REPLICA_LABELS

__all__ = ["Exporter", "duration", "why_missing"]


def duration(seconds: float) -> str:
    """A PromQL duration: `5m`, `90s`, `500ms`."""
    millis = max(1, round(seconds * 1000))
    if millis % 60_000 == 0:
        return f"{millis // 60_000}m"
    if millis % 1000 == 0:
        return f"{millis // 1000}s"
    return f"{millis}ms"


def _scaled(expr: str, source: Source) -> str:
    return expr if source.scale == 1.0 else f"{expr} * {source.scale:.12g}"


def _alternatives(parts: Sequence[str]) -> str | None:
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else " or ".join(f"({p})" for p in parts)


@dataclass(frozen=True)
class Exporter:
    """One exporter's tables (an engine's variants, or dcgm-exporter's) and the label
    matchers that pick its series out of everything Prometheus scrapes (`job="vllm"`)."""

    tables: tuple[MetricTable, ...]
    matchers: str = ""
    by: str = ", ".join(REPLICA_LABELS)  # a replica: its target, and its pod on Kubernetes

    def sources(self, name: str) -> tuple[Source, ...]:
        """Every raw source of `name`, the engine's own table first; info labels left out."""
        found: list[Source] = []
        for table in self.tables:
            for mapping in table.mappings:
                if mapping.name == name:
                    found += [s for s in mapping.sources if s.from_label is None]
        unique = {(s.raw, s.where): s for s in found}
        return tuple(unique.values())

    def has(self, name: str) -> bool:
        return bool(self.sources(name))

    def selector(self, source: Source, suffix: str = "") -> str:
        matchers = [f'{k}="{v}"' for k, v in source.where]
        if self.matchers:
            matchers.append(self.matchers)
        inside = ",".join(matchers)
        return f"{source.raw}{suffix}{{{inside}}}" if inside else f"{source.raw}{suffix}"

    def _each(self, name: str, make: Callable[[Source], str]) -> str | None:
        return _alternatives([_scaled(make(s), s) for s in self.sources(name)])

    def gauge(self, name: str, agg: str = "sum", by: str | None = None) -> str | None:
        """`agg by (replica) (gauge)` in SI units."""
        group = self.by if by is None else by
        return self._each(name, lambda s: f"{agg} by ({group}) ({self.selector(s)})")

    def rate(self, name: str, window: str, by: str | None = None) -> str | None:
        """A counter's per-second rate, summed per replica."""
        group = self.by if by is None else by
        return self._each(name, lambda s: f"sum by ({group}) (rate({self.selector(s)}[{window}]))")

    def raw_rate(self, name: str, window: str) -> str | None:
        """A counter's per-second rate, every series apart (its own labels kept)."""
        return self._each(name, lambda s: f"rate({self.selector(s)}[{window}])")

    def quantile(self, name: str, q: float, window: str, by: str = "job") -> str | None:
        """A histogram's `q` quantile over `window`, in seconds."""
        return self._each(
            name,
            lambda s: (
                f"histogram_quantile({q:g}, sum by (le, {by}) "
                f"(rate({self.selector(s, '_bucket')}[{window}])))"
            ),
        )

    def changes(self, name: str, window: str) -> str | None:
        """How often a gauge (a start time) changed over `window`, per replica."""
        return self._each(
            name, lambda s: f"max by ({self.by}) (changes({self.selector(s)}[{window}]))"
        )

    def resets(self, name: str, window: str) -> str | None:
        """How often a counter went back to zero over `window`, per replica."""
        return self._each(
            name, lambda s: f"max by ({self.by}) (resets({self.selector(s)}[{window}]))"
        )


def why_missing(exporter: Exporter, name: str) -> str:
    """The adapter's reason for having no `name`, or a plain one."""
    for table in exporter.tables:
        if name in table.unsupported:
            return table.unsupported[name]
    return f"{exporter.tables[0].title} exports no {name} metric"
