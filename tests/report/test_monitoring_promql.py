"""PromQL from the engine adapters: names as exported, generations as alternatives, SI units."""

from __future__ import annotations

import pytest

from infertriage.collect.adapters.dcgm import DCGM
from infertriage.engines import TGI, TRTLLM, VLLM
from infertriage.report.monitoring import Exporter, duration
from infertriage.report.monitoring.promql import why_missing


@pytest.mark.parametrize(
    ("seconds", "text"), [(300, "5m"), (90, "90s"), (0.5, "500ms"), (2, "2s"), (3600, "60m")]
)
def test_durations(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_vllm_generations_are_alternatives_newest_first_with_the_selector() -> None:
    vllm = Exporter(VLLM.metrics, 'job="vllm"')
    assert vllm.gauge("kv.usage", "max") == (
        '(max by (job, instance, namespace, pod) (vllm:kv_cache_usage_perc{job="vllm"})) or '
        '(max by (job, instance, namespace, pod) (vllm:gpu_cache_usage_perc{job="vllm"}))'
    )
    assert vllm.rate("preemptions", "5m") == (
        'sum by (job, instance, namespace, pod) (rate(vllm:num_preemptions_total{job="vllm"}[5m]))'
    )


def test_label_filters_and_units_come_from_the_adapter() -> None:
    trt = Exporter(TRTLLM.metrics)
    kv = trt.gauge("kv.usage", "max")
    assert kv is not None
    assert 'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"}' in kv
    ttft = trt.quantile("server.ttft", 0.95, "5m")
    assert ttft is not None and "nv_inference_first_response_histogram_ms_bucket" in ttft
    # trtllm-serve first, then Triton's opt-in histogram, which is in milliseconds
    assert ttft.startswith("(histogram_quantile(0.95, sum by (le, job) (rate(trtllm_time")
    assert ttft.endswith("(rate(nv_inference_first_response_histogram_ms_bucket[5m]))) * 0.001)")
    gpu = Exporter((DCGM,), by="job, instance, gpu")
    assert gpu.gauge("gpu.fb_used_bytes", "max") == (
        "max by (job, instance, gpu) (DCGM_FI_DEV_FB_USED) * 1048576"
    )


def test_counters_keep_the_name_the_server_exports() -> None:
    tgi = Exporter(TGI.metrics)
    assert tgi.rate("requests.finished", "5m") == (
        "sum by (job, instance, namespace, pod) (rate(tgi_request_success[5m]))"
    )
    assert tgi.gauge("kv.usage") is None
    assert why_missing(tgi, "kv.usage") == "TGI exports no KV-cache metrics"
