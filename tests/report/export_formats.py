"""The other tools' file formats, written down from their sources, to validate our exports.

Not collected by pytest (no `test_` prefix). Strict where the source is (integers are
integers, units are strings), open where the source is (extra keys).

- `VllmResult`: the dict `vllm bench serve --save-result --save-detailed` writes
  (vllm-project/vllm, `vllm/benchmarks/serve.py` at commit 009e6d4a1cd6: `main`'s
  `result_json` — date, backend, label, model_id, tokenizer_id, num_prompts, --metadata
  keys, request_rate ("inf" for all at once), burstiness, max_concurrency — merged with
  `benchmark`'s `result` and `process_one_metric`'s `mean_/median_/std_/pNN_<m>_ms`).
  vLLM has no reader class for it; this is its shape. Our two deviations are allowed
  and documented in docs/exports.md: `input_lens` holds null where a prompt's length
  is unknown, `burstiness` is null for arrivals vLLM has no word for.
- `AiperfSummary` / `AiperfRecord`: AIPerf 0.13.0's `JsonExportData` (schema 1.4) and
  `MetricRecordInfo` (`aiperf/common/models/export_models.py`, `record_models.py`,
  `error_models.py`), the fields we write; AIPerf's own models load them too where
  aiperf installs (tests/report/test_exports_tools.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, model_validator

Number = StrictInt | float

VLLM_METRICS = ("ttft", "tpot", "itl", "e2el")
VLLM_STATS = ("mean", "median", "std", "p99")  # p99: vLLM's default --metric-percentiles


class VllmResult(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, protected_namespaces=())

    date: str = Field(pattern=r"^\d{8}-\d{6}$")  # datetime.now().strftime("%Y%m%d-%H%M%S")
    endpoint_type: str
    backend: str
    label: str | None
    model_id: str
    tokenizer_id: str | None
    num_prompts: StrictInt
    request_rate: Number | Literal["inf"]
    burstiness: Number | None
    max_concurrency: StrictInt | None
    duration: Number
    completed: StrictInt
    failed: StrictInt
    total_input_tokens: StrictInt
    total_output_tokens: StrictInt
    request_throughput: Number
    request_goodput: Number | None  # None unless --goodput
    output_throughput: Number
    total_token_throughput: Number
    input_lens: list[StrictInt | None]
    output_lens: list[StrictInt]
    ttfts: list[Number]  # seconds
    itls: list[list[Number]]  # seconds, per request
    latencies: list[Number]
    start_times: list[Number]
    queue_times: list[Number]
    errors: list[str]
    max_output_tokens_per_s: Number
    max_concurrent_requests: StrictInt

    @model_validator(mode="after")
    def _lists_and_stats(self) -> VllmResult:
        lists = (self.input_lens, self.output_lens, self.ttfts, self.itls, self.latencies)
        lists += (self.start_times, self.queue_times, self.errors)
        assert all(len(values) == self.num_prompts for values in lists)
        assert self.completed + self.failed == self.num_prompts
        extra = self.model_extra or {}
        for metric in VLLM_METRICS:
            for stat in VLLM_STATS:
                value = extra[f"{stat}_{metric}_ms"]
                assert isinstance(value, int | float) and not isinstance(value, bool)
        return self


class AiperfMetric(BaseModel):  # JsonMetricResult
    model_config = ConfigDict(extra="forbid", strict=True, protected_namespaces=())

    unit: str
    avg: Number | None = None
    p1: Number | None = None
    p5: Number | None = None
    p10: Number | None = None
    p25: Number | None = None
    p50: Number | None = None
    p75: Number | None = None
    p90: Number | None = None
    p95: Number | None = None
    p99: Number | None = None
    min: Number | None = None
    max: Number | None = None
    std: Number | None = None
    count: StrictInt | None = None
    sum: Number | None = None


class AiperfErrorDetails(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, protected_namespaces=())

    code: StrictInt | None = None
    type: str | None = None
    message: str


class AiperfErrorCount(BaseModel):  # ErrorDetailsCount
    error_details: AiperfErrorDetails
    count: StrictInt


class AiperfSummary(BaseModel):  # JsonExportData: every other key a metric tag
    model_config = ConfigDict(extra="allow", protected_namespaces=())

    schema_version: Literal["1.4"]
    request_count: AiperfMetric
    request_throughput: AiperfMetric
    benchmark_duration: AiperfMetric
    was_cancelled: StrictBool | None = None
    error_summary: list[AiperfErrorCount] | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    metadata: dict[str, object] | None = None

    @model_validator(mode="after")
    def _metrics(self) -> AiperfSummary:
        for value in (self.model_extra or {}).values():
            AiperfMetric.model_validate(value)
        return self


class AiperfMetadata(BaseModel):  # MetricRecordMetadata, the fields we write
    model_config = ConfigDict(extra="allow", strict=True, protected_namespaces=())

    session_num: StrictInt
    x_request_id: str | None = None
    request_start_ns: StrictInt
    request_ack_ns: StrictInt | None = None
    request_end_ns: StrictInt
    worker_id: str
    record_processor_id: str
    benchmark_phase: Literal["warmup", "profiling"]
    was_cancelled: StrictBool = False
    cancellation_time_ns: StrictInt | None = None


class AiperfValue(BaseModel):  # MetricValue
    model_config = ConfigDict(extra="forbid", strict=True, protected_namespaces=())

    value: Number | list[Number]
    unit: str


class AiperfRecord(BaseModel):  # MetricRecordInfo
    model_config = ConfigDict(extra="allow", strict=True, protected_namespaces=())

    metadata: AiperfMetadata
    metrics: dict[str, AiperfValue]
    error: AiperfErrorDetails | None = None
