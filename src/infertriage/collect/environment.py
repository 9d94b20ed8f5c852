"""collect, level 2: the environment snapshot for run.json.

Takes nothing but the machine (and the engine version the server reported);
gives run.json's `RunEnvironment` (`schemas`): Python, OS, CPU and memory, the versions of
infertriage and the packages it leans on, GPU models with driver and CUDA
versions (NVML, or `nvidia-smi` when nvidia-ml-py is missing) and the GPU
topology (`nvidia-smi topo -m`) where available. What could not be learned
is a note, not an error.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
import sys
from importlib import metadata

import psutil

from infertriage import __version__
from infertriage.collect.gpu import gpu_inventory
from infertriage.schemas import GpuInfo, RunEnvironment

__all__ = ["PACKAGES", "snapshot_environment"]

PACKAGES = (
    "aiohttp",
    "numpy",
    "orjson",
    "prometheus-client",
    "psutil",
    "pydantic",
    "nvidia-ml-py",
    "torch",
    "vllm",
    "sglang",
    "tensorrt-llm",
)
_CUDA_IN_SMI = re.compile(r"CUDA Version:\s*([0-9.]+)")


def _packages() -> dict[str, str]:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _nvidia_smi(args: list[str], timeout_s: float) -> str | None:
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return None
    try:
        done = subprocess.run(
            [binary, *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (subprocess.TimeoutExpired, OSError):
        return None
    return done.stdout if done.returncode == 0 else None


def _gpus_from_smi(timeout_s: float) -> tuple[list[GpuInfo], str | None, str | None]:
    query = "--query-gpu=index,name,uuid,memory.total,driver_version"
    text = _nvidia_smi([query, "--format=csv,noheader,nounits"], timeout_s)
    if not text:
        return [], None, None
    gpus, driver = [], None
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 5:
            gpus.append(
                GpuInfo(
                    index=int(parts[0]),
                    name=parts[1],
                    uuid=parts[2],
                    memory_total_bytes=int(float(parts[3]) * 1024**2),
                )
            )
            driver = parts[4]
    header = _nvidia_smi([], timeout_s) or ""
    match = _CUDA_IN_SMI.search(header)
    return gpus, driver, match.group(1) if match else None


def snapshot_environment(
    *,
    engine: str | None = None,
    engine_version: str | None = None,
    nvidia_smi_timeout_s: float = 10.0,
) -> RunEnvironment:
    """What this machine is; GPUs from NVML first, then nvidia-smi, else a note."""
    notes: list[str] = []
    devices, versions, note = gpu_inventory()
    gpus = [
        GpuInfo(index=d.index, name=d.name, uuid=d.uuid, memory_total_bytes=d.memory_total_bytes)
        for d in devices
    ]
    driver, cuda = versions.get("driver"), versions.get("cuda")
    if not gpus:
        gpus, driver, cuda = _gpus_from_smi(nvidia_smi_timeout_s)
        if not gpus:
            notes.append(note or "no local GPU found.")
    topology = _nvidia_smi(["topo", "-m"], nvidia_smi_timeout_s) if gpus else None
    if gpus and topology is None:
        notes.append("nvidia-smi topo -m is not available: GPU topology unknown.")
    return RunEnvironment(
        python=sys.version.split()[0],
        platform=platform.platform(),
        machine=platform.machine(),
        cpu_count=psutil.cpu_count(logical=True),
        mem_total_bytes=int(psutil.virtual_memory().total),
        infertriage=__version__,
        packages=_packages(),
        gpus=gpus,
        driver_version=driver,
        cuda_version=cuda,
        topology=topology.strip() if topology else None,
        engine=engine,
        engine_version=engine_version,
        notes=notes,
    )
