"""plan, level 1: the GPU catalogue.

Takes a GPU name as a user or a driver writes it (`H100`, `h100-sxm`,
`H100_SXM`, `NVIDIA H100 80GB HBM3`); gives a frozen `GpuSpec` from the
packaged `data/gpus.json`: dense tensor-core peaks, memory size and
bandwidth, the GPU-to-GPU link and PCIe, each row with its source.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from infertriage.schemas.errors import UserError

__all__ = ["GpuSpec", "LinkKind", "get_gpu", "list_gpus"]

LinkKind = Literal["nvlink", "infinity-fabric", "pcie"]
_VENDOR_PREFIXES = ("nvidia", "amd")


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One accelerator. FLOP/s are dense (no 2:4 sparsity); link bandwidths are one direction."""

    name: str
    vendor: str
    memory_bytes: int
    memory_gib_marketed: float
    mem_bw_bytes_per_s: float
    bf16_flops_per_s: float
    fp8_flops_per_s: float | None
    link: LinkKind
    link_bw_bytes_per_s: float
    pcie_gen: int
    pcie_bw_bytes_per_s: float
    source: str
    aliases: tuple[str, ...] = ()
    generation: str = "hopper"  # architecture, keys the cost model's fitted constants

    @property
    def has_fp8(self) -> bool:
        return self.fp8_flops_per_s is not None


class _GpuRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    aliases: list[str] = Field(default_factory=list)
    generation: Literal["ampere", "ada", "hopper", "blackwell", "cdna3"]
    vendor: str
    memory_bytes: int = Field(gt=0)
    memory_gib_marketed: float = Field(gt=0)
    mem_bw_bytes_per_s: float = Field(gt=0)
    bf16_flops_per_s: float = Field(gt=0)
    fp8_flops_per_s: float | None = Field(default=None, gt=0)
    link: LinkKind
    link_bw_bytes_per_s: float = Field(gt=0)
    pcie_gen: int = Field(ge=3)
    pcie_bw_bytes_per_s: float = Field(gt=0)
    source: str = Field(min_length=1)


class _GpuCatalog(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    note: str = Field(alias="_note")
    gpus: list[_GpuRow]


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@cache
def _catalog() -> tuple[tuple[GpuSpec, ...], dict[str, GpuSpec]]:
    text = resources.files("infertriage.plan").joinpath("data/gpus.json").read_text("utf-8")
    catalog = _GpuCatalog.model_validate_json(text)
    specs = tuple(
        GpuSpec(**row.model_dump(exclude={"aliases"}), aliases=tuple(row.aliases))
        for row in catalog.gpus
    )
    index: dict[str, GpuSpec] = {}
    for spec in specs:
        for alias in (spec.name, *spec.aliases):
            index[_key(alias)] = spec
    return specs, index


def list_gpus() -> list[str]:
    """The catalogue's GPU names, in catalogue order."""
    return [spec.name for spec in _catalog()[0]]


def get_gpu(name: str) -> GpuSpec:
    """The catalogued GPU `name` names, case- and punctuation-insensitive.

    Raises `UserError` listing the known names when there is none.
    """
    index = _catalog()[1]
    key = _key(name)
    candidates = [key] + [key[len(p) :] for p in _VENDOR_PREFIXES if key.startswith(p)]
    for candidate in candidates:
        if candidate in index:
            return index[candidate]
    close = difflib.get_close_matches(key, index, n=1, cutoff=0.75)
    guess = f" (did you mean {index[close[0]].name}?)" if close else ""
    raise UserError(f"unknown GPU {name!r}{guess}; known GPUs: {', '.join(list_gpus())}.")
