"""api, level 5: one programmatic entry point per command.

Each function takes its command's spec (`api.specs`: one frozen pydantic
model, the CLI options one to one) and at most an observer, a shared run or
a clock; it does the whole job of one command and returns a typed result;
the CLI only parses, builds the spec and renders. Errors the user can fix
are `UserError`s. One module per command.
"""

from infertriage.api.bench import run_bench
from infertriage.api.diagnose import diagnose
from infertriage.api.logs import triage_logs
from infertriage.api.metrics import scrape_metrics
from infertriage.api.plan import plan, summarize_run_workload
from infertriage.api.report import write_report
from infertriage.api.simulate import simulate
from infertriage.api.specs import (
    BenchSpec,
    ClientSpec,
    CompareABSpec,
    CompareRunsSpec,
    DiagnoseSpec,
    FleetSpec,
    LogsSpec,
    PlanSpec,
    ReportSpec,
    SimulateSpec,
    TwinSpec,
    ValidateSpec,
)
from infertriage.api.trace import analyze_trace
from infertriage.api.twin import serve_twin

__all__ = [
    "BenchSpec",
    "ClientSpec",
    "CompareABSpec",
    "CompareRunsSpec",
    "DiagnoseSpec",
    "FleetSpec",
    "LogsSpec",
    "PlanSpec",
    "ReportSpec",
    "SimulateSpec",
    "TwinSpec",
    "ValidateSpec",
    "analyze_trace",
    "diagnose",
    "plan",
    "run_bench",
    "scrape_metrics",
    "serve_twin",
    "simulate",
    "summarize_run_workload",
    "triage_logs",
    "write_report",
]
