"""diagnose end to end on the offload-thrash twin, at the load its scenario documents: the
real-time twin serves vLLM's offload counters, the scrape maps them, the signals read their
growth, and the memory layer warns that the tier does not pay (one real-time run, ~12 s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.api.diagnose import diagnose
from infertriage.api.specs import DiagnoseSpec
from infertriage.schemas import Layer, Status
from infertriage.workload import parse_workload

# 96 system prompts of 1,024 tokens drawn at random: twice the twin's GPU KV cache
WORKLOAD = "prefix:groups=96,prefix=1024,input=64,output=64"


@pytest.mark.slow
def test_offload_thrash_is_found_in_the_memory_layer(tmp_path: Path) -> None:
    spec = DiagnoseSpec(
        scenario="offload-thrash",
        workload=parse_workload(WORKLOAD),
        duration_s=5.0,
        out=tmp_path / "run",
    )
    diagnosis = diagnose(spec).diagnosis
    memory = diagnosis.layer(Layer.MEMORY)
    found = {f.id: f for f in memory.findings}
    assert "memory.offload_not_paying" in found, memory
    finding = found["memory.offload_not_paying"]
    assert finding.status is Status.WARNING  # stores cost bytes, not this run's latency
    shown = {item.signal: item.value for item in finding.evidence}
    assert shown["offload.hit_share"] < 0.05 and shown["offload.store_bytes"] > 0
    assert diagnosis.primary is None or diagnosis.primary.finding != finding.id
