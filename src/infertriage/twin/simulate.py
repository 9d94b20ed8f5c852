"""twin, level 2: the engine core on a virtual clock (`infertriage simulate`).

Takes a `Scenario`, a rate, a request count and optional fixed lengths; gives a
`SimulationResult`. Event-driven: the clock jumps from one engine step's end to
the next, and over idle time straight to the next arrival; stretches of plain
decode steps between two events (an arrival, a finish) are taken at once with
`EngineCore.step_decode_run`, so 1,000 requests take a few seconds. The front end
is a `VirtualFrontend`: a request reaches the engine once its prompt is tokenized,
and each step's output reaches the client once its chunk is detokenized and
serialized, all on one first-come-first-served worker, plus the real-time twin's
measured HTTP hand-off on the way in and out (`twin.virtual_frontend`).
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np

from infertriage.twin.costmodel import StepBreakdown
from infertriage.twin.engine import DecodeRun, EngineCore, StepResult, VirtualClock
from infertriage.twin.request import FinishReason, RequestTimings, SamplingParams
from infertriage.twin.results import SimulationResult, percentiles
from infertriage.twin.scenario_model import Scenario
from infertriage.twin.scheduler import RequestOutput
from infertriage.twin.traffic import ArrivalProcess, TrafficRequest, make_traffic
from infertriage.twin.virtual_frontend import FrontendCosts, VirtualFrontend

__all__ = ["simulate"]


class _Client:
    """What the load client sees of one request."""

    __slots__ = ("arrival_ts", "chunk_ts", "engine_arrival_ts", "error", "finish_ts")

    def __init__(self, arrival_ts: float) -> None:
        self.arrival_ts = arrival_ts
        self.engine_arrival_ts = arrival_ts
        self.chunk_ts: list[float] = []
        self.finish_ts = 0.0
        self.error = False


class _StepTotals:
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
        self, cost: StepBreakdown, memory_bound_s: float, kv_usage: float, num_seqs: int
    ) -> None:
        """Several decode-only steps summed in `cost`."""
        self.decode_s += self._add_time(cost, kv_usage, num_seqs)
        self.decode_memory_s += memory_bound_s

    def share(self, part: float) -> float:
        return part / self.step_s if self.step_s > 0 else 0.0


class _Run:
    def __init__(self, engine: EngineCore, clock: VirtualClock, traffic: list[TrafficRequest]):
        self.engine = engine
        self.clock = clock
        self.traffic = traffic
        self.frontend = VirtualFrontend(FrontendCosts.from_settings(engine.scenario.frontend))
        self.clients: dict[str, _Client] = {}
        self.pending: deque[tuple[float, TrafficRequest]] = deque()  # tokenized, not yet in
        self.next_index = 0
        self.num_done = 0
        self.timings: list[RequestTimings] = []
        self.free_blocks: list[tuple[float, int]] = []
        self.totals = _StepTotals()

    def _tokenize_next(self) -> None:
        item = self.traffic[self.next_index]
        self.next_index += 1
        client = _Client(item.arrival_ts)
        client.engine_arrival_ts = self.frontend.tokenize(
            item.arrival_ts, len(item.prompt_token_ids)
        )
        self.clients[item.request_id] = client
        self.pending.append((client.engine_arrival_ts, item))

    def _tokenize_until(self, ts: float) -> None:
        while self.next_index < len(self.traffic) and self.traffic[self.next_index].arrival_ts < ts:
            self._tokenize_next()

    def _admit(self, now_ts: float) -> None:
        while self.pending and self.pending[0][0] <= now_ts:
            ready_ts, item = self.pending.popleft()
            self.engine.add_request(
                item.request_id,
                item.prompt_token_ids,
                SamplingParams(max_tokens=item.max_tokens, ignore_eos=True),
                arrival_ts=ready_ts,
            )

    def _on_step(self, result: StepResult) -> None:
        shape = result.shape
        self.totals.add(result.cost, result.kv_usage, shape.num_seqs, bool(shape.prefill_chunks))
        for output in result.outputs:
            client = self.clients[output.request_id]
            delivered_ts = self.frontend.deliver(result.end_ts, len(output.new_token_ids))
            if output.new_token_ids:
                client.chunk_ts.append(delivered_ts)
            if output.timings is not None:
                self._on_finish(client, output, result.end_ts, result.stats.num_free_blocks)
                client.finish_ts = delivered_ts

    def _on_finish(
        self, client: _Client, output: RequestOutput, end_ts: float, num_free_blocks: int
    ) -> None:
        client.error = output.finish_reason is FinishReason.ERROR
        if output.timings is not None:
            self.timings.append(output.timings)
        self.free_blocks.append((end_ts, num_free_blocks))
        self.num_done += 1

    def _on_run(self, run: DecodeRun) -> None:
        batch = len(run.request_ids)
        self.totals.add_run(run.cost, run.memory_bound_s, run.kv_usage, batch)
        starts = []
        for end_ts in run.step_end_ts:
            self._tokenize_until(end_ts)  # arrivals reach the front end before these chunks
            starts.append(self.frontend.deliver_batch(end_ts, batch))
        chunk_s = self.frontend.costs.chunk_s(1)
        offsets = np.arange(1, batch + 1)[:, None] * chunk_s
        delivered = (offsets + np.asarray(starts)[None, :]).tolist()
        clients = self.clients
        for request_id, times in zip(run.request_ids, delivered, strict=True):
            clients[request_id].chunk_ts.extend(times)
        for output in run.finished:
            client = self.clients[output.request_id]
            self._on_finish(client, output, run.end_ts, run.stats.num_free_blocks)
            client.finish_ts = client.chunk_ts[-1]

    def _horizon(self) -> float:
        """The next moment something reaches the front end or the engine."""
        horizon = float("inf")
        if self.next_index < len(self.traffic):
            horizon = self.traffic[self.next_index].arrival_ts
        if self.pending:
            horizon = min(horizon, self.pending[0][0])
        return horizon

    def loop(self) -> None:
        engine, clock = self.engine, self.clock
        total = len(self.traffic)
        while self.num_done < total:
            self._admit(clock.now())
            if engine.has_unfinished_requests():
                run = engine.step_decode_run(self._horizon())
                if run is not None:
                    clock.advance_to(run.end_ts)
                    self._on_run(run)
                    continue
                result = engine.step()
                clock.advance_to(result.end_ts)
                self._tokenize_until(result.end_ts)  # they reached the front end first
                self._on_step(result)
            elif self.pending:
                clock.advance_to(self.pending[0][0])
            elif self.next_index < total:
                self._tokenize_next()
            else:
                break


def simulate(
    scenario: Scenario,
    *,
    rate: float,
    num_requests: int,
    input_len: int | None = None,
    output_len: int | None = None,
    arrivals: ArrivalProcess = "poisson",
    seed: int | None = None,
) -> SimulationResult:
    """Run `num_requests` requests at `rate` req/s through the scenario's engine."""
    wall_start = time.perf_counter()
    clock = VirtualClock()
    engine = EngineCore(scenario, clock)
    traffic = make_traffic(
        rate=rate,
        num_requests=num_requests,
        max_model_len=engine.max_model_len,
        vocab_size=engine.vocab_size,
        input_len=input_len,
        output_len=output_len,
        arrivals=arrivals,
        seed=scenario.seed if seed is None else seed,
    )
    run = _Run(engine, clock, traffic)
    run.loop()
    wall_s = time.perf_counter() - wall_start
    return _result(run, scenario, rate, input_len, output_len, arrivals, wall_s)


def _client_latencies(run: _Run) -> tuple[list[float], list[float], list[float]]:
    ttft, e2e = [], []
    gaps: list[np.ndarray] = []
    for client in run.clients.values():
        if client.error or not client.chunk_ts:
            continue
        ttft.append(client.chunk_ts[0] - client.arrival_ts)
        e2e.append(client.finish_ts - client.arrival_ts)
        gaps.append(np.diff(client.chunk_ts))
    itl = np.concatenate(gaps).tolist() if gaps else []
    return ttft, itl, e2e


def _result(  # noqa: PLR0917 — the run and the parameters it was given
    run: _Run,
    scenario: Scenario,
    rate: float,
    input_len: int | None,
    output_len: int | None,
    arrivals: str,
    wall_s: float,
) -> SimulationResult:
    engine = run.engine
    stats = engine.get_stats()
    gpu = engine.get_gpu_counters()
    totals = run.totals
    duration = max((c.finish_ts for c in run.clients.values()), default=0.0)
    per_s = 1.0 / duration if duration > 0 else 0.0
    ttft, itl, e2e = _client_latencies(run)
    ok = [t for t in run.timings if t.finish_reason is not FinishReason.ERROR]
    queue = [q for t in ok if (q := t.queue_s) is not None]
    server_ttft = [x for t in ok if (x := t.ttft_s) is not None]
    event_gaps = [np.diff(t.output_event_ts) for t in ok if len(t.output_event_ts) > 1]
    server_itl = np.concatenate(event_gaps).tolist() if event_gaps else []
    ttft_summary = percentiles(ttft)
    queue_summary = percentiles(queue)
    spec = stats.spec_decode
    waits = [c.engine_arrival_ts - c.arrival_ts for c in run.clients.values()]
    return SimulationResult(
        scenario=scenario.source,
        rate_rps=rate,
        num_requests=len(run.traffic),
        input_len=input_len,
        output_len=output_len,
        arrivals=arrivals,
        duration_s=duration,
        wall_s=wall_s,
        speedup=duration / wall_s if wall_s > 0 else 0.0,
        num_completed=len(ok),
        num_errors=len(run.timings) - len(ok),
        ttft=ttft_summary,
        itl=percentiles(itl),
        e2e=percentiles(e2e),
        server_ttft=percentiles(server_ttft),
        server_itl=percentiles(server_itl),
        queue_time=queue_summary,
        output_throughput_tok_s=sum(t.num_output_tokens for t in ok) * per_s,
        request_throughput_rps=len(ok) * per_s,
        mean_queue_s=queue_summary.mean_s,
        queue_share_of_ttft=(
            queue_summary.mean_s / ttft_summary.mean_s if ttft_summary.mean_s > 0 else 0.0
        ),
        mean_frontend_wait_s=sum(waits) / len(waits) if waits else 0.0,
        num_preemptions=stats.num_preemptions,
        num_gpu_blocks=stats.num_gpu_blocks,
        kv_usage_mean=totals.share(totals.kv_weighted),
        kv_usage_max=totals.kv_max,
        prefix_cache_hit_rate=(
            stats.prefix_cache_hits / stats.prefix_cache_queries
            if stats.prefix_cache_queries
            else 0.0
        ),
        num_leaked_blocks=stats.num_leaked_blocks,
        free_blocks_trajectory=run.free_blocks,
        mean_running=totals.share(totals.running_weighted),
        spec_acceptance_rate=spec.acceptance_rate,
        spec_acceptance_per_pos=[
            n / spec.num_drafts for n in spec.num_accepted_tokens_per_pos if spec.num_drafts
        ],
        spec_mean_accepted_tokens=(
            spec.num_accepted_tokens / spec.num_drafts if spec.num_drafts else None
        ),
        comm_share=totals.share(totals.comm_s),
        launch_gap_share=totals.share(totals.gap_s),
        cpu_share=totals.share(totals.cpu_s),
        decode_memory_bound_share=(
            totals.decode_memory_s / totals.decode_s if totals.decode_s > 0 else 0.0
        ),
        gpu_util=min(1.0, gpu.util_busy_s * per_s),
        sm_active=min(1.0, gpu.sm_active_s * per_s),
        tensor_active=min(1.0, gpu.tensor_active_s * per_s),
        dram_active=min(1.0, gpu.dram_active_s * per_s),
        frontend_busy=min(1.0, run.frontend.busy_s * per_s),
    )
