"""The offload tier's names in the vLLM and SGLang tables (issue 33): vLLM's prompt tokens by
source and connector counters in the real capture, the transfer direction read from its
label, the newer flat names first; SGLang's HiCache gauges."""

from __future__ import annotations

from pathlib import Path

from infertriage.collect import Availability
from infertriage.collect.adapters import Adapted, adapt_scrape
from infertriage.collect.parse import parse_metrics_text

DUMPS = Path(__file__).parent.parent / "fixtures" / "metrics" / "offload"


def _adapt(text: str, engine: str) -> Adapted:
    (adapted,) = [a for a in adapt_scrape(parse_metrics_text(text, "x")) if a.engine == engine]
    return adapted


def test_vllm_prompt_sources_and_connector_counters_in_the_real_capture(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    vllm = _adapt(Path(shared_fixture("metrics/vllm.txt")).read_text(), "vllm")
    assert sum(vllm.values("tokens.prompt_computed")) == 53
    assert sum(vllm.values("tokens.prompt_local_hit")) == 64
    assert sum(vllm.values("tokens.prompt_external")) == 0
    assert sum(vllm.values("prefix_cache.external_queries")) == 0
    status = vllm.status("kv.offload_load_bytes")
    assert status is not None and status.status is Availability.ABSENT
    assert "--kv-offloading-size" in status.note


def test_vllm_transfer_direction_comes_from_its_label() -> None:
    vllm = _adapt((DUMPS / "vllm-thrash.txt").read_text(), "vllm")
    assert sum(vllm.values("kv.offload_load_bytes")) == 1200 * 131072
    assert sum(vllm.values("kv.offload_store_bytes")) == 598_800 * 131072
    assert sum(vllm.values("kv.offload_store_seconds")) == 3.14


def test_vllm_newer_flat_names_win() -> None:
    text = (DUMPS / "vllm-thrash.txt").read_text() + (
        "# TYPE vllm:kv_offload_load_bytes_total counter\n"
        'vllm:kv_offload_load_bytes_total{engine="0",model_name="llama"} 42.0\n'
    )
    vllm = _adapt(text, "vllm")
    assert list(vllm.values("kv.offload_load_bytes")) == [42.0]
    status = vllm.status("kv.offload_load_bytes")
    assert status is not None and status.raw_name == "vllm:kv_offload_load_bytes_total"


def test_sglang_hicache_gauges() -> None:
    sglang = _adapt((DUMPS / "sglang-hicache.txt").read_text(), "sglang")
    assert sum(sglang.values("kv.offload_used_tokens")) == 999_000
    assert sum(sglang.values("kv.offload_total_tokens")) == 1_000_000
