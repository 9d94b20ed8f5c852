"""analyze.signals.offload: a KV offload tier's figures from two scrapes of hand-written dumps
(tests/fixtures/metrics/offload: vLLM's and SGLang's source names, not captures)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infertriage.analyze.signals.offload import offload_signals
from infertriage.collect.adapters import adapt_scrape
from infertriage.collect.parse import parse_metrics_text
from infertriage.collect.scraper import samples_of
from infertriage.schemas import Sample, Signal

DUMPS = Path(__file__).parent.parent / "fixtures" / "metrics" / "offload"
_VALUE = re.compile(r"^([^#\s][^ ]*) \S+$", re.MULTILINE)


def load_window(name: str, seconds: float = 60.0) -> list[Sample]:
    """The dump as scraped `seconds` after a start at which every value read 0."""
    text = (DUMPS / name).read_text()
    zero = _VALUE.sub(r"\1 0.0", text)
    return [
        *samples_of(0.0, adapt_scrape(parse_metrics_text(zero, name))),
        *samples_of(seconds, adapt_scrape(parse_metrics_text(text, name))),
    ]


def signals_of(name: str) -> dict[str, Signal]:
    return {s.name: s for s in offload_signals(load_window(name), 0.0, 60.0)}


def test_a_tier_that_finds_nothing_while_storing_everything() -> None:
    found = signals_of("vllm-thrash.txt")
    assert found["offload.external_queries"].value == 600_000
    assert found["offload.hit_share"].value == pytest.approx(0.002)
    assert found["offload.tier"].value == 1.0
    assert found["offload.returned_share"].value == pytest.approx(1200 / 598_800)
    assert found["offload.store_bytes"].unit == "bytes"


def test_a_tier_that_pays_loads_faster_than_the_prefill_it_replaces() -> None:
    found = signals_of("vllm-helps.txt")
    assert found["offload.hit_share"].value == pytest.approx(0.55)
    assert found["offload.loaded_tokens"].value == 330_000
    load = found["offload.load_s_per_token"].value
    recompute = found["offload.recompute_s_per_token"].value
    assert load == pytest.approx(1.73 / 330_000)
    assert recompute == pytest.approx((60 - 1.73) / 270_000)
    assert load < recompute / 10


def test_a_prefill_decode_connector_is_no_tier() -> None:
    found = signals_of("vllm-pd-prefill.txt")
    assert found["offload.hit_share"].value == 0.0
    assert "offload.tier" not in found and "offload.store_bytes" not in found


def test_lmcaches_usage_says_a_tier_is_there() -> None:
    assert signals_of("vllm-lmcache-thrash.txt")["offload.tier"].value == 1.0


def test_sglang_hicache_usage_without_hit_counters() -> None:
    found = signals_of("sglang-hicache.txt")
    assert found["offload.host_usage_max"].value == pytest.approx(0.999)
    assert found["offload.tier"].value == 1.0
    assert "offload.hit_share" not in found


def test_nothing_from_a_server_without_these_counters() -> None:
    samples = [Sample(0.0, "kv.usage", 0.5), Sample(60.0, "kv.usage", 0.6)]
    assert offload_signals(samples, 0.0, 60.0) == []
