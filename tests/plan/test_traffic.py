"""plan --traffic: the CSV's formats and errors, one replica's capacity within the SLOs and
the KV cache, replicas per interval with the headroom kept, autoscaled against fixed, spot."""

from __future__ import annotations

import itertools
import math

import pytest

from infertriage.plan import PlanInputs, get_gpu, load_model, make_capacity_plan
from infertriage.plan.traffic import (
    SpotAssumption,
    make_traffic_plan,
    parse_traffic_csv,
    replica_capacity,
)
from infertriage.schemas import UserError

BASE = PlanInputs(
    model=load_model("llama-3.1-8b"),
    gpu=get_gpu("H100-SXM"),
    max_model_len=8192,
    concurrency=1,
    input_len=512,
    output_len=256,
)
SLO = (0.200, 0.050)


def test_times_in_seconds_clock_and_iso_become_seconds_from_the_first_row() -> None:
    seconds = parse_traffic_csv("time,requests_per_s\n0,1\n900,2.5\n")
    clock = parse_traffic_csv("time,requests_per_s\n08:00,1\n08:15,2\n08:30:30,3\n")
    iso = parse_traffic_csv(
        "time,requests_per_s\n2026-12-01T23:30:00Z,1\n2026-12-02T00:30:00+00:00,2\n"
    )
    assert [p.time_s for p in seconds] == [0.0, 900.0]
    assert [p.time_s for p in clock] == [0.0, 900.0, 1830.0]
    assert [p.time_s for p in iso] == [0.0, 3600.0]
    assert seconds[1].requests_per_s == 2.5 and clock[0].label == "08:00"


def test_optional_length_columns_and_extra_columns() -> None:
    points = parse_traffic_csv(
        "time,requests_per_s,input_tokens,output_tokens,note\n0,1,800,200,x\n60,2,,,y\n"
    )
    assert (points[0].input_len, points[0].output_len) == (800, 200)
    assert (points[1].input_len, points[1].output_len) == (None, None)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("when,rate\n0,1\n", "line 1: the header lacks time and requests_per_s"),
        ("time,requests_per_s\n0,1\nnoon,2\n", "line 3: time 'noon'"),
        ("time,requests_per_s\n0,1\n60,lots\n", "line 3: requests_per_s 'lots'"),
        ("time,requests_per_s\n0,1\n60,-2\n", "line 3: requests_per_s must be"),
        ("time,requests_per_s\n60,1\n30,2\n", "line 3: time '30' does not increase"),
        ("time,requests_per_s\n0,1\n01:00,2\n", "line 3: times mix formats"),
        ("time,requests_per_s,input_tokens\n0,1,0\n60,1,5\n", "line 2: input_tokens must be"),
        ("time,requests_per_s\n0,1\n", "at least two rows"),
        ("time,requests_per_s\n25:00,1\n26:00,1\n", "line 2: time '25:00'"),
    ],
)
def test_a_bad_csv_is_one_sentence_naming_the_line(text: str, needle: str) -> None:
    with pytest.raises(UserError) as err:
        parse_traffic_csv(text, "day.csv")
    assert needle in str(err.value) and str(err.value).startswith("day.csv")


def test_replica_capacity_is_the_largest_concurrency_within_the_itl_slo() -> None:
    tight = (0.200, 0.010)  # an ITL limit the roofline crosses below max_num_seqs
    capacity = replica_capacity(BASE, *tight)
    assert capacity.limited_by == "itl SLO"
    assert capacity.itl_s <= tight[1]
    over = make_capacity_plan(BASE.replace(concurrency=capacity.concurrency + 1))
    assert over.roofline.itl_s > tight[1]
    plan = make_capacity_plan(BASE.replace(concurrency=capacity.concurrency))
    assert capacity.requests_per_s == pytest.approx(plan.roofline.throughput_tok_s / 256)


def test_replica_capacity_stops_at_the_kv_cache_with_headroom() -> None:
    long = BASE.replace(input_len=6000, output_len=2000, max_num_seqs=1024)
    capacity = replica_capacity(long, 10.0, 1.0)  # SLOs that never bind
    assert capacity.limited_by == "KV cache with headroom"
    assert capacity.concurrency == make_capacity_plan(long).max_concurrency
    assert 0.9 < capacity.kv_usage <= 1.0  # of the blocks vLLM allocates


def test_a_slo_one_request_misses_is_a_user_error() -> None:
    with pytest.raises(UserError, match="one request alone misses the ttft SLO"):
        replica_capacity(BASE.replace(input_len=7000), 0.001, 1.0)


def test_replicas_per_interval_keep_ten_percent_headroom() -> None:
    per_replica = replica_capacity(BASE, *SLO).requests_per_s
    rates = [0.0, 0.9 * per_replica * 0.999, per_replica, 5.5 * per_replica]
    text = "time,requests_per_s\n" + "".join(f"{i * 3600},{r}\n" for i, r in enumerate(rates))
    plan = make_traffic_plan(BASE, parse_traffic_csv(text), SLO)
    # one replica carries at most 90 % of its capacity: at 100 % it takes two
    assert [i.replicas for i in plan.intervals] == [0, 1, 2, math.ceil(5.5 / 0.9)]
    assert plan.peak.replicas == 7 and plan.trough.replicas == 0
    assert plan.span_s == 4 * 3600 and plan.per_day == 6


def test_autoscaling_costs_less_than_a_fixed_fleet_and_pays_for_its_transitions() -> None:
    text = "time,requests_per_s\n00:00,5\n06:00,200\n12:00,400\n18:00,50\n"
    no_lead = make_traffic_plan(BASE, parse_traffic_csv(text), SLO, gpu_hour_cost=4.0)
    lead = make_traffic_plan(BASE, parse_traffic_csv(text), SLO, lead_time_s=600, gpu_hour_cost=4.0)
    counts = [i.replicas for i in no_lead.intervals]
    steady_hours = sum(counts) * 6
    rises = sum(max(0, b - a) for a, b in itertools.pairwise(counts))
    falls = sum(max(0, a - b) for a, b in itertools.pairwise(counts))
    assert no_lead.gpu_hours == pytest.approx(steady_hours + falls * 300 / 3600)
    assert lead.scale_down_window_s == 600  # never shorter than a cold start
    assert lead.gpu_hours == pytest.approx(steady_hours + (rises + falls) * 600 / 3600)
    assert lead.fixed_gpu_hours == max(counts) * 24 > lead.gpu_hours
    assert lead.cost(lead.gpu_hours) == pytest.approx(lead.gpu_hours * 4.0)


def test_lengths_come_from_the_rows_or_the_inputs() -> None:
    text = "time,requests_per_s,input_tokens,output_tokens\n0,10,4000,500\n60,10,,\n"
    plan = make_traffic_plan(BASE, parse_traffic_csv(text), SLO)
    assert (plan.intervals[0].capacity.input_len, plan.intervals[1].capacity.input_len) == (
        4000,
        512,
    )
    with pytest.raises(UserError, match="line 3 of the traffic curve has no input_tokens"):
        make_traffic_plan(BASE.replace(input_len=None), parse_traffic_csv(text), SLO)


def test_spot_adds_spares_when_a_cold_start_outlasts_the_notice() -> None:
    text = "time,requests_per_s\n00:00,400\n12:00,400\n"
    points = parse_traffic_csv(text)
    spot = SpotAssumption(cost_per_gpu_hour=1.5, interruptions_per_replica_hour=0.1, notice_s=30)
    plan = make_traffic_plan(BASE, points, SLO, lead_time_s=630, spot=spot)
    assert plan.spot is not None
    replicas = plan.peak.replicas
    assert plan.spot.spare_replicas == math.ceil(replicas * 0.1 * 600 / 3600)
    assert plan.spot.interruptions == pytest.approx(replicas * 24 * 0.1)
    expected = replicas * 24 + plan.spot.interruptions * 630 / 3600 + plan.spot.spare_replicas * 24
    assert plan.spot.gpu_hours == pytest.approx(expected)
    assert plan.spot.cost == pytest.approx(expected * 1.5)
    warned = make_traffic_plan(BASE, points, SLO, lead_time_s=20, spot=spot)
    assert warned.spot is not None and warned.spot.spare_replicas == 0


def test_a_row_the_csv_module_refuses_is_a_user_error_naming_its_line() -> None:
    long_field = "x" * 200_000  # past the csv module's field limit (128 KiB)
    with pytest.raises(UserError, match=r"day\.csv line 3 is not CSV"):
        parse_traffic_csv(f"time,requests_per_s\n0,1\n{long_field}\n", "day.csv")
    with pytest.raises(UserError, match=r"day\.csv line 1 is not CSV"):
        parse_traffic_csv(f"{long_field},requests_per_s\n0,1\n", "day.csv")
