"""twin, level 2: the engines behind one twin API server, and data-parallel routing.

Takes a `Scenario`, a shared clock and the metrics registry; gives
`Instance`s (an engine core, its real-time driver thread and its labelled
series; one per data-parallel rank or P/D instance) and `DataParallelFleet`:
`data_parallel.size` ranks, each request routed at arrival by the scenario's
balancer (`twin.balancer`), its abort sent to the rank that owns it. A rank at
`rank_speed` s takes 1/s as long per step. Size 1 is the plain twin (one
engine, labelled `engine="0"` as vLLM V1 labels it).

A rank's load for the balancer is the router's own count (requests routed to it
and not finished; of those, running as its engine last reported), as vLLM's DP
front end counts the requests it sent since the engines' last report.
`/dcgm/metrics` shows one GPU per rank per tensor-parallel shard, each with the
mean of the engines' counters (dcgm.py renders one set of values for all GPUs).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infertriage.twin.balancer import Balancer, RankLoad, make_balancer
from infertriage.twin.driver import SETTLE_WAIT_S, AddCommand, EngineDriver
from infertriage.twin.engine import Clock, EngineCore, GpuCounters, StepResult
from infertriage.twin.prom import CacheConfigInfo, EngineMetrics, VllmMetrics
from infertriage.twin.scenario_model import Scenario
from infertriage.twin.scheduler import RequestOutput, SchedulerStats

__all__ = [
    "DataParallelFleet",
    "Deliver",
    "Fleet",
    "Instance",
    "make_instances",
    "make_metrics",
    "mean_counters",
]

Deliver = Callable[[Sequence[RequestOutput]], None]


@dataclass(eq=False)
class Instance:
    """One engine: a data-parallel rank or a prefill/decode instance."""

    index: int
    role: str | None
    engine: EngineCore
    metrics: EngineMetrics | None = None
    driver: EngineDriver | None = None
    outstanding: int = 0  # routed here and not finished (the router's count)
    arriving: int = 0  # on their way: a decode instance's requests whose KV is in transit

    def stats(self) -> SchedulerStats:
        """The engine's latest stats; requests whose KV is in transit count as waiting, as
        vLLM V1 keeps WAITING_FOR_REMOTE_KVS requests in its waiting queue."""
        s = self.driver.stats() if self.driver is not None else self.engine.get_stats()
        if self.arriving:
            s = dataclasses.replace(s, num_waiting_reqs=s.num_waiting_reqs + self.arriving)
        return s

    def load(self) -> RankLoad:
        running = min(self.stats().num_running_reqs, self.outstanding)
        return RankLoad(running=running, waiting=self.outstanding - running)

    def start(
        self,
        loop: asyncio.AbstractEventLoop,
        deliver: Deliver,
        on_step: Callable[[StepResult], None],
    ) -> None:
        # the OS thread's name (15 characters, "engine" in it for the host sampler's roles)
        name = f"engine-core-{self.index}" if self.index else "engine-core"
        if self.role is not None:
            name = f"engine-{self.role}{self.index}"
        driver = EngineDriver(self.engine, self.metrics, deliver, loop, name)
        driver.on_step = on_step
        self.driver = driver
        driver.start()


def make_metrics(
    scenario: Scenario, model_name: str, engine: EngineCore, roles: bool
) -> VllmMetrics:
    info = CacheConfigInfo(
        block_size=scenario.engine.block_size,
        num_gpu_blocks=engine.hardware.num_gpu_blocks,
        gpu_memory_utilization=scenario.engine.gpu_memory_utilization,
        enable_prefix_caching=scenario.engine.enable_prefix_caching,
    )
    return VllmMetrics(model_name, scenario.engine.max_model_len, info, roles=roles)


def make_instances(
    scenario: Scenario,
    clock: Clock,
    count: int,
    role: str | None = None,
    speeds: Sequence[float] | None = None,
) -> list[Instance]:
    """`count` engines on one clock; each but the first seeded apart (faults, speculation)."""
    instances = []
    for index in range(count):
        seeded = (
            scenario if index == 0 else scenario.model_copy(update={"seed": scenario.seed + index})
        )
        engine = EngineCore(seeded, clock)
        if speeds is not None:
            engine.slowdown = 1.0 / speeds[index]
        instances.append(Instance(index, role, engine))
    return instances


def mean_counters(counters: Sequence[GpuCounters]) -> GpuCounters:
    """The engines' GPU counters averaged (what each of their GPUs shows on /dcgm/metrics)."""
    if len(counters) == 1:
        return counters[0]
    names = [f.name for f in dataclasses.fields(GpuCounters)]
    sums = {name: sum(getattr(c, name) for c in counters) / len(counters) for name in names}
    sums["num_steps"] = round(sums["num_steps"])
    return GpuCounters(**sums)


class Fleet:
    """What the HTTP server drives: engines, their metrics, submit and finish."""

    def __init__(self, instances: list[Instance], metrics: VllmMetrics) -> None:
        self.instances = instances
        self.metrics = metrics
        self.owner: dict[str, Instance] = {}

    @property
    def first(self) -> EngineCore:
        return self.instances[0].engine

    def start(
        self,
        loop: asyncio.AbstractEventLoop,
        deliver: Deliver,
        on_step: Callable[[StepResult], None],
    ) -> None:
        for instance in self.instances:
            instance.start(loop, deliver, on_step)

    def stop(self) -> None:
        for instance in self.instances:
            if instance.driver is not None:
                instance.driver.stop()

    async def settled(self) -> None:
        """Until every engine's metrics hold the steps whose outputs were delivered (one
        `SETTLE_WAIT_S` for them all)."""
        deadline = asyncio.get_running_loop().time() + SETTLE_WAIT_S
        drivers = [i.driver for i in self.instances if i.driver is not None]
        await asyncio.gather(*(driver.settled(deadline) for driver in drivers))

    def now(self) -> float:
        return self.first.clock.now()

    def submit(self, command: AddCommand) -> None:
        raise NotImplementedError

    def _take(self, instance: Instance, command: AddCommand) -> None:
        self.owner[command.request_id] = instance
        instance.outstanding += 1
        assert instance.driver is not None
        instance.driver.submit(command)

    def finish(self, request_id: str, abort: bool) -> None:
        """The client's response is over; `abort` when the engine had not finished it."""
        instance = self.owner.pop(request_id, None)
        if instance is None:
            return
        instance.outstanding -= 1
        if abort and instance.driver is not None:
            instance.driver.abort(request_id)

    def gpu_counters(self) -> GpuCounters:
        return mean_counters([i.engine.get_gpu_counters() for i in self.instances])

    @property
    def num_gpus(self) -> int:
        return len(self.instances) * self.first.hardware.num_gpus  # TP × PP each


class DataParallelFleet(Fleet):
    """`data_parallel.size` ranks behind the scenario's balancer."""

    def __init__(self, scenario: Scenario, model_name: str, clock: Clock) -> None:
        dp = scenario.data_parallel
        instances = make_instances(scenario, clock, dp.size, speeds=dp.rank_speed)
        metrics = make_metrics(scenario, model_name, instances[0].engine, roles=False)
        for instance in instances:
            instance.metrics = metrics.add_engine(instance.stats, instance.index)
        super().__init__(instances, metrics)
        self.balancer: Balancer = make_balancer(dp.balancer, dp.size, scenario.engine.block_size)

    def submit(self, command: AddCommand) -> None:
        loads = [instance.load() for instance in self.instances]
        rank = self.balancer.pick(command.prompt_token_ids, loads) if len(loads) > 1 else 0
        self._take(self.instances[rank], command)
