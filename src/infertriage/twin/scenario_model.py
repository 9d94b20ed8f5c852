"""twin, level 2: the scenario file's schema (pydantic, every level closed to unknown keys).

Takes nothing; gives `Scenario` and its sections `EngineSettings`,
`SpeculativeSettings`, `FrontendSettings` and `FaultSettings`, whose defaults are
the healthy server (docs/commands/twin.md), and the layouts of several engines:
`DataParallelSettings` (ranks behind a balancer) and `DisaggregationSettings`
(prefill/decode instances and their KV link; off by default, not combined with
data_parallel.size above 1). Validation is strict: a string is never read as a
number or a boolean. Loading, the error sentences and the packaged files live in
`twin.scenario`.

Keys beyond the basic sections: `engine.num_gpu_blocks_override` (vLLM's
`--num-gpu-blocks-override`, to force KV pressure), `engine.launch_us_per_kernel`
(host time of one eager kernel launch, paid on every kernel when `cuda_graphs` is
off), `speculative.draft_cost_fraction` (one draft forward as a fraction of a
target decode step) and the `offload` section (a CPU KV-offload tier, `twin.offload`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

__all__ = [
    "DataParallelSettings",
    "DisaggregationSettings",
    "EngineSettings",
    "ExpertParallelSettings",
    "FaultSettings",
    "FrontendSettings",
    "OffloadSettings",
    "PipelineParallelSettings",
    "Scenario",
    "SpeculativeSettings",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class EngineSettings(_Section):
    """The engine's flags, named as vLLM names them."""

    max_num_seqs: int = Field(256, ge=1)
    max_num_batched_tokens: int = Field(8192, ge=1)
    max_model_len: int = Field(8192, ge=2)
    block_size: int = Field(16, ge=1)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    cuda_graphs: bool = True
    # vLLM's --async-scheduling (on by default since late 2025): step k+1 is scheduled while
    # step k runs, so host work hides behind the GPU's and a new request first runs in the
    # step after next.
    async_scheduling: bool = True
    attention_backend: Literal["flash", "naive"] = "flash"
    scheduler_overhead_us_per_seq: float = Field(20.0, ge=0)
    load_time_s: float = Field(1.0, ge=0)
    num_gpu_blocks_override: int | None = Field(None, ge=2)
    launch_us_per_kernel: float = Field(12.0, ge=0)


class SpeculativeSettings(_Section):
    """Speculative decoding: `num_draft_tokens` 0 turns it off.

    `acceptance_rate` is the chance that a draft token is accepted given that every
    earlier one in its step was, so the measured rate (accepted / drafted) is lower.
    """

    num_draft_tokens: int = Field(0, ge=0, le=16)
    acceptance_rate: float = Field(0.7, ge=0, le=1)
    draft_cost_fraction: float = Field(0.05, ge=0, le=1)


# A request's hand-off between vLLM's API server and its engine core process, there and
# back (IPC, request set-up, the first output's processing), beyond the modelled tokenize
# and serialize work: the median of real minus twin TTFT over the real vLLM H100 stages
# that held (`benchmarks/twin_vs_vllm.py --fit-handoff`).
HANDOFF_MS = 3.8


class FrontendSettings(_Section):
    """CPU cost of the API server's work, per prompt token, output token and streamed chunk,
    and the latency a request pays once to reach the engine core."""

    tokenize_us_per_token: float = Field(1.0, ge=0)
    detokenize_us_per_token: float = Field(2.0, ge=0)
    serialize_us_per_chunk: float = Field(20.0, ge=0)
    handoff_ms: float = Field(HANDOFF_MS, ge=0)


class FaultSettings(_Section):
    """Injected faults: blocks each finished request never returns; a fraction of requests fail."""

    kv_leak_blocks_per_request: int = Field(0, ge=0)
    error_rate: float = Field(0.0, ge=0, le=1)


# ---- data parallelism and prefill/decode disaggregation (twin.ranks, twin.disagg) ----
class DataParallelSettings(_Section):
    """`size` engines (each its own engine core and KV cache) behind one API server.

    `balancer` picks each request's rank at arrival: `least_loaded` is vLLM's own DP front
    end (the rank with the least `waiting × 4 + running`), `round_robin` a blind external
    balancer, `prefix_aware` routes by the prompt's leading blocks to the rank that cached
    them (least loaded when none has, or when that rank is much busier). `rank_speed` is
    each rank's speed (1.0 healthy; 0.5: its steps take twice as long, a throttled GPU).
    """

    size: int = Field(1, ge=1, le=64)
    balancer: Literal["least_loaded", "round_robin", "prefix_aware"] = "least_loaded"
    rank_speed: list[float] | None = None

    @model_validator(mode="after")
    def _speeds_match(self) -> DataParallelSettings:
        speeds = self.rank_speed
        if speeds is not None and (len(speeds) != self.size or min(speeds) <= 0):
            raise ValueError(
                f"data_parallel.rank_speed must list {self.size} speeds above 0, one per rank"
            )
        return self


class DisaggregationSettings(_Section):
    """Prefill/decode disaggregation (xPyD): prompts run on prefill instances, their KV cache
    moves over a link to a decode instance, which streams the output.

    Each decode instance pulls over a link of its own: `link_gb_s` (GB/s, 1e9 bytes) and
    `link_latency_ms`; its transfers queue on it in arrival order. `transfer_setup_ms` is
    the NIXL post (the request for the transfer) paid before each one.
    """

    prefill_instances: int = Field(1, ge=1, le=64)
    decode_instances: int = Field(1, ge=1, le=64)
    link_gb_s: float = Field(25.0, gt=0)
    link_latency_ms: float = Field(0.05, ge=0)
    transfer_setup_ms: float = Field(0.5, ge=0)


class OffloadSettings(_Section):
    """A CPU KV-offload tier (vLLM `--kv-offloading-size`, SGLang HiCache): `cpu_blocks` 0 is
    off; `load_gb_s` host→GPU and `store_gb_s` GPU→host bandwidth (default: `load_gb_s`)."""

    cpu_blocks: int = Field(0, ge=0)
    load_gb_s: float = Field(25.0, gt=0)  # pinned host memory over PCIe Gen4 x16
    store_gb_s: float | None = Field(None, gt=0)


# ---------------------------------------------------------------- expert and pipeline parallelism
class ExpertParallelSettings(_Section):
    """Expert parallelism of a MoE model (vLLM `--enable-expert-parallel`, SGLang `--ep-size`):
    the routed experts spread over `size` GPUs (the tensor-parallel group's, as vLLM lays
    them out), each GPU's all-to-all waiting for the busiest.

    `hot_expert_skew` is the busiest EP rank's routed tokens over the mean rank's, after
    whatever balancing runs (1.0: even); the MoE part of every step costs that much more,
    as the step waits for the hottest rank. `eplb` is vLLM's `--enable-eplb`: only with it
    does vLLM measure the balance and publish it (`vllm:eplb_balancedness_*`, the mean over
    the max of the ranks' tokens, the inverse of the skew).
    """

    size: int = Field(1, ge=1, le=64)
    hot_expert_skew: float = Field(1.0, ge=1.0, le=64.0)
    eplb: bool = False


class PipelineParallelSettings(_Section):
    """Pipeline parallelism (vLLM `--pipeline-parallel-size`, SGLang `--pp-size`): the layers
    split over `size` stages of `tensor_parallel` GPUs each.

    `micro_batches` is how many batches are in flight at once (vLLM runs as many as there
    are stages; None means that); with fewer, each stage idles while the others work (the
    bubble). `stage_imbalance` is the slowest stage's time over the mean stage's (1.0: the
    layers split evenly); the slowest stage sets the pace of the pipeline.
    """

    size: int = Field(1, ge=1, le=64)
    micro_batches: int | None = Field(None, ge=1, le=256)
    stage_imbalance: float = Field(1.0, ge=1.0, le=64.0)

    @property
    def in_flight(self) -> int:
        """The micro-batches in flight: the stages' count unless set."""
        return self.size if self.micro_batches is None else self.micro_batches


class Scenario(_Section):
    """One twin configuration; every key optional, the defaults are the healthy server."""

    description: str = "A healthy Llama-3.1-8B server on one H100: no bottleneck at moderate load."
    model: str = "llama-3.1-8b"
    dtype: str = "bf16"
    gpu: str = "H100-SXM"
    tensor_parallel: int = Field(1, ge=1, le=64)
    interconnect: Literal["nvlink", "pcie"] = "nvlink"
    engine: EngineSettings = EngineSettings()
    speculative: SpeculativeSettings = SpeculativeSettings()
    frontend: FrontendSettings = FrontendSettings()
    faults: FaultSettings = FaultSettings()
    data_parallel: DataParallelSettings = DataParallelSettings()
    disaggregation: DisaggregationSettings | None = None
    offload: OffloadSettings = OffloadSettings()
    expert_parallel: ExpertParallelSettings = ExpertParallelSettings()
    pipeline_parallel: PipelineParallelSettings = PipelineParallelSettings()
    # the load the scenario is documented at (any `--workload` spec): `diagnose --scenario`
    # sends it when no --workload is given; None: the chat mix
    workload: str | None = None
    seed: int = 0

    _source: str = PrivateAttr(default="<defaults>")
    _base_dir: str | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _one_layout(self) -> Scenario:
        if self.disaggregation is not None and self.data_parallel.size > 1:
            raise ValueError(
                "data_parallel.size above 1 and disaggregation cannot be combined in the twin: "
                "give one of them"
            )
        return self

    @property
    def source(self) -> str:
        """Where the scenario came from: a packaged name, a file path, or `<defaults>`."""
        return self._source

    @property
    def base_dir(self) -> str | None:
        """The folder relative model paths are read from (the YAML's folder)."""
        return self._base_dir
