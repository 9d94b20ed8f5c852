"""twin, level 2: the engine core on a virtual clock (`infertriage simulate`).

Takes a `Scenario` and what a load test sends: a workload (any `bench --workload`
spec, or fixed lengths), one rate and a request count or back-to-back `Stage`s, the
arrival process, an optional client time-out and a seed; gives a
`SimulationResult` with a summary per stage. Event-driven: the clock jumps from one
engine step's end to the next, and over idle time straight to the next arrival;
stretches of plain decode steps between two events (an arrival, a finish, a
time-out) are taken at once with `EngineCore.step_decode_run`, and a full step's
running plain decodes as one group (`step(group_decodes=True)`), so 1,000 requests
take a second or two. The front end is a `VirtualFrontend`: a request reaches the
engine once its prompt is tokenized, and each step's output reaches the client
once its chunk is detokenized and serialized, all on one first-come-first-served
worker, plus the real-time twin's measured HTTP hand-off on the way in and out
(`twin.virtual_frontend`).

A client time-out (`timeout_s`) is a client that disconnects: at the first step
boundary at or after `sent + timeout_s` the engine aborts the request
(`EngineCore.abort_requests`: its KV blocks return, its seat frees), and a request
whose last chunk reaches the client after that moment counts as timed out too; a
timed-out request is a failure and is left out of every latency, as an aiohttp
client's total time-out leaves it out of inference-perf's.

Memory does not grow with the number of requests: a request's prompt is built
when it reaches the front end, its chunk times are kept only while it runs, and
when it finishes they are folded into its stage's sketches (`twin.tally`) and
dropped.
"""

from __future__ import annotations

import bisect
import math
import time
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from infertriage.plan import get_gpu, serving_fidelity
from infertriage.schemas import UserError
from infertriage.twin.engine import (
    DecodeRun,
    EngineCore,
    RequestRejectedError,
    StepResult,
    VirtualClock,
)
from infertriage.twin.request import FinishReason, SamplingParams
from infertriage.twin.results import SimulationResult, StageSummary, sketch_percentiles
from infertriage.twin.scenario_model import Scenario
from infertriage.twin.scheduler import RequestOutput
from infertriage.twin.tally import (
    ClientLatency,
    EngineTally,
    SampledSeries,
    StageTally,
    StepTotals,
)
from infertriage.twin.traffic import (
    ArrivalProcess,
    Stage,
    Traffic,
    TrafficRequest,
    plan_traffic,
    resolve_workload,
)
from infertriage.twin.virtual_frontend import FrontendCosts, VirtualFrontend

__all__ = ["Stage", "simulate"]

# Full steps give their plain decodes as one group (`EngineCore.step(group_decodes=True)`),
# as decode runs do; tests turn both off to compare with the engine's single steps.
_GROUP_DECODES = True


class _Client:
    """What the load client holds of one request in flight."""

    __slots__ = ("arrival_ts", "chunk_ts", "in_engine", "multi", "stage")

    def __init__(self, arrival_ts: float, stage: int) -> None:
        self.arrival_ts = arrival_ts
        self.stage = stage
        self.chunk_ts = array("d")  # delivery time of each chunk
        self.multi: list[tuple[int, int]] = []  # (chunk, tokens) of chunks of more than one
        self.in_engine = False

    def add_chunk(self, ts: float, num_tokens: int) -> None:
        if num_tokens != 1:
            self.multi.append((len(self.chunk_ts), num_tokens))
        self.chunk_ts.append(ts)

    def chunk_tokens(self) -> npt.NDArray[np.int64] | None:
        """Each chunk's tokens; None when every chunk carries one."""
        if not self.multi:
            return None
        tokens = np.ones(len(self.chunk_ts), dtype=np.int64)
        for index, count in self.multi:
            tokens[index] = count
        return tokens


class _Run:
    def __init__(
        self, engine: EngineCore, clock: VirtualClock, traffic: Traffic, timeout_s: float | None
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.traffic = traffic
        self.frontend = VirtualFrontend(FrontendCosts.from_settings(engine.scenario.frontend))
        self.clients: dict[str, _Client] = {}
        self.pending: deque[tuple[float, TrafficRequest]] = deque()  # tokenized, not yet in
        self.deadlines: deque[tuple[float, str]] = deque()  # in arrival order
        self.timeout_s = timeout_s
        self.next_index = 0
        self.next_arrival_ts = self._arrival_ts(0)  # the next request's send (inf: none left)
        self.num_done = 0
        self.free_blocks = SampledSeries()
        self.totals = StepTotals()
        self.stages = [StageTally() for _ in traffic.stages]
        self.server = EngineTally()
        self.frontend_wait_s = 0.0
        self.last_ts = 0.0

    # ------------------------------------------------------------------ arrivals
    def _tokenize_next(self) -> None:
        index = self.next_index
        self.next_index += 1
        self.next_arrival_ts = self._arrival_ts(index + 1)
        item = self.traffic.request(index)
        client = _Client(item.arrival_ts, int(self.traffic.stage_of[index]))
        ready_ts = self.frontend.tokenize(item.arrival_ts, len(item.prompt_token_ids))
        self.frontend_wait_s += ready_ts - item.arrival_ts
        self.clients[item.request_id] = client
        self.pending.append((ready_ts, item))
        if self.timeout_s is not None:
            self.deadlines.append((item.arrival_ts + self.timeout_s, item.request_id))

    def _arrival_ts(self, index: int) -> float:
        traffic = self.traffic
        return float(traffic.arrival_ts[index]) if index < len(traffic) else float("inf")

    def _tokenize_until(self, ts: float) -> None:
        while self.next_arrival_ts < ts:
            self._tokenize_next()

    def _admit(self, now_ts: float) -> None:
        while self.pending and self.pending[0][0] <= now_ts:
            ready_ts, item = self.pending.popleft()
            client = self.clients.get(item.request_id)
            if client is None:  # the client gave up while its prompt was tokenized
                continue
            try:
                self.engine.add_request(
                    item.request_id,
                    item.prompt_token_ids,
                    SamplingParams(max_tokens=item.max_tokens, ignore_eos=True),
                    arrival_ts=ready_ts,
                )
            except RequestRejectedError:
                self.stages[client.stage].num_rejected += 1
                self._drop(item.request_id, ready_ts)
                continue
            client.in_engine = True

    # ------------------------------------------------------------------ time-outs
    def _next_deadline(self) -> float:
        deadlines = self.deadlines
        while deadlines and deadlines[0][1] not in self.clients:
            deadlines.popleft()
        return deadlines[0][0] if deadlines else float("inf")

    def _expire(self, now_ts: float) -> None:
        """Clients whose time-out has passed disconnect; the engine aborts their requests."""
        aborted: list[str] = []
        while self._next_deadline() <= now_ts:
            deadline_ts, request_id = self.deadlines.popleft()
            client = self.clients[request_id]
            if client.in_engine:
                aborted.append(request_id)
            self.stages[client.stage].num_timed_out += 1
            self._drop(request_id, deadline_ts)
        if aborted:
            self.engine.abort_requests(aborted)
            self.free_blocks.add(now_ts, self.engine.get_stats().num_free_blocks)

    def _drop(self, request_id: str, end_ts: float) -> None:
        del self.clients[request_id]
        self.num_done += 1
        self.last_ts = max(self.last_ts, end_ts)

    # ------------------------------------------------------------------ outputs
    def _stage_at(self, ts: float) -> StageTally:
        """The stage whose time `ts` falls in (the last one after the load ends)."""
        return self.stages[max(0, bisect.bisect_right(self.traffic.stage_start_ts, ts) - 1)]

    def _on_step(self, result: StepResult) -> None:
        shape = result.shape
        self.totals.add(result.cost, result.kv_usage, shape.num_seqs, bool(shape.prefill_chunks))
        self._stage_at(result.start_ts).add_steps(result.duration_s, shape.num_seqs)
        if result.decoded_ids:  # one-token chunks, first in the batch
            start_ts = self.frontend.deliver_batch(result.end_ts, len(result.decoded_ids))
            self._one_chunk_each(result.decoded_ids, start_ts)
            free = result.stats.num_free_blocks
            for output in result.decoded_finished:
                last_ts = self.clients[output.request_id].chunk_ts[-1]
                self._on_finish(output, last_ts, result.end_ts, free)
        for output in result.outputs:
            client = self.clients[output.request_id]
            delivered_ts = self.frontend.deliver(result.end_ts, len(output.new_token_ids))
            if output.new_token_ids:
                client.add_chunk(delivered_ts, len(output.new_token_ids))
            if output.timings is not None:
                self._on_finish(output, delivered_ts, result.end_ts, result.stats.num_free_blocks)

    def _on_finish(
        self, output: RequestOutput, finish_ts: float, end_ts: float, num_free_blocks: int
    ) -> None:
        """A request the engine finished (or failed), its last chunk delivered at `finish_ts`."""
        client = self.clients[output.request_id]
        tally = self.stages[client.stage]
        self.free_blocks.add(end_ts, num_free_blocks)
        if output.finish_reason is FinishReason.ERROR:
            tally.num_errors += 1
        else:
            assert output.timings is not None
            self.server.add(output.timings)
            timeout = self.timeout_s
            if timeout is not None and finish_ts > client.arrival_ts + timeout:
                tally.num_timed_out += 1  # its last chunk came after the client left
                finish_ts = client.arrival_ts + timeout
            elif len(client.chunk_ts):
                chunks = np.frombuffer(client.chunk_ts, dtype=np.float64)
                tally.add_completed(client.arrival_ts, chunks, client.chunk_tokens())
        self._drop(output.request_id, finish_ts)

    def _one_chunk_each(self, request_ids: Sequence[str], start_ts: float) -> None:
        """One step's one-token chunks, serialized one after another from `start_ts`."""
        chunk_s = self.frontend.costs.chunk_s(1)
        clients = self.clients
        for k, request_id in enumerate(request_ids, 1):
            clients[request_id].chunk_ts.append(start_ts + k * chunk_s)

    def _on_run(self, run: DecodeRun) -> None:
        batch = len(run.request_ids)
        self.totals.add_run(run.cost, run.memory_bound_s, run.kv_usage, run.kv_usage_s, batch)
        self._stage_at(run.start_ts).add_steps(run.cost.total_s, batch)
        starts = []
        deliver = self.frontend.deliver_batch
        for end_ts in run.step_end_ts:
            if self.next_arrival_ts < end_ts:  # they reach the front end before these chunks
                self._tokenize_until(end_ts)
            starts.append(deliver(end_ts, batch))
        clients = self.clients
        if len(starts) == 1:  # what the arrays below give for one step, without them
            self._one_chunk_each(run.request_ids, starts[0])
        else:
            chunk_s = self.frontend.costs.chunk_s(1)
            offsets = np.arange(1, batch + 1)[:, None] * chunk_s
            delivered = offsets + np.asarray(starts)[None, :]
            width = delivered.shape[1] * delivered.itemsize  # one request's row, in bytes
            rows = memoryview(delivered.tobytes())
            for k, request_id in enumerate(run.request_ids):
                clients[request_id].chunk_ts.frombytes(rows[k * width : (k + 1) * width])
        for output in run.finished:
            last_ts = clients[output.request_id].chunk_ts[-1]
            self._on_finish(output, last_ts, run.end_ts, run.num_free_blocks)

    # ------------------------------------------------------------------ the loop
    def _horizon(self) -> float:
        """The next moment something reaches the front end or the engine, or a client leaves."""
        horizon = min(self._next_deadline(), self.next_arrival_ts)
        if self.pending:
            horizon = min(horizon, self.pending[0][0])
        return horizon

    def _next_stage_ts(self) -> float:
        """When the stage after the one the engine's next step starts in begins (inf: none)."""
        starts = self.traffic.stage_start_ts
        k = bisect.bisect_right(starts, max(self.clock.now(), self.engine.last_end_ts))
        return starts[k] if k < len(starts) else math.inf

    def _step_engine(self) -> None:
        engine, clock = self.engine, self.clock
        # a run's steps all start in one stage, whose tally takes them: it stops at the next
        # stage's start, and takes no step past it (`batch_kept_until`)
        stage_ts = self._next_stage_ts()
        run = engine.step_decode_run(
            min(self._horizon(), stage_ts), batch_kept_until=min(self._next_deadline(), stage_ts)
        )
        if run is not None:
            clock.advance_to(run.end_ts)
            self._on_run(run)
            return
        result = engine.step(group_decodes=_GROUP_DECODES)
        clock.advance_to(result.end_ts)
        self._tokenize_until(result.end_ts)  # they reached the front end first
        self._on_step(result)

    def loop(self) -> None:
        clock = self.clock
        total = len(self.traffic)
        while self.num_done < total:
            self._expire(clock.now())
            self._admit(clock.now())
            if self.engine.has_unfinished_requests():
                self._step_engine()
            elif self.pending:
                clock.advance_to(self.pending[0][0])
            elif self.next_index < total:
                self._tokenize_next()
            else:
                break


def simulate(
    scenario: Scenario,
    *,
    rate: float | None = None,
    num_requests: int | None = None,
    stages: Sequence[Stage] | None = None,
    workload: str | None = None,
    input_len: int | None = None,
    output_len: int | None = None,
    arrivals: ArrivalProcess = "poisson",
    timeout_s: float | None = None,
    seed: int | None = None,
) -> SimulationResult:
    """Run the load through the scenario's engine on a virtual clock: `num_requests` at
    `rate` req/s, or back-to-back `stages`, or a trace's own times (`workload`)."""
    wall_start = time.perf_counter()
    if scenario.data_parallel.size > 1 or scenario.disaggregation is not None:
        raise UserError(
            f"scenario {scenario.source} runs several engines (data_parallel or "
            "disaggregation), which only the real-time twin runs: serve it with "
            "`infertriage twin --scenario ...` and load it over HTTP instead of simulating it."
        )
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive, not {timeout_s}")
    ws = resolve_workload(workload, input_len, output_len)
    clock = VirtualClock()
    engine = EngineCore(scenario, clock)
    traffic = plan_traffic(
        ws,
        max_model_len=engine.max_model_len,
        vocab_size=engine.vocab_size,
        rate=rate,
        num_requests=num_requests,
        stages=stages,
        arrivals=arrivals,
        seed=scenario.seed if seed is None else seed,
    )
    run = _Run(engine, clock, traffic, timeout_s)
    run.loop()
    fidelity = serving_fidelity(get_gpu(scenario.gpu)).statement()
    asked = _Asked(scenario.source, ws.text, input_len, output_len, arrivals, timeout_s, fidelity)
    return _result(run, asked, time.perf_counter() - wall_start)


@dataclass(frozen=True, slots=True)
class _Asked:
    """What the run was asked, as the result repeats it."""

    scenario: str
    workload: str
    input_len: int | None
    output_len: int | None
    arrivals: str
    timeout_s: float | None
    fidelity: str  # `plan.serving_fidelity`'s statement for the scenario's GPU


def _stage_summaries(run: _Run) -> list[StageSummary]:
    traffic = run.traffic
    return [
        tally.summary(
            k, stage, traffic.stage_start_ts[k], traffic.arrival_ts[traffic.stage_of == k]
        )
        for k, (tally, stage) in enumerate(zip(run.stages, traffic.stages, strict=True))
    ]


def _mean_rate(stages: Sequence[Stage]) -> float:
    total_s = sum(stage.duration_s for stage in stages)
    if total_s <= 0:
        return stages[0].rate
    return sum(stage.rate * stage.duration_s for stage in stages) / total_s


def _result(run: _Run, asked: _Asked, wall_s: float) -> SimulationResult:
    engine = run.engine
    stats = engine.get_stats()
    gpu = engine.get_gpu_counters()
    totals = run.totals
    duration = run.last_ts
    per_s = 1.0 / duration if duration > 0 else 0.0
    client = ClientLatency()
    for tally in run.stages:
        client.merge(tally.latency)
    server_ttft, server_itl, queue = run.server.summaries()
    ttft = sketch_percentiles(client.ttft)
    num_completed = sum(t.num_completed for t in run.stages)
    spec = stats.spec_decode
    num_requests = len(run.traffic)
    return SimulationResult(
        scenario=asked.scenario,
        rate_rps=_mean_rate(run.traffic.stages),
        num_requests=num_requests,
        input_len=asked.input_len,
        output_len=asked.output_len,
        arrivals=asked.arrivals,
        workload=asked.workload,
        timeout_s=asked.timeout_s,
        duration_s=duration,
        wall_s=wall_s,
        speedup=duration / wall_s if wall_s > 0 else 0.0,
        num_completed=num_completed,
        num_errors=sum(t.num_errors for t in run.stages),
        num_timed_out=sum(t.num_timed_out for t in run.stages),
        num_rejected=sum(t.num_rejected for t in run.stages),
        ttft=ttft,
        itl=sketch_percentiles(client.itl),
        tpot=sketch_percentiles(client.tpot),
        e2e=sketch_percentiles(client.e2e),
        server_ttft=server_ttft,
        server_itl=server_itl,
        queue_time=queue,
        output_throughput_tok_s=sum(t.output_tokens for t in run.stages) * per_s,
        request_throughput_rps=num_completed * per_s,
        mean_queue_s=queue.mean_s,
        queue_share_of_ttft=queue.mean_s / ttft.mean_s if ttft.mean_s > 0 else 0.0,
        mean_frontend_wait_s=run.frontend_wait_s / max(1, run.next_index),
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
        free_blocks_trajectory=run.free_blocks.points(),
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
        stages=_stage_summaries(run),
        fidelity=asked.fidelity,
        offload_hit_rate=stats.offload.hit_rate if stats.offload else None,
        offload_stored_blocks=stats.offload.stored_blocks if stats.offload else 0,
        offload_loaded_blocks=stats.offload.loaded_blocks if stats.offload else 0,
    )
