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
