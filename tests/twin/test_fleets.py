"""twin.ranks and twin.disagg without HTTP: aborts reach the engine that holds the request,
a request cancelled while its KV is on the link never reaches decode, a failed prefill
reaches the client. Engine threads run in real time; nothing waits on a latency figure,
only on a state the fleet must reach (bounded by a generous deadline)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from infertriage.twin.disagg import DisaggregatedFleet
from infertriage.twin.driver import AddCommand
from infertriage.twin.engine import MonotonicClock
from infertriage.twin.ranks import DataParallelFleet, Fleet
from infertriage.twin.request import FinishReason, SamplingParams
from infertriage.twin.scenario import scenario_from_mapping
from infertriage.twin.scheduler import RequestOutput

_DEADLINE_S = 10.0


async def _until(condition: Callable[[], bool]) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + _DEADLINE_S
    while not condition():
        assert loop.time() < end, "the fleet did not reach the state in time"
        await asyncio.sleep(0.005)


def _command(fleet: Fleet, request_id: str, max_tokens: int = 4000) -> AddCommand:
    prompt = tuple(range(1, 257))
    return AddCommand(request_id, prompt, SamplingParams(max_tokens=max_tokens), fleet.now())


def _run(fleet: Fleet, body: Callable[[list[RequestOutput]], Awaitable[None]]) -> None:
    delivered: list[RequestOutput] = []

    def deliver(outputs: Sequence[RequestOutput]) -> None:
        delivered.extend(outputs)

    async def main() -> None:
        fleet.start(asyncio.get_running_loop(), deliver, lambda _step: None)
        try:
            await body(delivered)
        finally:
            fleet.stop()

    asyncio.run(main())


def test_an_abort_goes_to_the_rank_that_owns_the_request() -> None:
    scenario = scenario_from_mapping({"data_parallel": {"size": 2, "balancer": "round_robin"}})
    fleet = DataParallelFleet(scenario, "m", MonotonicClock())
    first, second = fleet.instances

    async def body(_delivered: list[RequestOutput]) -> None:
        fleet.submit(_command(fleet, "a"))
        fleet.submit(_command(fleet, "b"))
        assert fleet.owner == {"a": first, "b": second}
        await _until(lambda: first.stats().num_running_reqs == second.stats().num_running_reqs == 1)
        fleet.finish("b", abort=True)
        await _until(lambda: second.stats().num_running_reqs == 0)
        assert first.stats().num_running_reqs == 1  # rank 0's request runs on
        assert (first.outstanding, second.outstanding) == (1, 0)
        fleet.finish("a", abort=True)

    _run(fleet, body)


def test_a_request_cancelled_on_the_link_never_reaches_decode() -> None:
    scenario = scenario_from_mapping({"disaggregation": {"link_gb_s": 0.001}})  # ~34 s
    fleet = DisaggregatedFleet(scenario, "m", MonotonicClock())
    decode = fleet.decode[0]

    async def body(_delivered: list[RequestOutput]) -> None:
        fleet.submit(_command(fleet, "a"))
        await _until(lambda: decode.arriving == 1)
        assert decode.stats().num_waiting_reqs == 1  # waiting for its KV, as vLLM counts it
        fleet.finish("a", abort=True)
        await _until(lambda: decode.arriving == 0)
        assert decode.outstanding == 0 and fleet.prefill[0].outstanding == 0
        assert decode.stats().num_finished_reqs == 0 and decode.stats().num_waiting_reqs == 0

    _run(fleet, body)


def test_a_failed_prefill_reaches_the_client() -> None:
    scenario = scenario_from_mapping({"disaggregation": {}, "faults": {"error_rate": 1.0}})
    fleet = DisaggregatedFleet(scenario, "m", MonotonicClock())

    async def body(delivered: list[RequestOutput]) -> None:
        fleet.submit(_command(fleet, "a"))
        await _until(lambda: bool(delivered))
        assert [(o.request_id, o.finish_reason) for o in delivered] == [("a", FinishReason.ERROR)]
        fleet.finish("a", abort=False)
        assert fleet.decode[0].outstanding == 0

    _run(fleet, body)
