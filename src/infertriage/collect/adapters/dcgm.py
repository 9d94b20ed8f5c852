"""collect, level 2: the dcgm-exporter adapter (`DCGM_FI_*` names).

Takes nothing; gives `DCGM`. Utilisation fields come in percent, memory in
MiB and clocks in MHz; they are scaled to fractions, bytes and Hz. The
profiling (`DCGM_FI_PROF_*`) fields are ratios already; they are commented out
in dcgm-exporter's default counters file, so "absent" usually means "not
enabled", which is different from a real zero. `PROF_PCIE/NVLINK_*_BYTES` are
rates in bytes per second although the exporter types them counters.
"""

from __future__ import annotations

from infertriage.collect.adapters.base import Adapter, Source, metric
from infertriage.schemas import MIB, VOCABULARY

__all__ = ["DCGM", "DCGM_PROFILING"]

_PERCENT = 0.01
_MHZ = 1e6


def _enable(field: str) -> str:
    needs = "NVLink GPUs only; " if "NVLINK" in field else ""
    return (
        f"enable it: add `{field}, gauge, …` to dcgm-exporter's counters CSV (-f, e.g. "
        f"dcp-metrics-included.csv); {needs}profiling fields need a data-centre GPU and DCGM's "
        "profiling module, and no other profiler (Nsight) attached"
    )


DCGM_PROFILING = (
    ("gpu.gr_engine_active", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
    ("gpu.sm_active", "DCGM_FI_PROF_SM_ACTIVE"),
    ("gpu.sm_occupancy", "DCGM_FI_PROF_SM_OCCUPANCY"),
    ("gpu.tensor_active", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
    ("gpu.dram_active", "DCGM_FI_PROF_DRAM_ACTIVE"),
    ("gpu.pcie_tx_bytes", "DCGM_FI_PROF_PCIE_TX_BYTES"),
    ("gpu.pcie_rx_bytes", "DCGM_FI_PROF_PCIE_RX_BYTES"),
    ("gpu.nvlink_tx_bytes", "DCGM_FI_PROF_NVLINK_TX_BYTES"),
    ("gpu.nvlink_rx_bytes", "DCGM_FI_PROF_NVLINK_RX_BYTES"),
)

DCGM = Adapter(
    engine="dcgm",
    title="dcgm-exporter",
    prefixes=("DCGM_FI_",),
    domain=frozenset(name for name in VOCABULARY if name.startswith("gpu.")),
    mappings=(
        metric("gpu.util", Source("DCGM_FI_DEV_GPU_UTIL", _PERCENT), note="time any kernel ran"),
        *(metric(name, field, enable=_enable(field)) for name, field in DCGM_PROFILING),
        metric("gpu.fb_used_bytes", Source("DCGM_FI_DEV_FB_USED", MIB)),
        metric("gpu.fb_free_bytes", Source("DCGM_FI_DEV_FB_FREE", MIB)),
        metric("gpu.fb_total_bytes", Source("DCGM_FI_DEV_FB_TOTAL", MIB)),
        metric("gpu.power_watts", "DCGM_FI_DEV_POWER_USAGE"),
        metric("gpu.sm_clock_hz", Source("DCGM_FI_DEV_SM_CLOCK", _MHZ)),
        metric("gpu.mem_clock_hz", Source("DCGM_FI_DEV_MEM_CLOCK", _MHZ)),
        metric("gpu.xid_errors", "DCGM_FI_DEV_XID_ERRORS", note="the last XID error code, 0: none"),
    ),
)
