"""api, level 5: the specs of the commands that send no load: `plan`, `topology` and
`metrics --prometheus` (`FleetSpec`).

Takes nothing from the load generator, the twin or the workload, so that these
commands start without them; `api.specs` re-exports each, with every other
command's spec (see its docstring for what a spec is).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from infertriage.schemas.spec import CommandSpec

__all__ = ["FleetSpec", "PlanSpec", "TopologySpec"]


class PlanSpec(CommandSpec):
    """`plan`: a model on a GPU at a concurrency; what-ifs; figures measured elsewhere."""

    model: str
    gpu: str
    max_model_len: int = Field(ge=1)
    concurrency: int | None = Field(default=None, ge=1)
    num_gpus: int | None = Field(default=None, ge=1)
    gpus_per_node: int = Field(default=8, ge=1)
    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    ep: int = Field(default=1, ge=1)
    input_len: int | None = Field(default=None, ge=1)
    output_len: int | None = Field(default=None, ge=1)
    dtype: str = "bf16"
    kv_dtype: str = "bf16"
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    max_num_batched_tokens: int = Field(default=8192, ge=1)
    what_if: tuple[str, ...] = ()
    measured_itl_s: float | None = Field(default=None, gt=0)
    measured_throughput_tok_s: float | None = Field(
        default=None, gt=0, json_schema_extra={"flag": "--measured-throughput"}
    )
    gpu_hour_cost: float | None = Field(default=None, gt=0)
    from_run: Path | None = None
    # operations: a day of traffic, the autoscaler, spot prices (`plan --traffic`)
    traffic: Path | None = None  # CSV: time, requests_per_s[, input_tokens, output_tokens]
    slo: str | None = None  # the TTFT and ITL limits each replica must meet
    hpa: Path | None = None  # write a HorizontalPodAutoscaler manifest here
    keda: str | None = None  # Prometheus's URL for KEDA: a ScaledObject in the --hpa file
    deployment_name: str = Field(default="llm", json_schema_extra={"flag": "--deployment"})
    namespace: str | None = None
    # None: a validate run's (--from-run), else none
    cold_start_s: float | None = Field(default=None, ge=0)
    spot_cost: float | None = Field(default=None, gt=0)  # $ per GPU-hour on spot
    spot_interruptions_per_hour: float = Field(default=0.05, ge=0)  # per replica
    spot_notice_s: float = Field(default=120.0, ge=0)
    # the measured interconnect (`infertriage topology`'s inputs): plan uses its bandwidth
    nvidia_smi_topo: Path | None = None
    nccl_tests: tuple[Path, ...] = ()
    # modern topologies: xPyD for a rate, the KV link between the pools, a CPU KV tier
    rate: float | None = Field(default=None, gt=0)  # requests/s to size P/D and layouts for
    kv_link_gb_s: float = Field(default=50.0, gt=0, json_schema_extra={"flag": "--kv-link-gb-s"})
    kv_link_latency_s: float = Field(default=0.002, ge=0)  # per transfer
    offload_gb: float | None = Field(default=None, gt=0)  # a CPU KV tier per instance
    prefix_reuse: float | None = Field(default=None, ge=0, le=1)  # share of a prompt reused


class FleetSpec(CommandSpec):
    """A Prometheus query of the replicas a selector matches, over the last `window_s`."""

    prometheus_url: str = Field(json_schema_extra={"flag": "--prometheus"})
    selector: str
    window_s: float = Field(json_schema_extra={"flag": "--duration"})
    end_unix_s: float | None = None
    step_s: float | None = None
    rate_window_s: float | None = None
    imbalance_ratio: float = 1.5


class TopologySpec(CommandSpec):
    """`topology`: a host's measured interconnect against the TP degrees a model needs."""

    model: str
    gpu: str
    nvidia_smi_topo: Path | None = None  # `nvidia-smi topo -m` saved to a file
    nccl_tests: tuple[Path, ...] = ()  # nccl-tests `all_reduce_perf` outputs, one per rank count
    max_model_len: int = Field(default=8192, ge=1)
    concurrency: int = Field(default=64, ge=1)  # the planned batch per replica
    input_len: int | None = Field(default=None, ge=1)
    output_len: int | None = Field(default=None, ge=1)
    dtype: str = "bf16"
