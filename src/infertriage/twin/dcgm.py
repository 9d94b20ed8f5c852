"""twin, level 2: `/dcgm/metrics` in dcgm-exporter's names, derived from the simulated work.

Takes the engine's cumulative `GpuCounters` and the wall time between two
scrapes; gives dcgm-exporter text: each field averaged over that window, as
dcgm-exporter averages over its sampling interval. `DCGM_FI_DEV_GPU_UTIL`
misleads as the real one does: it is the share of time *any* kernel runs,
so a launch-bound engine reads ~100 % while its SMs sit mostly idle
(`DCGM_FI_PROF_SM_ACTIVE`). Every GPU of a tensor-parallel group reports
the same values; under pipeline parallelism each stage's GPUs report their own
activity (`GpuIdentity.activity`: each GPU's share of the busiest GPU's, from
`costmodel.gpu_activity`): a stage waiting on the others spins in its NCCL
send/receive, so its GPU_UTIL and GR_ENGINE_ACTIVE read as busy as the busiest
stage's while its SM_ACTIVE (and tensor and DRAM activity) falls to its own share.
Power and clocks are rough (idle plus a share of board power proportional to
SM and DRAM activity); the rest follows the engine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from infertriage.twin.engine import GpuCounters

__all__ = ["DcgmExporter", "GpuIdentity"]

_MIB = 1024**2
_IDLE_WATTS = 70.0
_MAX_SM_MHZ = 1980
_SM_BUSY_NCCL = 0.15  # SMs an NCCL kernel keeps busy while it waits (costmodel's figure)
_HELP = {
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_DEV_SM_CLOCK": "SM clock frequency (in MHz).",
    "DCGM_FI_DEV_POWER_USAGE": "Power draw (in W).",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
    "DCGM_FI_DEV_FB_FREE": "Framebuffer memory free (in MiB).",
    "DCGM_FI_DEV_XID_ERRORS": "Value of the last XID error encountered.",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "Ratio of time the graphics engine is active.",
    "DCGM_FI_PROF_SM_ACTIVE": "The ratio of cycles an SM has at least 1 warp assigned.",
    "DCGM_FI_PROF_SM_OCCUPANCY": "The ratio of number of warps resident on an SM.",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "Ratio of cycles the tensor (HMMA) pipe is active.",
    "DCGM_FI_PROF_DRAM_ACTIVE": "Ratio of cycles the device memory interface is active.",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "The rate of data transmitted over the PCIe bus in bytes/s.",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "The rate of data received over the PCIe bus in bytes/s.",
    "DCGM_FI_PROF_NVLINK_TX_BYTES": "The rate of data transmitted over NVLink in bytes/s.",
    "DCGM_FI_PROF_NVLINK_RX_BYTES": "The rate of data received over NVLink in bytes/s.",
}


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    model_name: str  # as NVML names it, e.g. "NVIDIA H100 80GB HBM3"
    num_gpus: int
    memory_bytes: int
    used_bytes: int  # what the engine holds: weights, KV cache, activations, context
    board_watts: float
    link: str  # nvlink | pcie
    # each GPU's activity over the busiest GPU's (whose the engine's counters are); empty:
    # every GPU alike
    activity: tuple[float, ...] = ()

    def share(self, gpu: int) -> float:
        return self.activity[gpu] if gpu < len(self.activity) else 1.0


def _labels(gpu: int, identity: GpuIdentity) -> str:
    uuid = f"GPU-7717{gpu:04d}-0000-4000-8000-twin00000000"
    return (
        f'gpu="{gpu}",UUID="{uuid}",device="nvidia{gpu}",'
        f'modelName="{identity.model_name}",Hostname="infertriage-twin"'
    )


class DcgmExporter:
    """Renders the fields over the window since the previous scrape."""

    def __init__(self, identity: GpuIdentity, counters: Callable[[], GpuCounters]) -> None:
        self.identity = identity
        self._counters = counters
        self._lock = threading.Lock()
        self._last = (time.monotonic(), counters())

    def _window(self) -> tuple[float, GpuCounters, GpuCounters]:
        now, current = time.monotonic(), self._counters()
        with self._lock:
            then, before = self._last
            self._last = (now, current)
        return max(now - then, 1e-3), before, current

    def render(self) -> bytes:
        wall, a, b = self._window()

        def share(field: str) -> float:
            delta: float = getattr(b, field) - getattr(a, field)
            return min(1.0, max(0.0, delta / wall))

        ident = self.identity
        comm_rate = (b.comm_bytes - a.comm_bytes) / wall
        busiest = {
            field: share(field)
            for field in ("util_busy_s", "sm_active_s", "dram_active_s", "tensor_active_s")
        }
        per_gpu = [
            _fields(ident, _stage_activity(busiest, ident.share(gpu)), comm_rate)
            for gpu in range(ident.num_gpus)
        ]
        lines: list[str] = []
        for name, text in _HELP.items():
            lines.append(f"# HELP {name} {text}")
            lines.append(f"# TYPE {name} gauge")
            for gpu, values in enumerate(per_gpu):
                lines.append(f"{name}{{{_labels(gpu, ident)}}} {_number(values[name])}")
        return ("\n".join(lines) + "\n").encode()


def _stage_activity(busiest: dict[str, float], share: float) -> dict[str, float]:
    """A pipeline stage's GPU from the busiest's: its own kernels are `share` of the busiest's;
    while it waits for the other stages its NCCL send/receive kernels spin, which the coarse
    counters (GPU_UTIL, GR_ENGINE_ACTIVE) read as busy and the SMs barely feel."""
    own = {k: v * share for k, v in busiest.items()}
    waiting = busiest["util_busy_s"] - own["util_busy_s"]
    own["util_busy_s"] = busiest["util_busy_s"]
    own["sm_active_s"] += waiting * _SM_BUSY_NCCL
    return own


def _fields(ident: GpuIdentity, active: dict[str, float], comm_rate: float) -> dict[str, float]:
    """One GPU's fields from its activity shares over the window."""
    util, sm_active, dram = active["util_busy_s"], active["sm_active_s"], active["dram_active_s"]
    nvlink = comm_rate if ident.link == "nvlink" else 0.0
    pcie = comm_rate if ident.link != "nvlink" else 0.0
    return {
        "DCGM_FI_DEV_GPU_UTIL": round(util * 100),
        "DCGM_FI_DEV_SM_CLOCK": _MAX_SM_MHZ,
        "DCGM_FI_DEV_POWER_USAGE": _IDLE_WATTS
        + (ident.board_watts - _IDLE_WATTS) * (0.6 * sm_active + 0.4 * dram),
        "DCGM_FI_DEV_FB_USED": ident.used_bytes // _MIB,
        "DCGM_FI_DEV_FB_FREE": (ident.memory_bytes - ident.used_bytes) // _MIB,
        "DCGM_FI_DEV_XID_ERRORS": 0,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": util,
        "DCGM_FI_PROF_SM_ACTIVE": sm_active,
        "DCGM_FI_PROF_SM_OCCUPANCY": sm_active * 0.5,
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": active["tensor_active_s"],
        "DCGM_FI_PROF_DRAM_ACTIVE": dram,
        "DCGM_FI_PROF_PCIE_TX_BYTES": pcie,
        "DCGM_FI_PROF_PCIE_RX_BYTES": pcie,
        "DCGM_FI_PROF_NVLINK_TX_BYTES": nvlink,
        "DCGM_FI_PROF_NVLINK_RX_BYTES": nvlink,
    }


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.6f}"
