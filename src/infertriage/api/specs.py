"""api, level 5: one typed spec per command — what the user asked for, as one frozen model.

Each command's CLI options map one to one onto its spec; the api function
takes the spec (and at most an observer, a shared run or a clock), and
run.json stores it under `spec` (`model_dump(mode="json")`), so `--from-run`
reads a run's settings back through the same model. Every spec is a
`schemas.CommandSpec`: a field's range is written once, on the field, and a
value out of it is refused as the spec is made, in one sentence naming its flag.
`ClientSpec` is what bench, diagnose, validate and compare share — how requests
reach the server and what is known of its model — and `BenchSpec` what the last
three hand to bench; both live with the load (`loadgen.spec`, where the load
engines read them) and are re-exported here, with their rules on secrets: the
API key and header values are sent, never stored, and a URL's `user:password@`
becomes an `Authorization: Basic` header. `--metrics-url` and `--dcgm-url` are
dumped without theirs.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import Field, field_serializer, field_validator, model_validator

from infertriage.api.specs_offline import FleetSpec, PlanSpec, TopologySpec
from infertriage.engines import engine_choices
from infertriage.loadgen.request import Endpoint
from infertriage.loadgen.spec import (
    BenchSpec,
    ClientSpec,
    Workload,
    known_standard,
    mlperf_model_needs_standard,
    userinfo_to_header,
)
from infertriage.loadgen.standards import MIN_DURATION_S, TAIL_GAPS
from infertriage.net import strip_userinfo
from infertriage.net.urls import parse_listen
from infertriage.schemas import Thresholds, UserError
from infertriage.schemas.exports import Exports
from infertriage.schemas.spec import CommandSpec
from infertriage.twin.traffic import Stage
from infertriage.workload import DEFAULT_WORKLOAD

__all__ = [
    "BenchSpec",
    "ClientSpec",
    "CompareABSpec",
    "CompareRunsSpec",
    "DiagnoseSpec",
    "Endpoint",
    "FleetSpec",
    "LoadMode",
    "LogsSpec",
    "MonitorConfigSpec",
    "PlanSpec",
    "ReportSpec",
    "SimulateSpec",
    "TopologySpec",
    "TwinSpec",
    "ValidateSpec",
    "parse_endpoint",
]


class LoadMode(StrEnum):
    """How a load level sends: an open loop at a rate, closed-loop users, or a trace's times."""

    RATE = "rate"
    CONCURRENCY = "concurrency"
    REPLAY = "replay"


def parse_endpoint(text: str) -> Endpoint:
    """`--endpoint`: chat or completions, else one sentence naming the flag."""
    try:
        return Endpoint(text)
    except ValueError:
        raise UserError(f"--endpoint must be chat or completions, not {text!r}.") from None


_MAX_PORT = 65_535


def _stored_url(url: str | None) -> str | None:
    return None if url is None else strip_userinfo(url)


class DiagnoseSpec(CommandSpec):
    """`diagnose`: a sweep against `url` (None: a twin of `scenario`), `--from-run` or one
    `--metrics-file` scrape; what to watch beside the load and what to capture."""

    url: str | None = None
    scenario: str = "healthy"
    client: ClientSpec = ClientSpec()
    metrics_url: str | None = None
    dcgm_url: str | None = None
    server_pid: int | None = Field(default=None, ge=1)
    prometheus: str | None = None
    selector: str = ""
    duration_s: float = Field(default=60.0, gt=0)
    concurrency: int = Field(default=16, ge=1)
    # parsed once, dumped as text; None: a twin scenario's documented load, else the chat mix
    workload: Workload | None = None
    from_run: Path | None = None
    metrics_file: Path | None = None
    compare_run: Path | None = None
    slo: str | None = None
    deployment: dict[str, Any] = Field(default_factory=dict)
    traces: tuple[Path, ...] = Field(default=(), json_schema_extra={"flag": "--trace"})
    profile_s: float | None = Field(default=None, gt=0)
    profile_dir: Path | None = None
    logs: tuple[Path, ...] = Field(default=(), json_schema_extra={"flag": "--log"})
    # the load on a Locust master and N workers (`bench`)
    locust_workers: int | None = Field(default=None, ge=1, le=1024)
    locust_master_host: str | None = None
    out: Path | None = None
    force: bool = False
    html: Path | None = None  # write the run's HTML report here after the map
    # the measured interconnect for the plan and the parallelism rules (`topology`'s files)
    nvidia_smi_topo: Path | None = None
    nccl_tests: tuple[Path, ...] = ()
    # `--export vllm,aiperf`: the run also in those tools' formats (`api.exports`)
    exports: Exports = Field(default=(), json_schema_extra={"flag": "--export"})
    # the server's OpenTelemetry request spans: received during the run (HOST:PORT), or a
    # Collector's file export; joined to the requests by trace id (`api.spans`)
    otlp_listen: str | None = None
    spans: Path | None = None

    @model_validator(mode="before")
    @classmethod
    def _credentials(cls, data: Any) -> Any:
        return userinfo_to_header(data)

    @field_validator("deployment")
    @classmethod
    def _tensor_parallel(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key, flag in (
            ("tensor_parallel", "--tp"),
            ("pipeline_parallel", "--pp"),
            ("expert_parallel", "--ep"),
        ):
            size = value.get(key, 1)
            if isinstance(size, int) and size < 1:
                raise UserError(f"{flag} must be at least 1, not {size}.")
        return value

    @field_serializer("metrics_url", "dcgm_url")
    def _stored(self, url: str | None) -> str | None:
        return _stored_url(url)

    @field_validator("otlp_listen")
    @classmethod
    def _listen_address(cls, value: str | None) -> str | None:
        if value is not None:
            parse_listen(value)  # HOST:PORT, or one sentence before any work
        return value

    @model_validator(mode="after")
    def _spans_need_a_run(self) -> DiagnoseSpec:
        if self.metrics_file is None:
            return self
        for flag, value in (("--otlp-listen", self.otlp_listen), ("--spans", self.spans)):
            if value is not None:
                raise UserError(
                    f"{flag} needs a run's requests; --metrics-file diagnoses one scrape."
                )
        return self


class ValidateSpec(CommandSpec):
    """`validate`: the go-live checklist against `url` (None: a twin of `scenario`)."""

    url: str | None = None
    scenario: str = "healthy"
    client: ClientSpec = ClientSpec()
    slo: str | None = None
    workload: str = DEFAULT_WORKLOAD
    rate: float | None = Field(default=None, gt=0)
    concurrency: int | None = Field(default=None, ge=1)
    duration_s: float = Field(default=60.0, gt=0)
    num_requests: int | None = Field(default=None, ge=1)
    soak_s: float = Field(default=0.0, ge=0)
    soak_rate: float | None = Field(default=None, gt=0)
    metrics_url: str | None = None
    dcgm_url: str | None = None
    server_pid: int | None = Field(default=None, ge=1)
    functional: bool = Field(default=True, json_schema_extra={"flag": "--skip-functional"})
    seed: int = Field(default=0, ge=0)
    # the load on a Locust master and N workers (`bench`)
    locust_workers: int | None = Field(default=None, ge=1, le=1024)
    locust_master_host: str | None = None
    out: Path | None = None
    force: bool = False
    # operations: the longest generation through whatever fronts the server (0: not run)
    long_generation_max_s: float = Field(
        default=0.0, ge=0, json_schema_extra={"flag": "--long-generation-max-s"}
    )
    # `--standard mlperf`: the performance level is LoadGen's Server run at `--rate`, judged
    # by its constraints; `--duration` not given is then its 600 s (`apply_standard`)
    standard: str | None = None
    mlperf_model: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _credentials(cls, data: Any) -> Any:
        data = userinfo_to_header(data)
        if isinstance(data, dict) and data.get("duration_s", 0) is None:  # not given
            data = {key: value for key, value in data.items() if key != "duration_s"}
            rate = data.get("rate")
            if data.get("standard"):  # the preset's 600 s, its final query past it
                tail = TAIL_GAPS / rate if isinstance(rate, int | float) and rate > 0 else 0.0
                data["duration_s"] = MIN_DURATION_S + tail
        return data

    @field_validator("standard")
    @classmethod
    def _known_standard(cls, value: str | None) -> str | None:
        return known_standard(value)

    @model_validator(mode="after")
    def _mlperf_model_with_standard(self) -> ValidateSpec:
        mlperf_model_needs_standard(self.standard, self.mlperf_model)
        return self

    @field_serializer("metrics_url", "dcgm_url")
    def _stored(self, url: str | None) -> str | None:
        return _stored_url(url)


class CompareRunsSpec(CommandSpec):
    """`compare BASE RUN`: a baseline's name or a run directory, then a run directory."""

    base: str
    run: Path
    threshold: float = Field(default=0.10, gt=0)  # the smallest change that matters
    power: float = Field(default=0.8, gt=0, lt=1)  # of the sample plan
    store: Path | None = None
    seed: int = Field(default=0, ge=0)


class CompareABSpec(CommandSpec):
    """`compare --url A --url B`: one seeded schedule, interleaved in blocks over both."""

    urls: tuple[str, str] = Field(json_schema_extra={"flag": "--url"})
    client: ClientSpec = ClientSpec()
    rate: float | None = Field(default=None, gt=0)
    concurrency: int | None = Field(default=None, ge=1)
    duration_s: float | None = Field(default=60.0, gt=0)
    num_requests: int | None = Field(default=None, ge=1)
    blocks: int = Field(default=4, ge=1)
    workload: str = DEFAULT_WORKLOAD
    threshold: float = Field(default=0.10, gt=0)  # the smallest change that matters
    power: float = Field(default=0.8, gt=0, lt=1)  # of the sample plan
    # keep sampling in blocks until every metric is decided, or `max_requests` per arm
    until_decided: bool = False
    max_requests: int | None = Field(default=None, ge=1)  # None: 4× the planned sample
    seed: int = Field(default=0, ge=0)
    out: Path | None = None
    force: bool = False

    @model_validator(mode="before")
    @classmethod
    def _credentials(cls, data: Any) -> Any:
        return userinfo_to_header(data)


class SimulateSpec(CommandSpec):
    """`simulate`: a twin scenario's engine on a virtual clock under what a load test sends —
    one rate and a count (default 4 req/s, 1,000 requests), back-to-back `stages`, or a
    trace's own times; `workload` is any `bench --workload` spec (None: the lengths pick)."""

    scenario: str
    rate: float | None = Field(default=None, gt=0)
    num_requests: int | None = Field(default=None, ge=1)
    stages: tuple[Stage, ...] = Field(default=(), json_schema_extra={"flag": "--stage"})
    workload: str | None = None
    input_len: int | None = Field(default=None, ge=1)
    output_len: int | None = Field(default=None, ge=1)
    arrivals: str = "poisson"  # poisson, constant or gamma:SHAPE
    timeout_s: float | None = Field(default=None, gt=0)  # the client's, per request
    seed: int | None = Field(default=None, ge=0)


class TwinSpec(CommandSpec):
    """`twin`: serve a scenario until interrupted."""

    scenario: str
    host: str = "127.0.0.1"
    port: int = 8000
    load_time_s: float | None = Field(default=None, ge=0)
    profile_dir: Path | None = None
    # vLLM's flag: export one `llm_request` span per request there (OTLP/HTTP)
    otlp_traces_endpoint: str | None = None
    # a twin a command started: it stops when that one ends
    parent_pid: int | None = Field(default=None, ge=1)

    @field_validator("port")
    @classmethod
    def _tcp_port(cls, value: int) -> int:
        if not 0 <= value <= _MAX_PORT:
            raise UserError(f"--port must be a port from 0 to {_MAX_PORT}, not {value}.")
        return value


class ReportSpec(CommandSpec):
    """`report RUN`: a run directory as one self-contained HTML file (None: RUN/report.html)."""

    run: Path
    html: Path | None = None


class MonitorConfigSpec(CommandSpec):
    """`monitor-config`: Prometheus rules, an Alertmanager route and a Grafana dashboard for
    one engine; alert thresholds from `--slo` (`thresholds`), or from a baseline run."""

    engine: str  # whose metric names the rules are written in: `engines.engine_choices()`
    out: Path
    from_run: Path | None = None
    baseline: str | None = None  # a saved baseline's name
    store: Path | None = None  # the baseline store (default: the data folder)
    thresholds: Thresholds | None = None  # None: the defaults (`--slo` loaded by the caller)
    selector: str = ""  # label matchers of the engine's series, e.g. job="vllm"
    gpu_selector: str = ""  # of dcgm-exporter's
    rate_window_s: float = Field(default=300.0, gt=0)
    for_scale: float = Field(default=1.0, ge=0)  # every `for:` times this (demos: short)
    evaluation_interval_s: float = Field(default=30.0, gt=0)
    force: bool = False

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        choices = engine_choices()
        if value not in choices:
            raise UserError(f"--engine must be one of {', '.join(choices)}, not {value!r}.")
        return value


class LogsSpec(CommandSpec):
    """`logs`: offline triage of one server's logs (rotated parts in any order, `.gz` too)."""

    files: tuple[Path, ...]
    engine: str | None = None  # vllm or sglang; None: detected from the lines
    since: str | None = None  # HH:MM[:SS] on the log's first day, or an ISO date and time
    until: str | None = None
    # None: the engine's stats interval, widened to fit
    interval_s: float | None = Field(default=None, gt=0)
    slo: str | None = None
