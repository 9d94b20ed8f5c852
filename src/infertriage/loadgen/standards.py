"""loadgen, level 2: `--standard mlperf` — MLPerf LoadGen's Server scenario for LLMs, judged.

Takes a model's name from MLPerf's list, a bench spec, and the records of one measured
rate level; gives the preset (`server_settings`: the model's TTFT and TPOT limits at
the 99th percentile, the 600 s minimum duration, the 100-query minimum, the round's
seeds), the spec it implies (`apply_standard`: Poisson arrivals, 600 s and ten mean
gaps (`TAIL_GAPS`) unless `--duration` says otherwise, the preset's schedule seed, the
limits as the goodput SLOs, a drain that waits for every request), LoadGen's verdict
on a level (`judge_server` → `ServerVerdict`: VALID or INVALID, each constraint,
LoadGen's recommendation lines, its completed samples and tokens per second) and
validate's checks of it (`constraint_checks`). Pure: no I/O, no clock.

Read from mlcommons/inference:
- loadgen/mlperf.conf at 001712e9daf80386e0dda43f97b8f36981d792c4 (the newest stored,
  with deepseek-r1 and llama3_1-8b): `*.Server.target_latency_percentile = 99`,
  `*.Server.min_duration = 600000`, each LLM's `Server.ttft_latency` and
  `Server.tpot_latency` (ms), the seeds `qsl_rng_seed`, `sample_index_rng_seed` and
  `schedule_rng_seed`. The conf sets no Server `min_query_count`: TestSettings' default,
  100 (loadgen/test_settings.h), holds.
- loadgen/results.cc at 7ad9af18733e34e2599dee5c155a780329e3b3ac: `ProcessTokenLatencies`
  (the percentile is the sample at index ⌊n·p⌋ of the sorted list), `PerfConstraintsMet`
  (p99 TTFT ≤ ttft_latency and p99 TPOT ≤ tpot_latency), `MinDurationMet` (Server: the
  final query's scheduled time ≥ min_duration), `MinQueriesMet`, `EarlyStopping`
  (Server: t = samples over the limit, the run needs h(t) + t queries) for TTFT and TPOT,
  and `LogSummary` (`report.mlperf` renders it).
- loadgen/loadgen.cc at 006f3a5a7fa8afd700c9f59650397c39e7ea77d9: a sample's latency runs
  from its *scheduled* time, and the Server scenario's arrivals are Poisson.

Where a request here differs from a LoadGen sample: a request that failed counts as
issued and as over the TPOT limit (and over the TTFT limit when no token came) —
LoadGen has no failed sample, and a failure must not help a claim. As LoadGen waits
for every query it issued, the preset's drain waits up to `--timeout` (unless
`--drain-timeout` says otherwise). TTFT runs from the scheduled time, as
LoadGen's does; TPOT is (last token − first token) / (output tokens − 1), 0 for one
token. The early-stopping rule is `analyze.stats.earlystop`. LoadGen skips the TTFT
early-stopping text when TPOT's fails (`&&`); both are judged and shown here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from infertriage.analyze.stats.earlystop import LOADGEN_CONFIDENCE, EarlyStop, early_stop
from infertriage.analyze.stats.latency import tpot_s
from infertriage.loadgen.spec import BenchSpec
from infertriage.schemas import Check, CheckGroup, CheckStatus, RequestRecord, UserError

__all__ = [
    "MLPERF",
    "MLPERF_SERVER_LIMITS",
    "LatencyStats",
    "ServerSettings",
    "ServerVerdict",
    "apply_standard",
    "constraint_checks",
    "judge_level",
    "judge_server",
    "server_settings",
]

MLPERF: Final = "mlperf"  # the one `--standard` known
SCENARIO, MODE = "Server", "PerformanceOnly"
MIN_DURATION_S: Final = 600.0  # *.Server.min_duration = 600000 (ms)
MIN_QUERY_COUNT: Final = 100  # TestSettings.min_query_count; mlperf.conf sets none for Server
PERCENTILE: Final = 0.99  # *.Server.target_latency_percentile = 99
# mlperf.conf's `*.*.` seeds (the round this commit configures)
QSL_RNG_SEED: Final = 1780908523862526354
SAMPLE_INDEX_RNG_SEED: Final = 14771362308971278857
SCHEDULE_RNG_SEED: Final = 18209322760996052031
# LoadGen schedules queries until one lands at or past min_duration, so its final query
# meets it; a schedule here stops at --duration. The preset runs this many mean gaps past
# 600 s, so that the final query lands past it but with odds e^-10 (4.5e-5).
TAIL_GAPS: Final = 10.0
# LoadGen's extra percentiles (PerformanceSummary's latency_percentiles)
REPORTED_PERCENTILES: Final = (0.50, 0.90, 0.95, 0.97, 0.99, 0.999)

# model → (Server.ttft_latency, Server.tpot_latency), in seconds (mlperf.conf: ms)
MLPERF_SERVER_LIMITS: Final[dict[str, tuple[float, float]]] = {
    "llama2-70b": (2.0, 0.200),
    "llama2-70b-interactive": (0.450, 0.040),
    "mixtral-8x7b": (2.0, 0.200),
    "llama3_1-405b": (6.0, 0.175),
    "llama3_1-405b-interactive": (4.5, 0.080),
    "llama3_1-8b": (2.0, 0.100),
    "llama3_1-8b-interactive": (0.500, 0.030),
    "deepseek-r1": (2.0, 0.080),
    "deepseek-r1-interactive": (1.5, 0.015),
}


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """LoadGen's Server-scenario test settings for one model (what the summary's
    "Test Parameters Used" lists)."""

    model: str
    ttft_limit_s: float
    tpot_limit_s: float
    target_qps: float
    min_duration_s: float = MIN_DURATION_S
    min_query_count: int = MIN_QUERY_COUNT
    percentile: float = PERCENTILE
    confidence: float = LOADGEN_CONFIDENCE
    qsl_rng_seed: int = QSL_RNG_SEED
    sample_index_rng_seed: int = SAMPLE_INDEX_RNG_SEED
    schedule_rng_seed: int = SCHEDULE_RNG_SEED

    @property
    def goodput(self) -> str:
        """The limits as bench's `--goodput` SLOs."""
        return f"ttft={self.ttft_limit_s * 1e3:g}ms,tpot={self.tpot_limit_s * 1e3:g}ms"


def server_settings(model: str | None, *, target_qps: float = 1.0) -> ServerSettings:
    """The preset for `model` (`--mlperf-model`); a name not in MLPerf's list is refused."""
    known = ", ".join(MLPERF_SERVER_LIMITS)
    if not model:
        raise UserError(f"--standard mlperf needs --mlperf-model, one of: {known}.")
    limits = MLPERF_SERVER_LIMITS.get(model)
    if limits is None:
        raise UserError(
            f"--mlperf-model {model!r} has no MLPerf Server limits; give one of: {known}."
        )
    return ServerSettings(model, limits[0], limits[1], target_qps)


def apply_standard(spec: BenchSpec) -> BenchSpec:
    """`spec` as the standard runs it: each `--rate` a Server run at that target QPS."""
    if spec.standard is None:
        return spec
    settings = server_settings(spec.mlperf_model)
    if spec.find_max_rate:
        raise UserError(
            "--standard mlperf judges the --rate you give; to search for the highest rate "
            "LoadGen's Server rules allow, use --find-max-rate --max-rate-rule mlperf-server "
            "with the model's limits as --slo."
        )
    if spec.concurrencies or spec.sweep or not spec.rates:
        raise UserError(
            "--standard mlperf runs LoadGen's Server scenario, open loop: give its target "
            "QPS as --rate (no --concurrency or --sweep)."
        )
    if any(math.isinf(rate) for rate in spec.rates):
        raise UserError("--standard mlperf needs a finite --rate (its target QPS).")
    if spec.arrival != "poisson":
        raise UserError(
            "--standard mlperf sends Poisson arrivals, as LoadGen's Server does: drop --arrival."
        )
    update: dict[str, object] = {"goodput": spec.goodput or settings.goodput}
    if spec.duration_s is None and spec.num_requests is None:  # past 600 s: see TAIL_GAPS
        update["duration_s"] = settings.min_duration_s + TAIL_GAPS / min(spec.rates)
    if spec.seed == 0:  # the default: the round's schedule seed
        update["seed"] = settings.schedule_rng_seed
    if spec.drain_timeout_s is None:  # LoadGen waits for every query it issued
        update["drain_timeout_s"] = spec.timeout_s
    return spec.model_copy(update=update)


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Min, max, mean and LoadGen's reported percentiles of one latency, in seconds."""

    min_s: float
    max_s: float
    mean_s: float
    percentiles: tuple[tuple[float, float], ...]  # (0.99, value)

    @classmethod
    def of(cls, values: Sequence[float]) -> LatencyStats | None:
        finite = sorted(v for v in values if math.isfinite(v))
        if not finite:
            return None
        return cls(
            finite[0],
            finite[-1],
            sum(finite) / len(finite),
            tuple((p, _at(finite, p)) for p in REPORTED_PERCENTILES),
        )


@dataclass(frozen=True, slots=True)
class ServerVerdict:
    """LoadGen's judgement of one Server run (one rate level here)."""

    level: str
    sut_name: str
    settings: ServerSettings
    num_queries: int  # issued
    num_tokens: int
    final_scheduled_s: float  # the final query's scheduled time, from the first's
    final_done_s: float  # when the final query finished, from the first's schedule
    ttft_p_s: float  # the sample at ⌊n·p⌋ (inf when a failure sits there)
    tpot_p_s: float
    early_ttft: EarlyStop
    early_tpot: EarlyStop
    latency: LatencyStats | None
    ttft: LatencyStats | None
    tpot: LatencyStats | None

    @property
    def ttft_met(self) -> bool:
        return self.ttft_p_s <= self.settings.ttft_limit_s

    @property
    def tpot_met(self) -> bool:
        return self.tpot_p_s <= self.settings.tpot_limit_s

    @property
    def performance_met(self) -> bool:
        return self.ttft_met and self.tpot_met

    @property
    def min_duration_met(self) -> bool:
        return self.final_scheduled_s >= self.settings.min_duration_s

    @property
    def min_queries_met(self) -> bool:
        return self.num_queries >= self.settings.min_query_count

    @property
    def early_stopping_met(self) -> bool:
        return self.early_ttft.met and self.early_tpot.met

    @property
    def valid(self) -> bool:
        return (
            self.performance_met
            and self.min_duration_met
            and self.min_queries_met
            and self.early_stopping_met
        )

    @property
    def completed_samples_per_s(self) -> float | None:
        """(samples − 1) / the final query's completion: LoadGen's Server figure."""
        return (self.num_queries - 1) / self.final_done_s if self.final_done_s > 0 else None

    @property
    def completed_tokens_per_s(self) -> float | None:
        return self.num_tokens / self.final_done_s if self.final_done_s > 0 else None

    @property
    def scheduled_samples_per_s(self) -> float | None:
        s = self.final_scheduled_s
        return (self.num_queries - 1) / s if s > 0 else None

    def recommendations(self) -> list[str]:
        """LoadGen's "Recommendations:" lines, each after its " * "."""
        lines = []
        if not self.ttft_met:
            lines.append("TTFT constrain not met: Reduce target QPS to improve latency.")
        if not self.tpot_met:
            lines.append("TPOT constrain not met: Reduce target QPS to improve latency.")
        if not self.min_duration_met:
            lines.append("Increase the target QPS so the loadgen pre-generates more queries.")
        if not self.min_queries_met:
            lines.append(
                "The test exited early, before enough queries were issued.\n"
                "   See the detailed log for why this may have occurred."
            )
        return lines

    def early_stopping_text(self, judged: EarlyStop) -> str:
        """LoadGen's Server early-stopping result for one metric."""
        if judged.met:
            return " * Run successful."
        return (
            f" * Run unsuccessful.\n * Processed {judged.num_judged} queries.\n"
            f" * Would need to run at least {judged.more} more queries,\n"
            " with the run being successful if every additional\n query were under latency."
        )


def _at(ordered: Sequence[float], percentile: float) -> float:
    """LoadGen's percentile: the sample at index ⌊n·p⌋ of the sorted list."""
    return ordered[min(len(ordered) - 1, int(len(ordered) * percentile))]


def _ttft(record: RequestRecord) -> float:
    if record.first_token_ts is None:  # failed before its first token
        return math.inf
    return record.first_token_ts - record.scheduled_ts


def _tpot(record: RequestRecord) -> float:
    """`latency.tpot_s`; a failure is over every limit, a single token 0."""
    if not record.ok or record.first_token_ts is None:
        return math.inf
    tpot = tpot_s(record)
    return 0.0 if tpot is None else tpot


def _done(record: RequestRecord) -> float:
    ends = (record.end_ts, record.last_token_ts, record.first_token_ts, record.sent_ts)
    return next(ts for ts in ends if ts is not None)


def judge_server(
    records: Sequence[RequestRecord], settings: ServerSettings, *, level: str, sut_name: str
) -> ServerVerdict:
    """LoadGen's Server-scenario verdict on one level's `records` (see the module docstring)."""
    if not records:
        raise ValueError("no request to judge")
    ordered = sorted(records, key=lambda r: r.scheduled_ts)
    start, final = ordered[0].scheduled_ts, ordered[-1]
    ttfts = sorted(_ttft(r) for r in records)
    tpots = sorted(_tpot(r) for r in records)
    latencies = [_done(r) - r.scheduled_ts if r.ok else math.inf for r in records]
    p, level_confidence = settings.percentile, settings.confidence
    return ServerVerdict(
        level=level,
        sut_name=sut_name,
        settings=settings,
        num_queries=len(records),
        num_tokens=sum(r.output_tokens or 0 for r in records if r.ok),
        final_scheduled_s=final.scheduled_ts - start,
        final_done_s=_done(final) - start,
        ttft_p_s=_at(ttfts, p),
        tpot_p_s=_at(tpots, p),
        early_ttft=early_stop(ttfts, settings.ttft_limit_s, p, confidence=level_confidence),
        early_tpot=early_stop(tpots, settings.tpot_limit_s, p, confidence=level_confidence),
        latency=LatencyStats.of(latencies),
        ttft=LatencyStats.of(ttfts),
        tpot=LatencyStats.of(tpots),
    )


def judge_level(
    spec: BenchSpec, records: Sequence[RequestRecord], rate: float, level: str, sut_name: str
) -> ServerVerdict | None:
    """bench's hook: `records`, a level at target QPS `rate`, judged when `spec` asks for
    the standard (None when it does not, or nothing was sent)."""
    if spec.standard is None or not records:
        return None
    settings = server_settings(spec.mlperf_model, target_qps=rate)
    return judge_server(records, settings, level=level, sut_name=sut_name)


def constraint_checks(verdict: ServerVerdict) -> list[Check]:
    """`validate --standard mlperf`: each of LoadGen's constraints as a check (a failed one
    fails the checklist)."""
    v, s = verdict, verdict.settings

    def check(name: str, met: bool, detail: str, **figures: float) -> Check:
        status = CheckStatus.PASS if met else CheckStatus.FAIL
        return Check(CheckGroup.PERFORMANCE, f"mlperf.{name}", status, detail, figures)

    p = f"p{s.percentile * 100:g}"
    shown = [_ms(v.ttft_p_s), _ms(v.tpot_p_s)]
    reduce = "" if v.performance_met else ": reduce the target QPS to improve latency"
    early = " ".join(
        f"{name}: {v.early_stopping_text(e).strip().replace(chr(10), ' ')}"
        for name, e in (("TTFT", v.early_ttft), ("TPOT", v.early_tpot))
    )
    return [
        check(
            "performance_constraints",
            v.performance_met,
            f"{p} TTFT {shown[0]} (limit {_ms(s.ttft_limit_s)}), {p} TPOT {shown[1]} "
            f"(limit {_ms(s.tpot_limit_s)}) for {s.model}{reduce}.",
            ttft_limit_s=s.ttft_limit_s,
            tpot_limit_s=s.tpot_limit_s,
        ),
        check(
            "min_duration",
            v.min_duration_met,
            f"the final query was scheduled at {v.final_scheduled_s:.1f} s; MLPerf needs ≥ "
            f"{s.min_duration_s:g} s (--duration {s.min_duration_s:g}s).",
            final_scheduled_s=v.final_scheduled_s,
        ),
        check(
            "min_queries",
            v.min_queries_met,
            f"{v.num_queries} queries issued; MLPerf needs ≥ {s.min_query_count}.",
            num_queries=float(v.num_queries),
        ),
        check(
            "early_stopping",
            v.early_stopping_met,
            early,
            ttft_over=float(v.early_ttft.num_over),
            tpot_over=float(v.early_tpot.num_over),
        ),
    ]


def _ms(seconds: float) -> str:
    return "— (a request failed)" if math.isinf(seconds) else f"{seconds * 1e3:.0f} ms"
