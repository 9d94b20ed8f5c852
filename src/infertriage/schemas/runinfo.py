"""schemas, level 0: run.json, one pydantic model per command, read back through that model.

`RunInfo` is the union of `BenchRunInfo`, `DiagnoseRunInfo`, `ValidateRunInfo`
and `CompareRunInfo`, told apart by `command`. Each holds the schema id
(`infertriage.run/v1`), the wall-clock anchor of the run's clock, and four
typed sections: `config` (what the command ran), `environment` (where),
`server_config` (what the server said of itself) and `summary` (how it went),
plus `spec`, the command's spec (`api.specs`) as JSON, which `api.runview`
reads back through that command's model. `parse_run_info` reads a document:
a run.json of another schema is one sentence naming its version and the one
this tool reads. The JSON Schema of `RunInfo` is published as
`schemas/run.schema.json` (`scripts/json_schemas.py`).

Each model forbids a key it does not declare, except the sections an older
writer of the same schema may have filled with keys no reader uses
(`RunEnvironment`, `RunServerConfig`, `Deployment`, the summaries): there an
unknown key is kept as it was (`model_extra`) and read by no one; every key
today's writers write is declared (tests/api/test_run_fixtures.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, RootModel, ValidationError
from pydantic.json_schema import JsonSchemaValue

from infertriage.schemas.checks import Check
from infertriage.schemas.errors import UserError

__all__ = [
    "RUN_SCHEMA",
    "BenchRunInfo",
    "BenchSummary",
    "CompareConfig",
    "CompareRunInfo",
    "CompareSummary",
    "Deployment",
    "DiagnoseConfig",
    "DiagnoseRunInfo",
    "DiagnoseSummary",
    "GpuInfo",
    "Phases",
    "RunEnvironment",
    "RunInfo",
    "RunServerConfig",
    "RunStatus",
    "ValidateConfig",
    "ValidateRunInfo",
    "ValidateSummary",
    "first_error",
    "parse_run_info",
    "run_info_schema",
]

RUN_SCHEMA: Final = "infertriage.run/v1"  # the model below names it again, as its type
RunStatus = Literal["running", "complete", "interrupted"]  # running: killed mid-run


@dataclass(frozen=True, slots=True)
class Phases:
    """When the load ran, which part of it was the overload step, and when the drain ended."""

    load_start_ts: float
    load_end_ts: float
    overload_start_ts: float | None = None
    overload_end_ts: float | None = None
    drain_end_ts: float | None = None


class _Owned(BaseModel):
    """A part of run.json whose every key is declared here."""

    model_config = ConfigDict(extra="forbid")


class _Section(BaseModel):
    """A section an older writer of this schema may have filled with keys no reader uses:
    kept as they were, typed by no one."""

    model_config = ConfigDict(extra="allow")


class GpuInfo(_Owned):
    index: int
    name: str
    uuid: str | None = None
    memory_total_bytes: int | None = None


class RunEnvironment(_Section):
    """Where the run ran: `collect.snapshot_environment` (diagnose, validate, A/B arms), or
    bench's own few facts about its load client."""

    infertriage: str | None = None
    python: str | None = None
    platform: str | None = None
    machine: str | None = None
    cpu_count: int | None = None
    mem_total_bytes: int | None = None
    packages: dict[str, str] = Field(default_factory=dict)
    gpus: list[GpuInfo] = Field(default_factory=list)
    driver_version: str | None = None
    cuda_version: str | None = None
    topology: str | None = None  # `nvidia-smi topo -m`
    engine: str | None = None
    engine_version: str | None = None
    notes: list[str] = Field(default_factory=list)
    # bench: its load client
    uvloop: bool | None = None
    workers: int | None = None
    load_engine: str | None = None
    locust_workers: int | None = None
    # joins the run's clock to same-host monotonic stamps (a server's own log)
    perf_counter_start_ns: int | None = None


class RunServerConfig(_Section):
    """What the server said about itself (`collect.fetch_server_config`); None where it did not
    say. bench knows only the served models and the context length it found."""

    engine: str | None = None
    version: str | None = None
    model: str | None = None
    models: list[str] = Field(default_factory=list)
    max_model_len: int | None = None
    max_model_len_source: str | None = None  # bench: where it learnt max_model_len
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    kv_tokens_total: int | None = None
    gpu_memory_utilization: float | None = None
    enable_prefix_caching: bool | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    cuda_graphs: bool | None = None
    details: dict[str, dict[str, JsonValue]] = Field(default_factory=dict)  # per endpoint
    answered: list[str] = Field(default_factory=list)  # the endpoints that answered
    notes: list[str] = Field(default_factory=list)


class Deployment(_Section):
    """What the user (`--model-config`, `--gpu`, `--tp`) or the twin's scenario says of the
    deployment; the server's own word (`RunServerConfig`) wins where both say."""

    model: str | None = None
    gpu: str | None = None
    dtype: str | None = None
    tensor_parallel: int | None = None
    interconnect: str | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    num_draft_tokens: int | None = None
    replicas: int | None = None
    pipeline_parallel: int | None = None  # stages
    expert_parallel: int | None = None  # GPUs the experts spread over


class _Summary(_Section):
    status: RunStatus | None = None


class BenchSummary(_Summary):
    """bench's status and its `--json` document (`report.bench.bench_to_json`, schema
    `infertriage.bench/v1`); a level is that document's own, kept as JSON."""

    model_config = ConfigDict(populate_by_name=True)

    schema_id: str | None = Field(default=None, alias="schema")
    run_dir: str | None = None
    url: str | None = None
    model: str | None = None
    endpoint: str | None = None
    interrupted: bool = False
    client_bound: bool = False
    levels: list[dict[str, JsonValue]] = Field(default_factory=list)
    knee: dict[str, JsonValue] | None = None
    token_check: dict[str, JsonValue] | None = None
    workload_fit: dict[str, JsonValue] | None = None
    max_rate: dict[str, JsonValue] | None = None  # `--find-max-rate`'s search
    warnings: list[str] = Field(default_factory=list)


class DiagnoseSummary(_Summary):
    phases: Phases | None = None  # None: Ctrl-C left no finished request
    main_level: str | None = None  # the measured level
    client_bound: bool = False


class ValidateSummary(_Summary):
    ready: bool | None = None
    main_level: str | None = None  # the performance phase
    checks: list[Check] = Field(default_factory=list)


class CompareSummary(_Summary):
    verdict: str | None = None  # None: interrupted before both servers answered
    regressed: bool | None = None
    inconclusive: bool | None = None


class DiagnoseConfig(_Owned):
    target: str
    deployment: Deployment = Field(default_factory=Deployment)
    levels: list[str] = Field(default_factory=list)
    workload: str | None = None
    notes: list[str] = Field(default_factory=list)


class ValidateConfig(_Owned):
    target: str
    rate: float | None = None
    concurrency: int | None = None
    duration_s: float | None = None
    num_requests: int | None = None
    soak_s: float | None = None
    workload: str | None = None
    seed: int | None = None


class CompareConfig(_Owned):
    urls: list[str]
    blocks: int
    rate: float | None = None
    concurrency: int | None = None


class _RunInfo(_Owned):
    """What every command's run.json holds beside its own config and summary."""

    model_config = ConfigDict(populate_by_name=True)

    schema_id: Literal["infertriage.run/v1"] = Field(default=RUN_SCHEMA, alias="schema")
    created_unix_s: float = Field(default_factory=time.time)
    wall_anchor_s: float  # wall-clock time at the run clock's zero
    environment: RunEnvironment = Field(default_factory=RunEnvironment)
    server_config: RunServerConfig = Field(default_factory=RunServerConfig)
    # the command's spec (`api.specs`), read back through its model by `api.runview.run_spec`
    spec: dict[str, JsonValue] = Field(default_factory=dict)


class BenchRunInfo(_RunInfo):
    command: Literal["bench"] = "bench"
    # bench's `BenchConfig` as JSON: typed by its spec once `BenchConfig` is folded into it
    config: dict[str, JsonValue] = Field(default_factory=dict)
    summary: BenchSummary = Field(default_factory=BenchSummary)


class DiagnoseRunInfo(_RunInfo):
    command: Literal["diagnose"] = "diagnose"
    config: DiagnoseConfig
    summary: DiagnoseSummary = Field(default_factory=DiagnoseSummary)


class ValidateRunInfo(_RunInfo):
    command: Literal["validate"] = "validate"
    config: ValidateConfig
    summary: ValidateSummary = Field(default_factory=ValidateSummary)


class CompareRunInfo(_RunInfo):
    """`compare --url A --url B` (an A/B run); `compare BASE RUN` writes no run."""

    command: Literal["compare"] = "compare"
    config: CompareConfig
    summary: CompareSummary = Field(default_factory=CompareSummary)


RunInfo = Annotated[
    BenchRunInfo | DiagnoseRunInfo | ValidateRunInfo | CompareRunInfo,
    Field(discriminator="command"),
]


class _AnyRun(RootModel[RunInfo]):
    """run.json of any command (the model behind `parse_run_info` and the JSON Schema)."""


def first_error(err: ValidationError) -> str:
    """Where the first error of `err` is, and what it is."""
    detail = err.errors()[0]
    where = ".".join(str(part) for part in detail["loc"]) or "record"
    return f"{where}: {detail['msg']}"


def parse_run_info(document: object, source: str = "run.json") -> RunInfo:
    """`document` (a run.json read as JSON) through its command's model; one sentence naming
    `source` when it is of another schema version or does not fit its model."""
    if not isinstance(document, dict):
        raise UserError(f"{source}: invalid run.json (not a JSON object).")
    version = document.get("schema", RUN_SCHEMA)
    if version != RUN_SCHEMA:
        raise UserError(
            f"{source} is a run.json of schema {version!r}, and this infertriage reads "
            f"{RUN_SCHEMA} only: read it with the infertriage that wrote it."
        )
    try:
        return _AnyRun.model_validate(document).root
    except ValidationError as err:
        raise UserError(f"{source}: invalid run.json ({first_error(err)}).") from err


def run_info_schema() -> JsonSchemaValue:
    """The JSON Schema of run.json, as published in `schemas/run.schema.json`."""
    return _AnyRun.model_json_schema(by_alias=True, mode="validation")
