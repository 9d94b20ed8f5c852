"""Prefill/decode disaggregation and prefix affinity (diagnose.rules.disagg), end to end on the
hand-made dumps of tests/fixtures/metrics/pd (read by the parser `diagnose --metrics-file` and
`infertriage metrics FILE` use) and on evidence: each rule fires on its case and stays silent
on the healthy counterpart; data-parallel ranks are compared within a role, never prefill
against decode."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from infertriage.analyze.signals.ranks import rank_signals
from infertriage.api.diagnose import diagnose_metrics_file
from infertriage.cli import main
from infertriage.diagnose import RULES, diagnose_evidence
from infertriage.schemas import Diagnosis, Layer, Sample, Status, Thresholds

from .evidence_helpers import DP_EVEN, PD_HEALTHY, make_evidence

DUMPS = Path(__file__).parents[1] / "fixtures" / "metrics" / "pd"
KV_BOUND = RULES["parallelism.kv_transfer_bound"]
RATIO = RULES["parallelism.pd_ratio_mismatch"]
AFFINITY = RULES["parallelism.prefix_affinity_lost"]


def _maker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pd_dumps", DUMPS / "make_dumps.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _diagnose(name: str) -> Diagnosis:
    return diagnose_metrics_file(DUMPS / name, Thresholds()).diagnosis


def _ids(diagnosis: Diagnosis, layer: Layer = Layer.PARALLELISM) -> dict[str, Status]:
    return {f.id: f.status for f in diagnosis.layer(layer).findings}


def test_the_dumps_are_what_make_dumps_writes() -> None:
    dumps = _maker().DUMPS
    assert sorted(dumps) == sorted(p.name for p in DUMPS.glob("*.txt"))
    for name, make in dumps.items():
        assert (DUMPS / name).read_text() == make(), name


# --- parallelism.kv_transfer_bound ---


def test_a_slow_nixl_link_is_the_primary_with_the_connector_settings() -> None:
    diagnosis = _diagnose("vllm_1p1d_slow_link.txt")
    assert diagnosis.primary is not None
    assert diagnosis.primary.finding == "parallelism.kv_transfer_bound"
    finding = next(f for f in diagnosis.layer(Layer.PARALLELISM).findings)
    assert finding.status is Status.BOTTLENECK
    assert "mean KV transfer (600 ms) is 72%" in finding.title
    assert "160 MiB a transfer, 0.28 GB/s achieved" in finding.title
    steps = " ".join(finding.next_steps)
    assert "--kv-transfer-config" in steps and "NixlConnector" in steps
    assert "kv_buffer_device" in steps and "UCX_TLS" in steps and "ib_write_bw" in steps
    shown = {e.signal: e.threshold for e in finding.evidence}
    assert shown["pd.transfer_ttft_share"] == Thresholds().pd_transfer_share


def test_sglangs_slow_and_failing_transfers_name_its_backend_flags() -> None:
    diagnosis = _diagnose("sglang_1p1d_slow_transfer.txt")
    assert diagnosis.primary is not None
    assert diagnosis.primary.finding == "parallelism.kv_transfer_bound"
    finding = diagnosis.layer(Layer.PARALLELISM).findings[0]
    assert "12 transfers failed" in finding.title
    assert "46 requests per decode instance wait for a transfer" in finding.title
    steps = " ".join(finding.next_steps)
    assert "--disaggregation-transfer-backend" in steps
    assert "--disaggregation-ib-device" in steps


@pytest.mark.parametrize("name", ["vllm_2p2d_healthy.txt", "sglang_1p1d_healthy.txt"])
def test_a_healthy_pd_deployment_has_no_finding(name: str) -> None:
    diagnosis = _diagnose(name)
    assert diagnosis.primary is None
    assert diagnosis.layer(Layer.PARALLELISM).status is Status.OK  # P/D: the layer applies
    assert all(not layer.findings for layer in diagnosis.layers), name


def test_the_transfer_is_held_against_the_clients_ttft_where_a_client_ran() -> None:
    """The servers' TTFT added is an upper bound; the client's median is the real one."""
    ev = make_evidence(**{**PD_HEALTHY, "client__ttft_p50_s": 0.03})  # 12 ms of 30 ms
    finding = KV_BOUND.fn(ev, Thresholds())
    assert finding is not None and "40% of the clients' median TTFT" in finding.title
    assert (
        KV_BOUND.fn(make_evidence(**{**PD_HEALTHY, "client__ttft_p50_s": 1.0}), Thresholds())
        is None
    )


def test_a_slow_link_that_costs_little_of_ttft_is_silent() -> None:
    """0.5 GB/s moving small KV caches in 5 % of TTFT: slow, and not what the user waits for."""
    ev = make_evidence(
        **{**PD_HEALTHY, "pd__transfer_bytes_per_s": 5e8, "pd__transfer_ttft_share": 0.05}
    )
    assert KV_BOUND.fn(ev, Thresholds()) is None
    slow = make_evidence(
        **{**PD_HEALTHY, "pd__transfer_bytes_per_s": 5e8, "pd__transfer_ttft_share": 0.2}
    )
    finding = KV_BOUND.fn(slow, Thresholds())
    assert finding is not None and finding.status is Status.WARNING


def test_failures_without_a_transfer_count_are_a_bottleneck() -> None:
    ev = make_evidence(
        **{**PD_HEALTHY, "pd__transfer_failure_share": None, "pd__transfer_failures": 3}
    )
    finding = KV_BOUND.fn(ev, Thresholds())
    assert finding is not None and finding.status is Status.BOTTLENECK


def test_the_metrics_rule_is_the_root_of_the_logs_transfer_finding() -> None:
    ev = make_evidence(
        **{**PD_HEALTHY, "pd__transfer_time_mean_s": 0.6, "pd__transfer_ttft_share": 0.72},
        pd__kv_transfer_p95_s=0.9,
    )
    diagnosis = diagnose_evidence(ev, Thresholds())
    assert diagnosis.primary is not None
    assert diagnosis.primary.finding == "parallelism.kv_transfer_bound"


# --- parallelism.pd_ratio_mismatch ---


def test_too_few_prefill_instances_say_add_prefill_and_name_plan() -> None:
    diagnosis = _diagnose("vllm_1p3d_prefill_starved.txt")
    assert diagnosis.primary is not None
    assert diagnosis.primary.finding == "parallelism.pd_ratio_mismatch"
    finding = diagnosis.layer(Layer.PARALLELISM).findings[0]
    assert finding.status is Status.BOTTLENECK
    assert finding.title.startswith("too few prefill instances")
    assert "1 prefill instance (8 running, 40 waiting each, KV 92% used)" in finding.title
    assert "3 decode instances (5 running, 0 waiting each, KV 8% used)" in finding.title
    steps = " ".join(finding.next_steps)
    assert "add prefill instances" in steps and "infertriage plan" in steps and "xPyD" in steps
    # the decode instances, even among themselves, are no data-parallel imbalance
    assert "parallelism.dp_rank_imbalance" not in _ids(diagnosis)


def test_too_few_decode_instances_are_the_root_of_the_full_kv_cache() -> None:
    diagnosis = _diagnose("vllm_3p1d_decode_starved.txt")
    assert diagnosis.primary is not None
    assert diagnosis.primary.finding == "parallelism.pd_ratio_mismatch"
    finding = diagnosis.layer(Layer.PARALLELISM).findings[0]
    assert finding.title.startswith("too few decode instances")
    assert "add decode instances" in finding.next_steps[0]
    assert "memory.kv_pressure" in _ids(diagnosis, Layer.MEMORY)  # its effect, in the chain
    assert diagnosis.chain[0].finding == "parallelism.pd_ratio_mismatch"


def test_a_prefill_queue_seen_in_its_queue_time_counts_too() -> None:
    """The waiting gauge caught between scrapes reads ~0, but requests spent 74 % of TTFT in
    the prefill instance's queue (its queue-time histogram) while decode idles."""
    ev = make_evidence(
        **{**PD_HEALTHY, "pd__prefill_queue_share": 0.74, "pd__decode_kv_usage": 0.02},
    )
    finding = RATIO.fn(ev, Thresholds())
    assert finding is not None and finding.status is Status.BOTTLENECK
    assert "(the prefill queue 74% of TTFT)" in finding.title
    assert (
        RATIO.fn(make_evidence(**{**PD_HEALTHY, "pd__prefill_queue_share": 0.3}), Thresholds())
        is None
    )


def test_both_pools_full_is_no_ratio_mismatch() -> None:
    """Prefill queues and decode is full too: more of both, not another split."""
    ev = make_evidence(
        **{
            **PD_HEALTHY,
            "pd__prefill_waiting_per_instance": 40,
            "pd__prefill_kv_usage": 0.9,
            "pd__decode_waiting_per_instance": 20,
            "pd__decode_kv_usage": 0.97,
        }
    )
    assert RATIO.fn(ev, Thresholds()) is None


def test_decode_requests_waiting_for_their_kv_are_not_a_decode_shortage() -> None:
    """vLLM counts a request waiting for its KV to arrive as waiting: with the decode KV
    cache mostly free the queue is the link's, not too few decode instances."""
    idle_prefill = {
        **PD_HEALTHY,
        "pd__prefill_running_per_instance": 0,
        "pd__prefill_kv_usage": 0.02,
    }
    waiting_for_kv = {
        **idle_prefill,
        "pd__decode_waiting_per_instance": 30,
        "pd__decode_kv_usage": 0.2,
    }
    assert RATIO.fn(make_evidence(**waiting_for_kv), Thresholds()) is None
    full = make_evidence(**{**waiting_for_kv, "pd__decode_kv_usage": 0.9})
    finding = RATIO.fn(full, Thresholds())
    assert finding is not None and finding.title.startswith("too few decode instances")


def test_decode_far_below_its_seats_counts_only_with_room_in_them() -> None:
    """KV has room, but each decode instance runs 200 of 256 seats: not far below capacity."""
    busy = {**PD_HEALTHY, "pd__prefill_waiting_per_instance": 40, "pd__decode_kv_usage": 0.3}
    assert RATIO.fn(make_evidence(**busy), Thresholds()) is not None
    full_seats = make_evidence(**{**busy, "pd__decode_running_per_instance": 200})
    assert RATIO.fn(full_seats, Thresholds()) is None


# --- data-parallel ranks within a role ---


def test_healthy_pd_ranks_are_compared_within_their_role() -> None:
    """2P2D: prefill engines run 3 and 4, decode engines 30 and 32. Compared across roles
    (one list of four engines) that would be 3.5 against 31: a false imbalance."""
    samples = []
    for i, (role, running) in enumerate(
        (("prefill", 3), ("prefill", 4), ("decode", 30), ("decode", 32))
    ):
        labels = {"instance": f"pod-{i}", "dp_rank": "0", "pd_role": role}
        samples.append(Sample(0.0, "queue.running", running, labels))
        samples.append(Sample(0.0, "queue.waiting", 0.0, labels))
    within = {s.name: s.value for s in rank_signals(samples, 0.0, 0.0)}
    assert within["dp.ranks"] == 2 and within["dp.imbalance"] < Thresholds().dp_imbalance
    # the prefill pair's 4 against a mean of 3.5 is half a request (chance at this load); the
    # decode pair's 32 against 31 a whole one: the decode figures are kept
    assert within["dp.role"] == 2
    blind = [
        Sample(s.t, s.name, s.value, {k: v for k, v in s.labels.items() if k != "pd_role"})
        for s in samples
    ]
    across = {s.name: s.value for s in rank_signals(blind, 0.0, 0.0)}
    assert across["dp.ranks"] == 4 and across["dp.imbalance"] > Thresholds().dp_imbalance


def test_an_uneven_decode_pool_is_named_as_such() -> None:
    ev = make_evidence(
        **{
            **DP_EVEN,
            "dp__imbalance": 1.9,
            "dp__busiest_running": 64,
            "dp__busiest_waiting": 30,
            "dp__idlest_running": 2,
            "dp__idlest_kv_usage": 0.05,
        },
        dp__role=2,
    )
    finding = RULES["parallelism.dp_rank_imbalance"].fn(ev, Thresholds())
    assert finding is not None and "(2 ranks among the decode instances," in finding.title


# --- parallelism.prefix_affinity_lost ---


def test_prefix_hits_spread_across_ranks_name_the_router_settings() -> None:
    diagnosis = _diagnose("vllm_dp4_prefix_spread.txt")
    finding = next(f for f in diagnosis.layer(Layer.PARALLELISM).findings)
    assert finding.id == "parallelism.prefix_affinity_lost"
    assert finding.status is Status.WARNING  # no reuse measured, no TTFT: said, not blamed
    assert "ranks' hit rates run from 4% to 82%" in finding.title
    steps = " ".join(finding.next_steps)
    assert "--policy cache_aware" in steps and "prefix-cache-aware" in steps
    assert "KV router" in steps and "session affinity" in steps


def test_even_prefix_hits_across_ranks_are_silent() -> None:
    diagnosis = _diagnose("vllm_dp4_prefix_even.txt")
    assert _ids(diagnosis) == {}
    assert diagnosis.layer(Layer.PARALLELISM).status is Status.OK


def test_hits_far_below_the_clients_reuse_with_ttft_missed_are_a_bottleneck() -> None:
    """4 ranks behind a blind balancer: the clients reused 60 % of their prompt tokens, the
    cache hit 15 %, TTFT p95 at 400 ms."""
    lost = {
        **DP_EVEN,
        "dp__ranks": 4,
        "workload__prefix_reuse": 0.6,
        "prefix_cache__hit_rate": 0.15,
    }
    finding = AFFINITY.fn(make_evidence(**lost, client__ttft_p95_s=0.4), Thresholds())
    assert finding is not None and finding.status is Status.BOTTLENECK
    assert "hits 15% of prompt tokens where the clients reused 60%" in finding.title
    meeting_slo = AFFINITY.fn(make_evidence(**lost), Thresholds())
    assert meeting_slo is not None and meeting_slo.status is Status.WARNING


def test_prefix_affinity_is_silent_without_reuse_or_with_one_rank() -> None:
    # the rule reads no reuse it was not given (another part of the run measures it)
    assert (
        AFFINITY.fn(make_evidence(**{**DP_EVEN, "prefix_cache__hit_rate": 0.05}), Thresholds())
        is None
    )
    little = {**DP_EVEN, "workload__prefix_reuse": 0.1, "prefix_cache__hit_rate": 0.0}
    assert AFFINITY.fn(make_evidence(**little), Thresholds()) is None
    kept = {**DP_EVEN, "workload__prefix_reuse": 0.6, "prefix_cache__hit_rate": 0.55}
    assert AFFINITY.fn(make_evidence(**kept), Thresholds()) is None
    one = {"workload__prefix_reuse": 0.6, "prefix_cache__hit_rate": 0.05}
    assert AFFINITY.fn(make_evidence(**one), Thresholds()) is None


def test_hits_lost_to_a_full_kv_cache_are_memorys_not_the_balancers() -> None:
    """The same lost hits with every rank's KV cache full: the prefixes were evicted wherever
    they were routed, so the balancer is not blamed; memory says so."""
    lost = {
        **DP_EVEN,
        "dp__ranks": 4,
        "workload__prefix_reuse": 0.6,
        "prefix_cache__hit_rate": 0.15,
        "kv__usage_max": 0.99,
    }
    assert AFFINITY.fn(make_evidence(**lost), Thresholds()) is None
    low = RULES["memory.prefix_cache_low"].fn(make_evidence(**lost), Thresholds())
    assert low is not None and "evicted" in low.title
    assert "offload" in low.next_steps[0]  # a full cache: room first
    assert any("offload" in step for step in low.next_steps)


def test_prefix_affinity_on_pd_counts_prefill_instances_not_decode_ones() -> None:
    """1P3D: the dp.* load figures are the decode pool's 3 instances, but a prefix is looked
    up where it is prefilled; one prefill instance cannot lose affinity (seen on the twin's
    pd-ratio scenario, where this rule once blamed routing across "3 replicas")."""
    one_prefill = {
        "dp__ranks": 3,
        "dp__role": 2,
        "pd__prefill_instances": 1,
        "pd__decode_instances": 3,
        "workload__prefix_reuse": 0.35,
        "prefix_cache__hit_rate": 0.0,
    }
    assert AFFINITY.fn(make_evidence(**one_prefill), Thresholds()) is None
    two_prefill = {
        **one_prefill,
        "pd__prefill_instances": 2,
        "dp__prefix_hit_rate": 0.05,
        "dp__prefix_hit_rate_max": 0.06,
    }
    finding = AFFINITY.fn(make_evidence(**two_prefill), Thresholds())
    assert finding is not None and "across 2 replicas" in finding.title


def test_no_hit_on_any_rank_is_a_cache_that_is_off_not_routing() -> None:
    off = {
        **DP_EVEN,
        "dp__ranks": 4,
        "workload__prefix_reuse": 0.6,
        "prefix_cache__hit_rate": 0.0,
        "dp__prefix_hit_rate_max": 0.0,
    }
    assert AFFINITY.fn(make_evidence(**off), Thresholds()) is None
    low = RULES["memory.prefix_cache_low"].fn(make_evidence(**off), Thresholds())
    assert low is not None and any("prefix caching is on" in s for s in low.next_steps)


# --- as a user reads a dump ---


def test_infertriage_metrics_shows_the_roles_and_the_transfers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["metrics", str(DUMPS / "vllm_1p1d_slow_link.txt")]) == 0
    out = capsys.readouterr().out
    assert "Prefill/decode roles (label pd_role)" in out
    assert "prefill" in out and "decode" in out
    assert "KV transfers, prefill → decode: 200 transfers, mean 600.0 ms" in out
    assert "of the servers' TTFT" in out
    assert main(["metrics", str(DUMPS / "vllm_dp4_prefix_spread.txt")]) == 0
    out = capsys.readouterr().out
    assert "Prefix-cache hit rate by rank (server 24.2 %): 0: 82.0 %, 1: 5.0 %" in out


def test_infertriage_metrics_json_carries_the_role_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["metrics", str(DUMPS / "sglang_1p1d_slow_transfer.txt"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    roles = {r["name"]: r["value"] for r in document["roles"]}
    assert roles["pd.decode_instances"] == 1 and roles["pd.transfer_queue"] == 46
    assert roles["pd.transfer_failures"] == 12


def test_a_server_that_is_not_disaggregated_lists_no_pd_metric(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["metrics", str(DUMPS / "vllm_dp4_prefix_even.txt")]) == 0
    out = capsys.readouterr().out
    assert "kv_transfer." not in out and "pd." not in out and "Prefill/decode roles" not in out
