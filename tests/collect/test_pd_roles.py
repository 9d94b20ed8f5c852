"""A prefill/decode deployment's roles named in collect (collect.adapters.screen): the label
`pd_role` copied from SGLang's `engine_type`, or from the pod label a vLLM deployment's
Prometheus relabelled (`engine_type`, `llm_d_ai_role`, `role`); a unified instance gets none;
the data-parallel rank beside it as before. Hand-written exposition lines, names from the
engines' sources (see tests/fixtures/metrics/pd/README.md)."""

from __future__ import annotations

import pytest

from infertriage.collect import Adapted, adapt_scrape, parse_metrics_text

MODEL = 'model_name="m"'


def _engine(text: str) -> Adapted:
    return adapt_scrape(parse_metrics_text(text, "dump"))[0]


def _roles(adapted: Adapted, name: str) -> dict[str, str | None]:
    """instance → its pd_role, for the scalars of `name`."""
    out: dict[str, str | None] = {}
    for scalar in adapted.scalars:
        if scalar.name == name:
            labels = dict(scalar.labels)
            out[labels.get("instance", "")] = labels.get("pd_role")
    return out


@pytest.mark.parametrize("label", ["engine_type", "llm_d_ai_role", "role"])
def test_a_vllm_pods_role_label_is_read_whichever_it_is(label: str) -> None:
    text = "\n".join(
        f'vllm:num_requests_running{{engine="0",instance="{i}",{label}="{role}",{MODEL}}} 3'
        for i, role in (("a", "prefill"), ("b", "Decode"), ("c", "both"))
    )
    adapted = _engine(text + "\n")
    assert _roles(adapted, "queue.running") == {"a": "prefill", "b": "decode", "c": None}
    assert all(dict(s.labels)["dp_rank"] == "0" for s in adapted.scalars)


def test_sglangs_engine_type_names_the_role_and_unified_names_none() -> None:
    base = 'tp_rank="0",pp_rank="0",moe_ep_rank="0",' + MODEL
    text = "".join(
        f'sglang:num_running_reqs{{engine_type="{role}",instance="{role}",{base}}} 5\n'
        for role in ("prefill", "decode", "unified")
    )
    adapted = _engine(text)
    assert _roles(adapted, "queue.running") == {
        "prefill": "prefill",
        "decode": "decode",
        "unified": None,
    }


def test_sglangs_disaggregation_metrics_map_in_si_units() -> None:
    base = 'engine_type="prefill",tp_rank="0",pp_rank="0",moe_ep_rank="0",' + MODEL
    stage, kv = "sglang:per_stage_req_latency_seconds", base + ',stage="prefill_transfer_kv_cache"'
    text = (
        f"sglang:kv_transfer_speed_gb_s{{{base}}} 2.0\n"
        f"sglang:kv_transfer_latency_ms{{{base}}} 40\n"
        f"sglang:kv_transfer_total_mb{{{base}}} 80\n"
        f"sglang:num_prefill_inflight_queue_reqs{{{base}}} 7\n"
        f"sglang:num_transfer_failed_reqs_total{{{base}}} 2\n"
        f'{stage}_bucket{{{kv},le="0.1"}} 4\n'
        f'{stage}_bucket{{{kv},le="+Inf"}} 5\n'
        f"{stage}_count{{{kv}}} 5\n"
        f"{stage}_sum{{{kv}}} 0.4\n"
        f'{stage}_bucket{{{base},stage="prefill_forward",le="+Inf"}} 9\n'
    )
    adapted = _engine(text)
    assert adapted.values("kv_transfer.speed") == (2.0 * 2**30,)  # GiB/s, as SGLang computes
    assert adapted.values("kv_transfer.latency") == pytest.approx((0.04,))
    assert adapted.values("kv_transfer.last_bytes") == (80 * 2**20,)
    assert adapted.values("pd.prefill_inflight_queue") == (7,)
    assert adapted.values("kv_transfer.failed") == (2,)
    (transfer,) = [h for h in adapted.histograms if h.name == "kv_transfer.time"]
    assert transfer.count == 5 and dict(transfer.labels)["stage"] == "prefill_transfer_kv_cache"


def test_vllms_nixl_series_map_to_the_transfer_names() -> None:
    labels = 'engine="0",' + MODEL
    text = (
        f'vllm:nixl_xfer_time_seconds_bucket{{{labels},le="0.005"}} 1\n'
        f'vllm:nixl_xfer_time_seconds_bucket{{{labels},le="+Inf"}} 2\n'
        f"vllm:nixl_xfer_time_seconds_count{{{labels}}} 2\n"
        f"vllm:nixl_xfer_time_seconds_sum{{{labels}}} 0.1\n"
        f"vllm:nixl_num_failed_transfers_total{{{labels}}} 1\n"
        f"vllm:nixl_num_kv_expired_reqs_total{{{labels}}} 3\n"
    )
    adapted = _engine(text)
    assert [h.count for h in adapted.histograms if h.name == "kv_transfer.time"] == [2]
    assert adapted.values("kv_transfer.failed") == (1,)
    assert adapted.values("kv_transfer.expired") == (3,)
