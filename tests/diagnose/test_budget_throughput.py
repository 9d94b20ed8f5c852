"""`scheduling.prefill_token_budget` by the budget's throughput (issue 32, part 2).

Requests queue with seats free and KV room, and the prefill share is hidden behind the
wait: the rule holds the tokens a step leaves after its decodes (the budget less the
running requests) against a typical prompt, and the prompt tokens arriving a second
against what the budget's steps leave for prefill. Deployments from 0.5 B on one small
GPU to 405 B on eight, in the magnitudes the twin and published measurements show.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from infertriage.diagnose import RULES, Evidence, diagnose_evidence
from infertriage.schemas import Layer, Status, Thresholds

from .evidence_helpers import make_evidence

RULE = "scheduling.prefill_token_budget"


@dataclass(frozen=True)
class Deployment:
    """What a run of one deployment measured (the signals the rule reads)."""

    name: str
    tp: int
    budget: float  # max_num_batched_tokens
    running: float  # requests in the batch (decodes a step)
    prompt: float  # mean prompt tokens
    steps_per_s: float
    out_tok_s: float  # output tokens a second (client)
    out_each: float = 256.0  # mean output tokens
    hit: float = 0.0  # prefix-cache hit rate
    seats: float = 256.0
    ttft_s: float = 0.4  # server TTFT mean
    queue_share: float = 0.8  # of TTFT
    prefill_share: float = 0.15
    kv_usage: float = 0.05

    def evidence(self, **overrides: float | None) -> Evidence:
        values: dict[str, float | None] = {
            "config__max_num_batched_tokens": self.budget,
            "config__tensor_parallel": float(self.tp),
            "config__max_num_seqs": self.seats,
            "queue__running_max": self.running,
            "queue__waiting_max": 0.0,
            "client__mean_prompt_tokens": self.prompt,
            "client__mean_output_tokens": self.out_each,
            "client__throughput_tok_s": self.out_tok_s,
            "client__ttft_p95_s": 2.5 * self.ttft_s,
            "server__steps_per_s": self.steps_per_s,
            "server__itl_p50_s": 1.0 / self.steps_per_s,
            "server__ttft_mean_s": self.ttft_s,
            "server__queue_time_mean_s": self.queue_share * self.ttft_s,
            "server__prefill_time_mean_s": self.prefill_share * self.ttft_s,
            "server__step_tokens_max": self.budget,
            "prefix_cache__hit_rate": self.hit,
            "kv__usage_max": self.kv_usage,
        }
        values.update(overrides)
        return make_evidence(**values)


# the budget between a prompt's two-thirds and the prompt plus its step's decodes: fewer
# than 1.5 steps a prompt, so the prefill-share path cannot see it
STARVED = (
    Deployment("qwen2.5-0.5b TP1 L4", 1, 512, 32, 700, 150.0, 4800.0),
    Deployment("llama-3.1-8b TP1 L40S", 1, 512, 16, 720, 45.0, 720.0),
    Deployment("mixtral-8x7b TP2 H100", 2, 448, 16, 640, 40.0, 640.0, hit=0.1),
    Deployment("llama-3.1-70b TP2 H200", 2, 512, 16, 684, 38.5, 645.0, 374.0, hit=0.19),
    Deployment("llama-3.1-70b TP4 A100", 4, 384, 12, 560, 22.0, 264.0),
    Deployment("llama-3.1-405b TP8 H100", 8, 768, 24, 1000, 12.0, 288.0, 128.0),
    Deployment("deepseek-v3 TP8 H200", 8, 1024, 64, 1200, 15.0, 960.0, seats=512),
)


@pytest.mark.parametrize("d", STARVED, ids=lambda d: d.name)
def test_the_budget_fires_by_its_throughput_on_every_magnitude(d: Deployment) -> None:
    t = Thresholds()
    finding = RULES[RULE].fn(d.evidence(), t)
    assert finding is not None
    assert finding.status is Status.BOTTLENECK
    assert f"queueing is {d.queue_share:.0%} and prefill 15% of TTFT" in finding.title
    assert f"the budget of {d.budget:,.0f} tokens/step at {d.steps_per_s:,.1f} steps/s" in (
        finding.title
    )
    assert f"after {d.running:.0f} decodes" in finding.title and "tok/s" in finding.title
    assert "--max-num-batched-tokens" in finding.next_steps[0]
    assert f"({d.prompt + d.running:,.0f} tokens" in finding.next_steps[0]


@pytest.mark.parametrize("d", STARVED[::3], ids=lambda d: d.name)
def test_the_ttft_miss_is_explained_by_the_budget(d: Deployment) -> None:
    diagnosis = diagnose_evidence(d.evidence(), Thresholds())
    assert diagnosis.primary is not None
    assert diagnosis.primary.layer is Layer.SCHEDULING
    assert diagnosis.primary.finding == RULE
    assert diagnosis.unexplained is None


def test_a_budget_that_holds_a_prompt_fires_when_the_arrivals_need_most_of_it() -> None:
    # 2,048 tokens hold two 1,000-token prompts, but 5 steps/s leave 10,160 tok/s and
    # 5,200 arrive: half the budget's prefill throughput is taken by the arrivals
    base = Deployment("llama-3.1-70b TP2 L40S", 2, 2048, 16, 1000, 5.0, 1300.0, 250.0)
    finding = RULES[RULE].fn(base.evidence(), Thresholds())
    assert finding is not None and "51% of it needed" in finding.title
    light = Deployment("llama-3.1-70b TP2 L40S", 2, 2048, 16, 1000, 5.0, 900.0, 250.0)
    assert RULES[RULE].fn(light.evidence(), Thresholds()) is None


@pytest.mark.parametrize("inside", [True, False])
def test_at_the_prompt_fit_threshold(inside: bool) -> None:
    t = Thresholds()
    left = 496.0  # a 512-token budget after 16 decodes
    prompt = left / (t.budget_prompt_fit * (0.95 if inside else 1.05))
    d = Deployment("llama-3.1-8b TP1 H100", 1, 512, 16, prompt, 60.0, 960.0)
    assert (RULES[RULE].fn(d.evidence(), t) is not None) is inside
    if inside:  # the rule reads the field: moved 20 %, the same prompt is outside
        moved = t.replace(budget_prompt_fit=t.budget_prompt_fit * 0.8)
        assert RULES[RULE].fn(d.evidence(), moved) is None


@pytest.mark.parametrize("inside", [True, False])
def test_at_the_load_threshold(inside: bool) -> None:
    # 2,032 tokens a step left at 5 steps/s: 10,160 tok/s; 1,000-token prompts, 250 out each
    t = Thresholds()
    arriving = 10_160.0 * t.budget_load * (1.05 if inside else 0.95)
    d = Deployment("qwen3-30b-a3b TP2 L40S", 2, 2048, 16, 1000, 5.0, arriving / 4.0, 250.0)
    assert (RULES[RULE].fn(d.evidence(), t) is not None) is inside
    if inside:
        moved = t.replace(budget_load=t.budget_load * 1.2)
        assert RULES[RULE].fn(d.evidence(), moved) is None


@pytest.mark.parametrize("inside", [True, False])
def test_at_the_share_of_ttft_spent_on_the_budget(inside: bool) -> None:
    # the wait to be scheduled and the prefill count together: the wait hides the prefill
    t = Thresholds()
    share = t.prefill_ttft_share * (1.05 if inside else 0.95)
    split = {"queue_share": share * 0.6, "prefill_share": share * 0.4}
    d = Deployment("qwen2.5-7b TP1 A10G", 1, 512, 16, 700, 30.0, 480.0, **split)
    assert (RULES[RULE].fn(d.evidence(), t) is not None) is inside


HEALTHY_BUDGETS = (
    Deployment("qwen2.5-0.5b TP1 L4", 1, 8192, 32, 700, 150.0, 4800.0),
    Deployment("llama-3.1-70b TP2 H200", 2, 8192, 16, 684, 38.5, 645.0, 374.0),
    Deployment("llama-3.1-405b TP8 H100", 8, 16384, 24, 1000, 12.0, 288.0, 128.0),
)


@pytest.mark.parametrize("d", HEALTHY_BUDGETS, ids=lambda d: d.name)
def test_a_budget_with_room_is_not_blamed_for_a_queue(d: Deployment) -> None:
    # queueing 80 % of TTFT, but the budget holds many prompts a step and the arrivals
    # need a sliver of it: the queue is someone else's (queue_dominates_ttft warns)
    assert RULES[RULE].fn(d.evidence(), Thresholds()) is None


@pytest.mark.parametrize(
    ("why", "overrides"),
    [
        ("every seat taken", {"queue__running_max": 16.0, "config__max_num_seqs": 16.0}),
        ("the KV cache full", {"kv__usage_max": 0.97}),
        ("no queue", {"server__queue_time_mean_s": 0.04, "server__prefill_time_mean_s": 0.1}),
        ("seats unknown", {"config__max_num_seqs": None}),
    ],
)
def test_not_the_budget_when_seats_memory_or_no_queue(
    why: str, overrides: dict[str, float]
) -> None:
    d = STARVED[3]
    assert RULES[RULE].fn(d.evidence(**overrides), Thresholds()) is None, why


def test_without_a_step_rate_the_fit_alone_is_said() -> None:
    d = STARVED[1]
    ev = d.evidence(server__steps_per_s=None, server__itl_p50_s=None)
    finding = RULES[RULE].fn(ev, Thresholds())
    assert finding is not None
    assert "steps/s" not in finding.title and "0.69 prompts a step" in finding.title


def test_the_step_rate_falls_back_to_the_token_gap() -> None:
    ev = STARVED[1].evidence(server__steps_per_s=None, server__itl_p50_s=0.025)
    finding = RULES[RULE].fn(ev, Thresholds())
    assert finding is not None and "at 40.0 steps/s" in finding.title


def test_without_the_budget_the_rule_says_nothing() -> None:
    ev = STARVED[1].evidence(config__max_num_batched_tokens=None, server__step_tokens_max=None)
    assert RULES[RULE].fn(ev, Thresholds()) is None


def test_a_bucket_bound_that_holds_a_prompt_is_not_blamed() -> None:
    # vLLM does not say its budget: the 1,024 bucket may hold every step of a 600-token
    # budget, or be a 4,096 one's largest steps; the rule stays silent rather than count
    # steps waited from the time waited (a burst waits behind long prefill steps)
    d = Deployment("llama-3.1-70b TP4 H100", 4, 1024, 16, 700, 30.0, 480.0)
    ev = d.evidence(config__max_num_batched_tokens=None)
    assert RULES[RULE].fn(ev, Thresholds()) is None
