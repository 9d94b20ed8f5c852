"""api, level 5: one typed spec per command — what the user asked for, as one frozen model.

Each command's CLI options map one to one onto its spec; the api function
takes the spec (and at most an observer, a shared run or a clock), and
run.json stores it under `spec` (`model_dump(mode="json")`), so `--from-run`
reads a run's settings back through the same model. `ClientSpec` is what
bench, diagnose, validate and compare share — how requests reach the server
and what is known of its model — and what the last three hand to bench.
The API key and header values are sent, never stored: they are left out of
every dump (and of `repr`); a header that is not `NAME:VALUE`, or a key or
header with a control character (CR, LF), is refused when the spec is made.
A server URL's `user:password@` is taken off it as the spec is made and sent
as an `Authorization: Basic` header of the client's (`ClientSpec.headers`),
so no stored or printed URL carries it; `--metrics-url` and `--dcgm-url` are
dumped without theirs.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

from infertriage.engines import engine_choices
from infertriage.loadgen.client import Endpoint
from infertriage.net import basic_authorization, check_header, split_userinfo, strip_userinfo
from infertriage.schemas import Thresholds, UserError
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


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ClientSpec(_Spec):
    """How requests reach the server and what is known of its model (bench's, and the
    loads of diagnose, validate and compare)."""

    model: str | None = None  # None: the server's first
    endpoint: Endpoint = Endpoint.CHAT
    api_key: str | None = Field(default=None, exclude=True, repr=False)  # sent, never stored
    headers: tuple[str, ...] = Field(default=(), exclude=True, repr=False)  # NAME:VALUE, sent
    tokenizer: Path | None = None  # a local tokenizer.json
    max_model_len: int | None = None  # the server's context, where it does not say it

    @field_validator("api_key")
    @classmethod
    def _sendable_key(cls, value: str | None) -> str | None:
        if value:
            check_header("--api-key", "", value)
        return value

    @field_validator("headers")
    @classmethod
    def _sendable_headers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for header in value:
            name, sep, sent = header.partition(":")
            if not sep or not name.strip():  # quoted by no sentence: it may be a secret
                raise UserError("a --header is not NAME:VALUE (e.g. --header 'X-Api-Key: …').")
            check_header("--header", name.strip(), sent)
        return value

    def header_pairs(self) -> tuple[tuple[str, str], ...]:
        """`headers` as (NAME, VALUE) pairs, each stripped."""
        split = (header.partition(":") for header in self.headers)
        return tuple((name.strip(), value.strip()) for name, _, value in split)

    def sets_authorization(self) -> bool:
        """The key, or a `--header Authorization:…`, sets the request's `Authorization`."""
        names = (header.partition(":")[0].strip().lower() for header in self.headers)
        return bool(self.api_key) or "authorization" in names


def _userinfo_to_header(data: Any) -> Any:
    """A spec's `url` (or compare's `urls`) with `user:password@`: the URL without it, and
    `Authorization: Basic` for it among the client's headers (see the module docstring)."""
    if not isinstance(data, dict):
        return data
    key = "urls" if "urls" in data else "url"
    given = data.get(key)
    urls = list(given) if key == "urls" and isinstance(given, list | tuple) else [given]
    split = [split_userinfo(url) if isinstance(url, str) else (url, None) for url in urls]
    userinfos = {userinfo for _, userinfo in split}
    if userinfos == {None}:
        return data
    if len(userinfos) > 1:
        raise UserError(
            "the two --url carry different user:password@ credentials, and compare sends one "
            "set to both servers: give both URLs the same."
        )
    userinfo = userinfos.pop()
    assert userinfo is not None
    client = data.get("client", ClientSpec())
    if isinstance(client, dict):
        client = ClientSpec.model_validate(client)
    if not isinstance(client, ClientSpec):
        return data  # pydantic names the problem
    if client.sets_authorization():
        raise UserError(
            "--url carries user:password@, which is sent as the Authorization header, and "
            "--api-key (or OPENAI_API_KEY, or an Authorization --header) sets it too: "
            "give one of them."
        )
    header = f"Authorization: {basic_authorization(userinfo)}"
    stripped = [url for url, _ in split]
    return {
        **data,
        key: tuple(stripped) if key == "urls" else stripped[0],
        "client": client.model_copy(update={"headers": (*client.headers, header)}),
    }


def _stored_url(url: str | None) -> str | None:
    return None if url is None else strip_userinfo(url)


class BenchSpec(_Spec):
    """`bench`: load levels against one server. Ranges are checked by `run_bench`, each in
    one sentence naming its flag; `labels` go on every record (validate's phase, compare's arm)."""

    url: str
    client: ClientSpec = ClientSpec()
    rates: tuple[float, ...] = ()
    concurrencies: tuple[int, ...] = ()
    sweep: bool = False
    workload: str = DEFAULT_WORKLOAD
    arrival: str = "poisson"
    duration_s: float | None = None
    num_requests: int | None = None
    workers: int = 1
    locust_workers: int | None = None  # the load on a Locust master and N workers
    locust_master_host: str | None = None  # HOST[:PORT]: remote workers join it
    max_concurrency: int | None = None
    think_time_s: float = 0.0
    out: Path | None = None
    force: bool = False
    thresholds: Thresholds | None = None  # None: the defaults (`--slo` loaded by the caller)
    goodput: str | None = None
    timeout_s: float = 600.0
    stall_timeout_s: float | None = None  # None: min(timeout, 60 s)
    drain_timeout_s: float | None = None  # None: min(timeout, 30 s)
    drain_settle_share: float | None = None  # None: wait for every stream (`runner.drain_settled`)
    seed: int = 0
    continuous_usage: bool = True
    ignore_eos: bool = True
    check_tokens: bool = True
    use_uvloop: bool = True
    labels: tuple[tuple[str, str], ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _credentials(cls, data: Any) -> Any:
        return _userinfo_to_header(data)


class DiagnoseSpec(_Spec):
    """`diagnose`: a sweep against `url` (None: a twin of `scenario`), `--from-run` or one
    `--metrics-file` scrape; what to watch beside the load and what to capture."""

    url: str | None = None
    scenario: str = "healthy"
    client: ClientSpec = ClientSpec()
    metrics_url: str | None = None
    dcgm_url: str | None = None
    server_pid: int | None = None
    prometheus: str | None = None
    selector: str = ""
    duration_s: float = 60.0
    concurrency: int = 16
    workload: str = DEFAULT_WORKLOAD
    from_run: Path | None = None
    metrics_file: Path | None = None
    compare_run: Path | None = None
    slo: str | None = None
    deployment: dict[str, Any] = Field(default_factory=dict)
    traces: tuple[Path, ...] = ()
    profile_s: float | None = None
    profile_dir: Path | None = None
    logs: tuple[Path, ...] = ()
    locust_workers: int | None = None  # the load on a Locust master and N workers (`bench`)
    locust_master_host: str | None = None
    out: Path | None = None
    force: bool = False
    html: Path | None = None  # write the run's HTML report here after the map
    # the measured interconnect for the plan and the parallelism rules (`topology`'s files)
    nvidia_smi_topo: Path | None = None
    nccl_tests: tuple[Path, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _credentials(cls, data: Any) -> Any:
        return _userinfo_to_header(data)

    @field_serializer("metrics_url", "dcgm_url")
    def _stored(self, url: str | None) -> str | None:
        return _stored_url(url)


class ValidateSpec(_Spec):
    """`validate`: the go-live checklist against `url` (None: a twin of `scenario`)."""

    url: str | None = None
    scenario: str = "healthy"
    client: ClientSpec = ClientSpec()
    slo: str | None = None
    workload: str = DEFAULT_WORKLOAD
    rate: float | None = None
    concurrency: int | None = None
    duration_s: float = 60.0
    num_requests: int | None = None
    soak_s: float = 0.0
    soak_rate: float | None = None
    metrics_url: str | None = None
    dcgm_url: str | None = None
    server_pid: int | None = None
    functional: bool = True
    seed: int = 0
    locust_workers: int | None = None  # the load on a Locust master and N workers (`bench`)
    locust_master_host: str | None = None
    out: Path | None = None
    force: bool = False
    # operations: the longest generation through whatever fronts the server (0: not run)
    long_generation_max_s: float = 0.0

    @model_validator(mode="before")
    @classmethod
    def _credentials(cls, data: Any) -> Any:
        return _userinfo_to_header(data)

    @field_serializer("metrics_url", "dcgm_url")
    def _stored(self, url: str | None) -> str | None:
        return _stored_url(url)


class CompareRunsSpec(_Spec):
    """`compare BASE RUN`: a baseline's name or a run directory, then a run directory."""

    base: str
    run: Path
    threshold: float = 0.10
    store: Path | None = None
    seed: int = 0


class CompareABSpec(_Spec):
    """`compare --url A --url B`: one seeded schedule, interleaved in blocks over both."""

    urls: tuple[str, str]
    client: ClientSpec = ClientSpec()
    rate: float | None = None
    concurrency: int | None = None
    duration_s: float | None = 60.0
    num_requests: int | None = None
    blocks: int = 4
    workload: str = DEFAULT_WORKLOAD
    threshold: float = 0.10
    seed: int = 0
    out: Path | None = None
    force: bool = False

    @model_validator(mode="before")
    @classmethod
    def _credentials(cls, data: Any) -> Any:
        return _userinfo_to_header(data)


class PlanSpec(_Spec):
    """`plan`: a model on a GPU at a concurrency; what-ifs; figures measured elsewhere."""

    model: str
    gpu: str
    max_model_len: int
    concurrency: int | None = None
    num_gpus: int | None = None
    gpus_per_node: int = 8
    tp: int = 1
    pp: int = 1
    ep: int = 1
    input_len: int | None = None
    output_len: int | None = None
    dtype: str = "bf16"
    kv_dtype: str = "bf16"
    gpu_memory_utilization: float = 0.9
    max_num_batched_tokens: int = 8192
    what_if: tuple[str, ...] = ()
    measured_itl_s: float | None = None
    measured_throughput_tok_s: float | None = None
    gpu_hour_cost: float | None = None
    from_run: Path | None = None
    # operations: a day of traffic, the autoscaler, spot prices (`plan --traffic`)
    traffic: Path | None = None  # CSV: time, requests_per_s[, input_tokens, output_tokens]
    slo: str | None = None  # the TTFT and ITL limits each replica must meet
    hpa: Path | None = None  # write a HorizontalPodAutoscaler manifest here
    deployment_name: str = "llm"
    namespace: str | None = None
    cold_start_s: float | None = None  # None: a validate run's (--from-run), else none
    spot_cost: float | None = None  # $ per GPU-hour on spot
    spot_interruptions_per_hour: float = 0.05  # per replica
    spot_notice_s: float = 120.0
    # the measured interconnect (`infertriage topology`'s inputs): plan uses its bandwidth
    nvidia_smi_topo: Path | None = None
    nccl_tests: tuple[Path, ...] = ()


class SimulateSpec(_Spec):
    """`simulate`: a twin scenario's engine on a virtual clock under what a load test sends —
    one rate and a count (default 4 req/s, 1,000 requests), back-to-back `stages`, or a
    trace's own times; `workload` is any `bench --workload` spec (None: the lengths pick)."""

    scenario: str
    rate: float | None = None
    num_requests: int | None = None
    stages: tuple[Stage, ...] = ()
    workload: str | None = None
    input_len: int | None = None
    output_len: int | None = None
    arrivals: str = "poisson"  # poisson, constant or gamma:SHAPE
    timeout_s: float | None = None  # the client's time-out per request
    seed: int | None = None


class TwinSpec(_Spec):
    """`twin`: serve a scenario until interrupted."""

    scenario: str
    host: str = "127.0.0.1"
    port: int = 8000
    load_time_s: float | None = None
    profile_dir: Path | None = None
    parent_pid: int | None = None  # a twin a command started: it stops when that one ends


class FleetSpec(_Spec):
    """A Prometheus query of the replicas a selector matches, over the last `window_s`."""

    prometheus_url: str
    selector: str
    window_s: float
    end_unix_s: float | None = None
    step_s: float | None = None
    rate_window_s: float | None = None
    imbalance_ratio: float = 1.5


class ReportSpec(_Spec):
    """`report RUN`: a run directory as one self-contained HTML file (None: RUN/report.html)."""

    run: Path
    html: Path | None = None


class MonitorConfigSpec(_Spec):
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
    rate_window_s: float = 300.0
    for_scale: float = 1.0  # every `for:` times this (short in tests and demos)
    evaluation_interval_s: float = 30.0
    force: bool = False

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        choices = engine_choices()
        if value not in choices:
            raise UserError(f"--engine must be one of {', '.join(choices)}, not {value!r}.")
        return value


class LogsSpec(_Spec):
    """`logs`: offline triage of one server's logs (rotated parts in any order, `.gz` too)."""

    files: tuple[Path, ...]
    engine: str | None = None  # vllm or sglang; None: detected from the lines
    since: str | None = None  # HH:MM[:SS] on the log's first day, or an ISO date and time
    until: str | None = None
    interval_s: float | None = None  # None: the engine's stats interval, widened to fit
    slo: str | None = None


class TopologySpec(_Spec):
    """`topology`: a host's measured interconnect against the TP degrees a model needs."""

    model: str
    gpu: str
    nvidia_smi_topo: Path | None = None  # `nvidia-smi topo -m` saved to a file
    nccl_tests: tuple[Path, ...] = ()  # nccl-tests `all_reduce_perf` outputs, one per rank count
    max_model_len: int = 8192
    concurrency: int = 64  # the planned batch per replica
    input_len: int | None = None
    output_len: int | None = None
    dtype: str = "bf16"
