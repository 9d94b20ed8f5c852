"""collect, level 2: local GPUs through NVML (the optional `gpu` extra, nvidia-ml-py).

Takes nothing but the machine; gives `NvmlSampler`, whose `sample()` is the
normalised GPU values of every local device (utilisation, memory, power,
clocks, PCIe throughput) with labels `gpu`, `UUID` and `modelName` as
dcgm-exporter names them, and `gpu_inventory()` for the environment
snapshot. nvidia-ml-py is imported only when asked for; without it, or
without a GPU and driver, `open_nvml` gives None and a one-sentence note.
NVML has no profiling counters (SM active, tensor, DRAM): those need DCGM.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infertriage.collect.adapters import NormScalar
from infertriage.schemas import RunClock, Sample

__all__ = ["GpuDevice", "NvmlSampler", "gpu_inventory", "open_nvml"]

_KIB = 1024


@dataclass(frozen=True, slots=True)
class GpuDevice:
    index: int
    name: str
    uuid: str
    memory_total_bytes: int


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlSampler:
    """An initialised NVML; call `close()` (or use `with`) when done."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        count = int(nvml.nvmlDeviceGetCount())
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self.devices = tuple(self._device(i, h) for i, h in enumerate(self._handles))

    def _device(self, index: int, handle: Any) -> GpuDevice:
        nvml = self._nvml
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        return GpuDevice(
            index=index,
            name=_text(nvml.nvmlDeviceGetName(handle)),
            uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
            memory_total_bytes=int(memory.total),
        )

    def driver_version(self) -> str | None:
        version = self._try(self._nvml.nvmlSystemGetDriverVersion)
        return None if version is None else _text(version)

    def cuda_version(self) -> str | None:
        version = self._try(lambda: int(self._nvml.nvmlSystemGetCudaDriverVersion_v2()))
        return None if version is None else f"{version // 1000}.{version % 1000 // 10}"

    def _try(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except self._nvml.NVMLError:
            return None

    def _values(self, handle: Any) -> dict[str, float | None]:
        nvml = self._nvml
        memory = self._try(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        util = self._try(lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        power = self._try(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        sm_clock = self._try(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
        mem_clock = self._try(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM))
        tx = self._try(
            lambda: nvml.nvmlDeviceGetPcieThroughput(handle, nvml.NVML_PCIE_UTIL_TX_BYTES)
        )
        rx = self._try(
            lambda: nvml.nvmlDeviceGetPcieThroughput(handle, nvml.NVML_PCIE_UTIL_RX_BYTES)
        )
        return {
            "gpu.util": None if util is None else util.gpu / 100.0,
            "gpu.fb_used_bytes": None if memory is None else float(memory.used),
            "gpu.fb_free_bytes": None if memory is None else float(memory.free),
            "gpu.fb_total_bytes": None if memory is None else float(memory.total),
            "gpu.power_watts": None if power is None else power / 1000.0,
            "gpu.sm_clock_hz": None if sm_clock is None else sm_clock * 1e6,
            "gpu.mem_clock_hz": None if mem_clock is None else mem_clock * 1e6,
            "gpu.pcie_tx_bytes": None if tx is None else tx * _KIB,
            "gpu.pcie_rx_bytes": None if rx is None else rx * _KIB,
        }

    def sample(self) -> list[NormScalar]:
        """One reading of every device, in the vocabulary's names and SI units."""
        out = []
        for device, handle in zip(self.devices, self._handles, strict=True):
            labels = (
                ("UUID", device.uuid),
                ("gpu", str(device.index)),
                ("modelName", device.name),
                ("raw", "nvml"),
            )
            for name, value in self._values(handle).items():
                if value is not None:
                    out.append(NormScalar(name, labels, float(value)))
        return out

    def samples(self, clock: RunClock) -> list[Sample]:
        t = clock.now_ts()
        return [Sample(t, s.name, s.value, dict(s.labels)) for s in self.sample()]

    def close(self) -> None:
        self._try(self._nvml.nvmlShutdown)

    def __enter__(self) -> NvmlSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_nvml() -> tuple[NvmlSampler | None, str]:
    """An NVML sampler, or None and why not: the extra is missing, or no GPU or driver."""
    try:
        nvml: Any = importlib.import_module("pynvml")
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install 'infertriage[gpu]'): no NVML."
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return None, f"no NVIDIA GPU or driver here: NVML did not start ({_text(err)})."
    try:
        return NvmlSampler(nvml), ""
    except nvml.NVMLError as err:
        nvml.nvmlShutdown()
        return None, f"NVML started but could not list the GPUs ({_text(err)})."


def gpu_inventory() -> tuple[list[GpuDevice], dict[str, str | None], str]:
    """Local devices, driver and CUDA versions through NVML, and a note when there is none."""
    sampler, note = open_nvml()
    if sampler is None:
        return [], {}, note
    with sampler:
        versions = {"driver": sampler.driver_version(), "cuda": sampler.cuda_version()}
        return list(sampler.devices), versions, ""
