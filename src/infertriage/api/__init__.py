"""api, level 5: one programmatic entry point per command.

Each function takes its command's spec (`api.specs`: one frozen pydantic
model, the CLI options one to one) and at most an observer, a shared run or
a clock; it does the whole job of one command and returns a typed result;
the CLI only parses, builds the spec and renders. Errors the user can fix
are `UserError`s. One module per command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infertriage.schemas.lazy import lazy_exports

if TYPE_CHECKING:
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

__getattr__ = lazy_exports(
    __name__,
    {
        "run_bench": "infertriage.api.bench",
        "diagnose": "infertriage.api.diagnose",
        "triage_logs": "infertriage.api.logs",
        "scrape_metrics": "infertriage.api.metrics",
        "plan": "infertriage.api.plan",
        "summarize_run_workload": "infertriage.api.plan",
        "write_report": "infertriage.api.report",
        "simulate": "infertriage.api.simulate",
        "BenchSpec": "infertriage.api.specs",
        "ClientSpec": "infertriage.api.specs",
        "CompareABSpec": "infertriage.api.specs",
        "CompareRunsSpec": "infertriage.api.specs",
        "DiagnoseSpec": "infertriage.api.specs",
        "FleetSpec": "infertriage.api.specs",
        "LogsSpec": "infertriage.api.specs",
        "PlanSpec": "infertriage.api.specs",
        "ReportSpec": "infertriage.api.specs",
        "SimulateSpec": "infertriage.api.specs",
        "TwinSpec": "infertriage.api.specs",
        "ValidateSpec": "infertriage.api.specs",
        "analyze_trace": "infertriage.api.trace",
        "serve_twin": "infertriage.api.twin",
    },
)
