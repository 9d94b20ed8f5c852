"""twin, level 2: `simulate`'s figures, folded in as each request finishes.

Takes each finished request — the client's chunk times and token counts, or how it
failed — and the engine's `RequestTimings`, and each step's cost; gives each load
stage's `StageSummary`, the run's client and engine latency summaries, its
step-time weighted sums (`StepTotals`) and its free-block series, thinned evenly to at
most `SampledSeries.MAX_POINTS` points (`SampledSeries`). Everything goes into
`QuantileSketch`es (percentiles within 0.5 % of numpy's, counts and means exact),
so nothing of a request is kept once it is folded in and a run's memory does not
grow with its number of requests.

Client figures, as `bench` defines them (`analyze.stats.latency`): TTFT = first
chunk delivered − sent; E2E = last chunk delivered − sent; TPOT = (E2E − TTFT) /
(N − 1) per request, N its output tokens; ITL per token: a chunk carrying k tokens
g after the previous one gives k samples of g/k (the first chunk's k − 1 extra
tokens give gaps of 0), so a request's samples sum to E2E − TTFT.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from infertriage.analyze.stats.sketch import QuantileSketch
from infertriage.twin.costmodel import StepBreakdown
from infertriage.twin.request import RequestTimings
from infertriage.twin.results import LatencyPercentiles, StageSummary, sketch_percentiles
from infertriage.twin.traffic import Stage

__all__ = ["ClientLatency", "EngineTally", "SampledSeries", "StageTally", "StepTotals"]


class ClientLatency:
    """The client's TTFT, ITL, TPOT and E2E sketches of one set of requests."""

    __slots__ = ("e2e", "itl", "tpot", "ttft")

    def __init__(self) -> None:
        self.ttft = QuantileSketch()
        self.itl = QuantileSketch()
        self.tpot = QuantileSketch()
        self.e2e = QuantileSketch()

    def add(
        self,
        sent_ts: float,
        chunk_ts: npt.NDArray[np.float64],
        chunk_tokens: npt.NDArray[np.int64] | None,
    ) -> int:
        """One completed request's chunks (delivery times, tokens each: None when one each);
        gives its tokens."""
        ttft = float(chunk_ts[0]) - sent_ts
        e2e = float(chunk_ts[-1]) - sent_ts
        num_tokens = len(chunk_ts) if chunk_tokens is None else int(chunk_tokens.sum())
        self.ttft.add(ttft)
        self.e2e.add(e2e)
        if num_tokens >= 2:
            self.tpot.add((e2e - ttft) / (num_tokens - 1))
        if chunk_tokens is None:  # what the weighted lines below give for ones, without them
            if len(chunk_ts) > 1:
                self.itl.add_many(np.diff(chunk_ts))
            return num_tokens
        if len(chunk_ts) > 1:
            later = chunk_tokens[1:]
            self.itl.add_many(np.diff(chunk_ts) / later, later)
        if chunk_tokens[0] > 1:
            self.itl.add(0.0, int(chunk_tokens[0]) - 1)
        return num_tokens

    def merge(self, other: ClientLatency) -> None:
        for name in self.__slots__:
            getattr(self, name).merge(getattr(other, name))


class StageTally:
    """What became of the requests that arrived in one stage."""

    __slots__ = (
        "last_finish_ts",
        "latency",
        "num_completed",
        "num_errors",
        "num_rejected",
        "num_timed_out",
        "output_tokens",
        "running_weighted",
        "step_s",
    )

    def __init__(self) -> None:
        self.latency = ClientLatency()
        self.num_completed = self.num_errors = self.num_rejected = self.num_timed_out = 0
        self.output_tokens = 0
        self.last_finish_ts = 0.0
        self.step_s = self.running_weighted = 0.0  # steps that started in the stage's time

    def add_steps(self, duration_s: float, num_seqs: int) -> None:
        self.step_s += duration_s
        self.running_weighted += num_seqs * duration_s

    def add_completed(
        self,
        sent_ts: float,
        chunk_ts: npt.NDArray[np.float64],
        chunk_tokens: npt.NDArray[np.int64] | None,
    ) -> None:
        self.output_tokens += self.latency.add(sent_ts, chunk_ts, chunk_tokens)
        self.num_completed += 1
        self.last_finish_ts = max(self.last_finish_ts, float(chunk_ts[-1]))

    @property
    def num_failed(self) -> int:
        return self.num_errors + self.num_rejected + self.num_timed_out

    def summary(
        self, index: int, stage: Stage, start_ts: float, arrival_ts: npt.NDArray[np.float64]
    ) -> StageSummary:
        """The stage's figures; `arrival_ts` are its requests' arrivals."""
        span = float(arrival_ts[-1] - arrival_ts[0]) if len(arrival_ts) > 1 else 0.0
        window = self.last_finish_ts - start_ts
        per_s = 1.0 / window if self.num_completed and window > 0 else 0.0
        lat = self.latency
        return StageSummary(
            index=index,
            rate_rps=stage.rate,
            duration_s=stage.duration_s,
            start_ts=start_ts,
            num_requests=len(arrival_ts),
            num_completed=self.num_completed,
            num_failed=self.num_failed,
            num_timed_out=self.num_timed_out,
            achieved_rate_rps=(len(arrival_ts) - 1) / span if span > 0 else 0.0,
            ttft=sketch_percentiles(lat.ttft),
            itl=sketch_percentiles(lat.itl),
            tpot=sketch_percentiles(lat.tpot),
            e2e=sketch_percentiles(lat.e2e),
            output_throughput_tok_s=self.output_tokens * per_s,
            request_throughput_rps=self.num_completed * per_s,
            mean_running=self.running_weighted / self.step_s if self.step_s > 0 else 0.0,
        )


class EngineTally:
    """The engine's view of the requests it finished normally: TTFT, step gaps, queue time."""

    __slots__ = ("queue", "server_itl", "server_ttft")

    def __init__(self) -> None:
        self.server_ttft = QuantileSketch()
        self.server_itl = QuantileSketch()
        self.queue = QuantileSketch()

    def add(self, timings: RequestTimings) -> None:
        if timings.queue_s is not None:
            self.queue.add(timings.queue_s)
        if timings.ttft_s is not None:
            self.server_ttft.add(timings.ttft_s)
        if len(timings.output_event_ts) > 1:
            self.server_itl.add_many(np.diff(timings.output_event_ts))

    def summaries(self) -> tuple[LatencyPercentiles, LatencyPercentiles, LatencyPercentiles]:
        """Server TTFT, server ITL and queue time."""
        return (
            sketch_percentiles(self.server_ttft),
            sketch_percentiles(self.server_itl),
            sketch_percentiles(self.queue),
        )


class StepTotals:
    """Step-time weighted sums over the run."""

    __slots__ = (
        "comm_s",
        "cpu_s",
        "decode_memory_s",
        "decode_s",
        "gap_s",
        "kv_max",
        "kv_weighted",
        "running_weighted",
        "step_s",
    )

    def __init__(self) -> None:
        self.step_s = self.comm_s = self.cpu_s = self.gap_s = 0.0
        self.decode_s = self.decode_memory_s = 0.0
        self.kv_weighted = self.kv_max = self.running_weighted = 0.0

    def _add_time(self, cost: StepBreakdown, kv_usage: float, num_seqs: int) -> float:
        duration = cost.total_s
        self.step_s += duration
        self.comm_s += cost.comm_s
        self.cpu_s += cost.cpu_s
        self.gap_s += cost.launch_gap_s
        self.kv_weighted += kv_usage * duration
        self.kv_max = max(self.kv_max, kv_usage)
        self.running_weighted += num_seqs * duration
        return duration

    def add(self, cost: StepBreakdown, kv_usage: float, num_seqs: int, has_prefill: bool) -> None:
        duration = self._add_time(cost, kv_usage, num_seqs)
        if not has_prefill:
            self.decode_s += duration
            if cost.bound == "memory":
                self.decode_memory_s += duration

    def add_run(
        self,
        cost: StepBreakdown,
        memory_bound_s: float,
        kv_usage: float,
        kv_usage_s: float,
        num_seqs: int,
    ) -> None:
        """Several decode-only steps summed in `cost`; `kv_usage` is the last (the highest),
        `kv_usage_s` the sum of each step's usage × its length."""
        duration = cost.total_s
        self.step_s += duration
        self.comm_s += cost.comm_s
        self.cpu_s += cost.cpu_s
        self.gap_s += cost.launch_gap_s
        self.kv_weighted += kv_usage_s
        self.kv_max = max(self.kv_max, kv_usage)
        self.running_weighted += num_seqs * duration
        self.decode_s += duration
        self.decode_memory_s += memory_bound_s

    def share(self, part: float) -> float:
        return part / self.step_s if self.step_s > 0 else 0.0


class SampledSeries:
    """A (ts, value) series in bounded memory: every `stride`-th point, the stride doubling
    (and every other kept point dropped) whenever `MAX_POINTS` are kept, and always the
    latest point, so the kept points are an evenly thinned subsequence of what was added
    (a series that falls throughout still does; a short one is kept whole)."""

    MAX_POINTS = 4096

    __slots__ = ("_kept", "_last", "_seen", "_stride")

    def __init__(self) -> None:
        self._kept: list[tuple[float, int]] = []
        self._last: tuple[float, int] | None = None
        self._seen = 0
        self._stride = 1

    def add(self, ts: float, value: int) -> None:
        point = (ts, value)
        if self._seen % self._stride == 0:
            self._kept.append(point)
            if len(self._kept) >= self.MAX_POINTS:
                self._kept = self._kept[::2]
                self._stride *= 2
        self._seen += 1
        self._last = point

    def points(self) -> list[tuple[float, int]]:
        """The kept points in order, the latest one last."""
        kept = list(self._kept)
        if self._last is not None and (not kept or kept[-1] is not self._last):
            kept.append(self._last)
        return kept
