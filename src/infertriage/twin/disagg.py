"""twin, level 2: prefill/decode disaggregation (xPyD) with a KV transfer over a link.

Takes a `Scenario` with a `disaggregation` section; gives `DisaggregatedFleet`,
which the HTTP server drives as it drives data-parallel ranks. A request goes
to the least loaded prefill instance, which runs its prompt as vLLM's P/D proxy
sends it there (`max_tokens` 1; that token is not streamed). Its KV cache
(prompt tokens × the model's KV bytes per token over all tensor-parallel
shards) then moves to the least loaded decode instance over that instance's
link: transfers queue on the link in arrival order, each taking
`bytes / link_gb_s` of it plus `link_latency_ms`, after a NIXL post of
`transfer_setup_ms`. The decode instance admits it without recomputing the
prompt (all but its last token computed, as vLLM's NIXL connector leaves it)
and streams from its first step, so the client's TTFT is the prefill queue,
the prefill, the transfer and one decode step.

Metrics: every series carries `engine_type` ("prefill" | "decode") and
`engine` (the index within its role); a decode instance counts the requests
whose KV is in transit in `vllm:num_requests_waiting` (vLLM V1 keeps
WAITING_FOR_REMOTE_KVS requests in its waiting queue) and observes each
transfer in vLLM's NIXL series (`vllm:nixl_xfer_time_seconds`: from the post to
the last byte, queueing on the link included; `vllm:nixl_post_time_seconds`;
`vllm:nixl_bytes_transferred`; `vllm:nixl_num_failed_transfers`, 0). A decode
instance's TTFT counts from when it got the request (the prefill's end).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infertriage.twin.driver import AddCommand
from infertriage.twin.engine import Clock, StepResult
from infertriage.twin.prom import NixlMetrics
from infertriage.twin.ranks import Deliver, Fleet, Instance, make_instances, make_metrics
from infertriage.twin.request import FinishReason, SamplingParams
from infertriage.twin.scenario_model import DisaggregationSettings, Scenario
from infertriage.twin.scheduler import RequestOutput

__all__ = ["DisaggregatedFleet", "KvLink", "Transfer"]

_PREFILL_PARAMS = SamplingParams(max_tokens=1)


@dataclass(frozen=True, slots=True)
class Transfer:
    """One KV transfer on the engines' clock: posted, last byte in, its bytes."""

    posted_ts: float
    done_ts: float
    num_bytes: int

    @property
    def duration_s(self) -> float:
        return self.done_ts - self.posted_ts


class KvLink:
    """A decode instance's link: transfers take their turn, each `bytes / bandwidth` long."""

    def __init__(self, settings: DisaggregationSettings) -> None:
        self.bytes_per_s = settings.link_gb_s * 1e9
        self.latency_s = settings.link_latency_ms * 1e-3
        self.setup_s = settings.transfer_setup_ms * 1e-3
        self.free_ts = 0.0

    def schedule(self, ready_ts: float, num_bytes: int) -> Transfer:
        posted = ready_ts + self.setup_s
        start = max(posted, self.free_ts)
        self.free_ts = start + num_bytes / self.bytes_per_s
        return Transfer(posted, self.free_ts + self.latency_s, num_bytes)


def _least_loaded(instances: list[Instance]) -> Instance:
    return min(instances, key=lambda i: (i.load().score, i.index))


class DisaggregatedFleet(Fleet):
    """`prefill_instances` prefill engines and `decode_instances` decode engines."""

    def __init__(self, scenario: Scenario, model_name: str, clock: Clock) -> None:
        pd = scenario.disaggregation
        assert pd is not None
        self.prefill = make_instances(scenario, clock, pd.prefill_instances, "prefill")
        self.decode = make_instances(scenario, clock, pd.decode_instances, "decode")
        metrics = make_metrics(scenario, model_name, self.prefill[0].engine, roles=True)
        for instance in (*self.prefill, *self.decode):
            instance.metrics = metrics.add_engine(instance.stats, instance.index, instance.role)
        super().__init__([*self.prefill, *self.decode], metrics)
        self.links = [KvLink(pd) for _ in self.decode]
        self.nixl: list[NixlMetrics] = [metrics.add_nixl(d.index) for d in self.decode]
        hardware = self.first.hardware
        self.kv_bytes_per_token = hardware.kv_bytes_per_token * hardware.tensor_parallel
        self._deliver: Deliver | None = None
        self._prefilled: dict[str, asyncio.Future[RequestOutput]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(
        self,
        loop: asyncio.AbstractEventLoop,
        deliver: Deliver,
        on_step: Callable[[StepResult], None],
    ) -> None:
        self._deliver = deliver
        for instance in self.prefill:
            instance.start(loop, self._on_prefilled, on_step)
        for instance in self.decode:
            instance.start(loop, deliver, on_step)

    def _on_prefilled(self, outputs: Sequence[RequestOutput]) -> None:
        for output in outputs:
            future = self._prefilled.get(output.request_id)
            if output.finished and future is not None and not future.done():
                future.set_result(output)

    def submit(self, command: AddCommand) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(command))
        self._tasks[command.request_id] = task
        task.add_done_callback(lambda _t: self._tasks.pop(command.request_id, None))

    async def _serve(self, command: AddCommand) -> None:
        rid = command.request_id
        output = await self._run_prefill(command)
        if output.finish_reason is FinishReason.ERROR:  # the client's stream gets the error
            if self._deliver is not None:
                self._deliver([output])
            return
        index = _least_loaded(self.decode).index
        decode = self.decode[index]
        transfer = self.links[index].schedule(
            output.ts, len(command.prompt_token_ids) * self.kv_bytes_per_token
        )
        decode.outstanding += 1
        decode.arriving += 1
        try:
            await asyncio.sleep(max(0.0, transfer.done_ts - self.now()))
        except asyncio.CancelledError:
            decode.outstanding -= 1
            raise
        finally:
            decode.arriving -= 1
        self.nixl[index].observe_transfer(
            transfer.duration_s, self.links[index].setup_s, transfer.num_bytes
        )
        self.owner[rid] = decode
        assert decode.driver is not None
        decode.driver.submit(
            dataclasses.replace(
                command,
                arrival_ts=transfer.done_ts,
                num_computed_tokens=len(command.prompt_token_ids) - 1,
                first_seen_ts=output.ts,
            )
        )

    async def _run_prefill(self, command: AddCommand) -> RequestOutput:
        rid = command.request_id
        prefill = _least_loaded(self.prefill)
        future: asyncio.Future[RequestOutput] = asyncio.get_running_loop().create_future()
        self._prefilled[rid] = future
        prefill.outstanding += 1
        assert prefill.driver is not None
        prefill.driver.submit(dataclasses.replace(command, params=_PREFILL_PARAMS))
        try:
            return await future
        except asyncio.CancelledError:
            prefill.driver.abort(rid)
            raise
        finally:
            prefill.outstanding -= 1
            self._prefilled.pop(rid, None)

    def finish(self, request_id: str, abort: bool) -> None:
        task = self._tasks.pop(request_id, None)
        if task is not None and not task.done():
            task.cancel()
        super().finish(request_id, abort)

    def stop(self) -> None:
        for task in list(self._tasks.values()):
            with contextlib.suppress(RuntimeError):
                task.cancel()
        super().stop()
