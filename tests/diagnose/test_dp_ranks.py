"""parallelism.dp_rank_imbalance and the seats of one engine (diagnose.rules.parallelism): a
rank that queues while another has room is the bottleneck the server's totals hide."""

from __future__ import annotations

from infertriage.diagnose import RULES, diagnose_evidence
from infertriage.diagnose.rules.parallelism import engine_running
from infertriage.schemas import Layer, Status, Thresholds

from .evidence_helpers import DP_EVEN, make_evidence

RULE = RULES["parallelism.dp_rank_imbalance"]
# vLLM DP=2, engine 0: 64 running, 30 waiting, KV 97 %; engine 1: 2 running, KV 5 %
SKEWED = {
    **DP_EVEN,
    "dp__imbalance": 94 / 48,
    "dp__rank_running_max": 64,
    "dp__busiest_running": 64,
    "dp__busiest_waiting": 30,
    "dp__busiest_kv_usage": 0.97,
    "dp__idlest_running": 2,
    "dp__idlest_kv_usage": 0.05,
    "dp.running_by_rank.0": 64,
    "dp.waiting_by_rank.0": 30,
    "dp.kv_usage_by_rank.0": 0.97,
    "dp.running_by_rank.1": 2,
    "dp.waiting_by_rank.1": 0,
    "dp.kv_usage_by_rank.1": 0.05,
}


def test_requests_waiting_on_one_rank_while_another_has_room_is_a_bottleneck() -> None:
    finding = RULE.fn(make_evidence(**SKEWED), Thresholds())
    assert finding is not None and finding.status is Status.BOTTLENECK
    assert finding.title.startswith("30 requests wait on data-parallel rank 0 while rank 1")
    assert "rank 0 (64 running, 30 waiting, KV 97% used)" in finding.title
    assert "rank 1 (2 running, 0 waiting, KV 5% used)" in finding.title
    assert "rank 0: 64 running, 30 waiting, KV 97% used; rank 1: 2 running" in finding.explanation
    shown = {item.signal for item in finding.evidence}
    assert {"dp.imbalance", "dp.running_by_rank.0", "dp.kv_usage_by_rank.1"} <= shown


def test_a_busy_rank_beside_an_idle_one_is_a_bottleneck_without_a_queue() -> None:
    """vLLM issue #48808's shape: DP=4, 27 running on engine 0, 5 on engine 1, none on 2, 3."""
    ev = make_evidence(
        **{
            **DP_EVEN,
            "dp__ranks": 4,
            "dp__imbalance": 27 / 8,
            "dp__busiest_running": 27,
            "dp__idlest_running": 0,
            "dp__idlest_rank": 2,
        }
    )
    finding = RULE.fn(ev, Thresholds())
    assert finding is not None and finding.status is Status.BOTTLENECK
    assert finding.title.startswith("one data-parallel rank does the work while another idles")


def test_milder_imbalance_is_a_warning() -> None:
    ev = make_evidence(**{**DP_EVEN, "dp__imbalance": 1.6, "dp__busiest_running": 40,
                          "dp__idlest_running": 10})  # fmt: skip
    finding = RULE.fn(ev, Thresholds())
    assert finding is not None and finding.status is Status.WARNING
    assert finding.title.startswith("data-parallel ranks carry uneven load")


def test_every_rank_full_and_queueing_is_not_a_stranded_queue() -> None:
    """Both ranks wait and their KV caches are full: moving requests frees nothing."""
    ev = make_evidence(**{**SKEWED, "dp__idlest_running": 64, "dp__idlest_waiting": 5,
                          "dp__idlest_kv_usage": 0.98, "dp__imbalance": 1.5})  # fmt: skip
    finding = RULE.fn(ev, Thresholds())
    assert finding is not None and finding.status is Status.WARNING


def test_one_rank_or_an_even_load_says_nothing() -> None:
    assert RULE.fn(make_evidence(), Thresholds()) is None  # dp.ranks 1
    assert RULE.fn(make_evidence(**DP_EVEN), Thresholds()) is None


def test_the_imbalance_is_the_primary_and_parallelism_applies_without_tp() -> None:
    ev = make_evidence(**SKEWED, config__tensor_parallel=1)
    diagnosis = diagnose_evidence(ev, Thresholds())
    assert diagnosis.layer(Layer.PARALLELISM).status is Status.BOTTLENECK
    assert diagnosis.primary is not None
    assert diagnosis.primary.finding == "parallelism.dp_rank_imbalance"
    balanced = diagnose_evidence(make_evidence(**DP_EVEN, config__tensor_parallel=1), Thresholds())
    assert balanced.layer(Layer.PARALLELISM).status is Status.OK  # two ranks: it applies


def test_an_engines_seats_are_held_against_one_ranks_running() -> None:
    """`max_num_seqs` is per engine: 2 ranks of 150 running are not 300 over 256 seats."""
    ev = make_evidence(**{**DP_EVEN, "dp__rank_running_max": 150}, queue__running_max=300)
    assert engine_running(ev) == 150
    assert engine_running(make_evidence(queue__running_max=300)) == 300  # one engine
    busy = make_evidence(
        **{**DP_EVEN, "dp__rank_running_max": 150},
        queue__running_max=300,
        queue__waiting_max=20,
        config__max_num_seqs=256,
        server__queue_time_mean_s=None,
        client__ttft_p95_s=0.9,
    )
    assert RULES["scheduling.queue_dominates_ttft"].fn(busy, Thresholds()) is None


def test_requests_stranded_on_one_rank_are_the_root_of_the_servers_queue() -> None:
    """The twin's dp-imbalance shape: rank 3 queues 6 while rank 0 has seats; the server's
    queue findings are its effects, so the imbalance is the primary."""
    ev = make_evidence(
        **SKEWED,
        client__ttft_p95_s=1.2,
        server__queue_time_mean_s=0.5,
        server__ttft_mean_s=0.7,
        queue__waiting_max=30,
    )
    diagnosis = diagnose_evidence(ev, Thresholds())
    assert diagnosis.primary is not None
    assert diagnosis.primary.finding == "parallelism.dp_rank_imbalance"
    chain = [link.finding for link in diagnosis.chain]
    assert chain == ["parallelism.dp_rank_imbalance", "scheduling.queue_dominates_ttft"]


def test_a_light_load_split_over_ranks_is_no_imbalance() -> None:
    """The pd-ratio twin's three decode instances under a prefill-bound load: about one
    request each, 0.96 against 0.5 and 0.38 is 1.6× the mean but under a request above it."""
    ev = make_evidence(**{**DP_EVEN, "dp__ranks": 3, "dp__imbalance": 1.57,
                          "dp__busiest_running": 0.83, "dp__busiest_waiting": 0.13,
                          "dp__idlest_running": 0.25, "dp__idlest_waiting": 0.13})  # fmt: skip
    assert RULE.fn(ev, Thresholds()) is None
    # the same ratio at ten times the load is a warning
    ten = make_evidence(**{**DP_EVEN, "dp__ranks": 3, "dp__imbalance": 1.57,
                           "dp__busiest_running": 8.3, "dp__busiest_waiting": 0.0,
                           "dp__idlest_running": 2.5})  # fmt: skip
    finding = RULE.fn(ten, Thresholds())
    assert finding is not None and finding.status is Status.WARNING
