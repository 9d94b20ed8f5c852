"""loadgen, level 2: load generation against an OpenAI-compatible server.

Takes a `Schedule` (from `workload`) and a `ClientConfig`; gives
`RequestRecord`s as each request finishes, and `WorkerReport`s on the
client's own health. Parts: `sse` (an incremental byte-level SSE parser),
`client` (one measured streaming request), `runner` (open loop on absolute
deadlines, closed loop, `max_concurrency` with client queue time), `workers`
(`--workers N` processes on one schedule), `locust` (the same load on a
Locust master and workers, `--locust-workers N`), `load_engine` (those three
behind one `LoadEngine` protocol, and the one table that picks one), `preflight`
(what bench asks the server before any load, each call blocking), `sweep` (rates to probe, the
knee), `spec` (`BenchSpec`, the one model of a load test) and `results` (the typed
results `report` renders). The loopback test
server and the raw-reader floor live outside the product, in
`infertriage_testing`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infertriage.schemas.lazy import lazy_exports

if TYPE_CHECKING:
    from infertriage.loadgen.client import ClientConfig, Endpoint, RequestClient, StreamState
    from infertriage.loadgen.results import (
        BenchResult,
        ClientDiagnostics,
        Knee,
        LevelResult,
        RunObserver,
        in_phase,
        within,
    )
    from infertriage.loadgen.runner import LoadPlan, WorkerReport, run_load, run_sync
    from infertriage.loadgen.spec import BenchSpec, ClientSpec
    from infertriage.loadgen.sse import SseEvent, SseParser
    from infertriage.loadgen.sweep import find_knee, judge_stable, sweep_rates
    from infertriage.loadgen.workers import run_parallel, split_plan

__all__ = [
    "BenchResult",
    "BenchSpec",
    "ClientConfig",
    "ClientDiagnostics",
    "ClientSpec",
    "Endpoint",
    "Knee",
    "LevelResult",
    "LoadPlan",
    "RequestClient",
    "RunObserver",
    "SseEvent",
    "SseParser",
    "StreamState",
    "WorkerReport",
    "find_knee",
    "in_phase",
    "judge_stable",
    "run_load",
    "run_parallel",
    "run_sync",
    "split_plan",
    "sweep_rates",
    "within",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "ClientConfig": "infertriage.loadgen.client",
        "Endpoint": "infertriage.loadgen.client",
        "RequestClient": "infertriage.loadgen.client",
        "StreamState": "infertriage.loadgen.client",
        "BenchResult": "infertriage.loadgen.results",
        "ClientDiagnostics": "infertriage.loadgen.results",
        "Knee": "infertriage.loadgen.results",
        "LevelResult": "infertriage.loadgen.results",
        "RunObserver": "infertriage.loadgen.results",
        "in_phase": "infertriage.loadgen.results",
        "within": "infertriage.loadgen.results",
        "LoadPlan": "infertriage.loadgen.runner",
        "WorkerReport": "infertriage.loadgen.runner",
        "run_load": "infertriage.loadgen.runner",
        "run_sync": "infertriage.loadgen.runner",
        "BenchSpec": "infertriage.loadgen.spec",
        "ClientSpec": "infertriage.loadgen.spec",
        "SseEvent": "infertriage.loadgen.sse",
        "SseParser": "infertriage.loadgen.sse",
        "find_knee": "infertriage.loadgen.sweep",
        "judge_stable": "infertriage.loadgen.sweep",
        "sweep_rates": "infertriage.loadgen.sweep",
        "run_parallel": "infertriage.loadgen.workers",
        "split_plan": "infertriage.loadgen.workers",
    },
)
