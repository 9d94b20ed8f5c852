"""twin.driver: real-time steps keep the model's timeline, and late arrivals wait a step."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence

from infertriage.twin.driver import AddCommand, EngineDriver
from infertriage.twin.engine import EngineCore, MonotonicClock, StepResult
from infertriage.twin.request import SamplingParams
from infertriage.twin.scenario_model import Scenario
from infertriage.twin.scheduler import RequestOutput


async def _drive(num_requests: int, max_tokens: int) -> tuple[list[StepResult], EngineDriver]:
    engine = EngineCore(Scenario(), MonotonicClock())
    loop = asyncio.get_running_loop()
    finished: set[str] = set()
    done = asyncio.Event()

    def deliver(outputs: Sequence[RequestOutput]) -> None:
        finished.update(o.request_id for o in outputs if o.finished)
        if len(finished) == num_requests:
            done.set()

    driver = EngineDriver(engine, None, deliver, loop)
    steps: list[StepResult] = []
    driver.on_step = steps.append
    driver.start()
    try:
        for i in range(num_requests):
            params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
            driver.submit(AddCommand(f"r{i}", tuple(range(1, 200)), params, driver.now()))
            await asyncio.sleep(0.003)
        await asyncio.wait_for(done.wait(), timeout=20)
    finally:
        driver.stop()
    return steps, driver


def test_steps_run_back_to_back_and_admit_only_what_had_arrived() -> None:
    steps, driver = asyncio.run(_drive(num_requests=4, max_tokens=40))
    busy_pairs = list(itertools.pairwise(steps))
    back_to_back = sum(1 for a, b in busy_pairs if b.start_ts == a.end_ts)
    # A step more than 5 ms late restarts the timeline at now; on a quiet host none is.
    assert back_to_back >= 0.8 * len(busy_pairs), (back_to_back, len(busy_pairs))
    # Every request was first scheduled at or after it reached the engine.
    assert driver.step_slip_s and min(driver.step_slip_s) >= 0
    for step in steps:
        for output in step.outputs:
            if output.timings is not None:
                first = output.timings.first_scheduled_ts
                assert first is not None and first >= output.timings.arrival_ts
