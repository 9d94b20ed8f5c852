"""memory.offload_not_paying (diagnose.rules.offload): a KV offload tier that finds little or
loads slower than recompute; silent on one that pays, on a prefill/decode connector, on a
tier whose hits cannot be told (SGLang), and on a server without one. The evidence comes
from hand-written dumps (tests/fixtures/metrics/offload) read as two scrapes."""

from __future__ import annotations

from infertriage.analyze.signals.offload import offload_signals
from infertriage.diagnose import RULES, Evidence
from infertriage.schemas import Status, Thresholds

from ..analyze.test_offload_signals import load_window
from .evidence_helpers import make_evidence

RULE = RULES["memory.offload_not_paying"]


def evidence_of(dump: str, **overrides: float | None) -> Evidence:
    return make_evidence(**overrides).merged(offload_signals(load_window(dump), 0.0, 60.0))


def test_a_tier_that_finds_nothing_is_a_warning_naming_the_size_flag() -> None:
    finding = RULE.fn(evidence_of("vllm-thrash.txt"), Thresholds())
    assert finding is not None and finding.status is Status.WARNING
    assert "its lookups found 0.2% of the tokens asked" in finding.title
    assert any("--kv-offloading-size" in step for step in finding.next_steps)
    assert any("turn it off" in step for step in finding.next_steps)
    assert {item.signal for item in finding.evidence} >= {
        "offload.hit_share",
        "offload.external_queries",
        "offload.store_bytes",
    }


def test_lmcache_as_the_tier_is_judged_the_same() -> None:
    finding = RULE.fn(evidence_of("vllm-lmcache-thrash.txt"), Thresholds())
    assert finding is not None and "0.2%" in finding.title


def test_a_load_slower_than_recompute_and_a_missed_ttft_is_a_bottleneck() -> None:
    finding = RULE.fn(evidence_of("vllm-slow-load.txt"), Thresholds())
    assert finding is not None and finding.status is Status.WARNING
    assert "a load takes 2.5× the prefill it replaces" in finding.title
    missed = RULE.fn(evidence_of("vllm-slow-load.txt", client__ttft_p95_s=0.9), Thresholds())
    assert missed is not None and missed.status is Status.BOTTLENECK
    assert any("PCIe" in step for step in missed.next_steps)


def test_silent_on_a_tier_that_pays() -> None:
    assert RULE.fn(evidence_of("vllm-helps.txt"), Thresholds()) is None
    slow_ttft = evidence_of("vllm-helps.txt", client__ttft_p95_s=0.9)
    assert RULE.fn(slow_ttft, Thresholds()) is None  # the tier is not why


def test_silent_on_a_prefill_decode_connector_and_on_sglangs_unjudgeable_tier() -> None:
    assert RULE.fn(evidence_of("vllm-pd-prefill.txt"), Thresholds()) is None
    assert RULE.fn(evidence_of("sglang-hicache.txt"), Thresholds()) is None


def test_silent_without_offload_evidence_and_below_the_lookups_it_needs() -> None:
    assert RULE.fn(make_evidence(), Thresholds()) is None
    few = Thresholds().replace(offload_min_queries=1_000_000.0)
    assert RULE.fn(evidence_of("vllm-thrash.txt"), few) is None


def test_sglang_names_its_own_flag() -> None:
    ev = evidence_of("vllm-thrash.txt")
    finding = RULE.fn(Evidence(ev.signals, "sglang"), Thresholds())
    assert finding is not None
    assert any("`--hicache-size`" in step for step in finding.next_steps)
