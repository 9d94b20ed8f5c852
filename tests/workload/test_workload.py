"""Workloads: the default chat mix, exact targets, prefix groups, multi-turn, files; seeded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from infertriage.schemas import UserError
from infertriage.workload import (
    ONE_TOKEN_WORDS,
    ArrivalKind,
    Arrivals,
    ContextLimit,
    LocalTokenizer,
    PromptModel,
    SynthText,
    TextRenderer,
    fit_specs,
    make_schedule,
    make_specs,
    parse_length,
    parse_workload,
    words_text,
)


def _prompt_lengths(specs: tuple) -> np.ndarray:  # type: ignore[type-arg]
    return np.asarray([s.prompt_tokens for s in specs])


def test_chat_mix_matches_design() -> None:
    specs = make_specs(parse_workload("chat-mix"), 6000, seed=1, max_model_len=8192)
    prompts = _prompt_lengths(specs)
    assert np.median(prompts) == pytest.approx(512, rel=0.08)
    assert np.percentile(prompts, 90) == pytest.approx(2048, rel=0.10)
    assert prompts.max() <= 4096  # half of max_model_len
    outputs = np.asarray([s.max_tokens for s in specs])
    assert np.median(outputs) == pytest.approx(256, rel=0.08)
    shared = [s for s in specs if s.turns[0].role == "system"]
    assert len(shared) / len(specs) == pytest.approx(0.20, abs=0.02)
    prefixes = {s.turns[0].content for s in shared}
    assert prefixes == {shared[0].turns[0].content}  # one shared 1,024-token prefix
    assert shared[0].turns[0].content.num_tokens == 1024  # type: ignore[union-attr]
    # Lengths as asked; fitted to the intended context, every request fits.
    fitted, _ = fit_specs(specs, ContextLimit(8192, "test"), PromptModel("intended", False))
    assert all(s.prompt_tokens + s.max_tokens <= 8192 for s in fitted)


def test_chat_mix_cap_follows_max_model_len() -> None:
    specs = make_specs(parse_workload("chat-mix"), 2000, seed=0, max_model_len=2048)
    assert _prompt_lengths(specs).max() <= 1024


def test_same_seed_same_requests() -> None:
    ws = parse_workload("synthetic:input=lognormal(100,300),output=uniform(10,20)")
    assert make_specs(ws, 50, seed=4) == make_specs(ws, 50, seed=4)
    assert make_specs(ws, 50, seed=4) != make_specs(ws, 50, seed=5)


def test_synthetic_exact_targets_and_rendered_text() -> None:
    specs = make_specs(parse_workload("synthetic:input=300,output=64"), 5)
    assert all(s.prompt_tokens == 300 and s.max_tokens == 64 for s in specs)
    renderer = TextRenderer()
    texts = [renderer.messages(s.turns)[-1][1] for s in specs]
    assert all(len(t.split()) == 300 for t in texts)
    assert all(word in ONE_TOKEN_WORDS for word in texts[0].split())
    # Unrelated requests diverge early, so a prefix cache sees no accidental sharing.
    assert len({t.split()[:4].__repr__() for t in texts}) == 5


def test_words_text_is_deterministic_per_key() -> None:
    assert words_text(50, 9) == words_text(50, 9)
    assert words_text(50, 9) != words_text(50, 10)
    assert words_text(0, 1) == ""


def test_prefix_groups_share_their_own_prefix() -> None:
    specs = make_specs(parse_workload("prefix:groups=3,prefix=200,input=50,output=8"), 60)
    by_group: dict[str, set[SynthText | str]] = {}
    for spec in specs:
        by_group.setdefault(dict(spec.labels)["group"], set()).add(spec.turns[0].content)
        assert spec.prompt_tokens == 250
    assert len(by_group) == 3
    assert all(len(prefixes) == 1 for prefixes in by_group.values())
    assert len({next(iter(p)) for p in by_group.values()}) == 3


def test_a_prompt_set_is_g_times_p_fixed_requests_shuffled_once_then_cycled() -> None:
    # inference-perf's shared_prefix: groups x prompts pre-built, shuffled, sent in turn.
    ws = parse_workload("prefix:groups=3,prompts=4,prefix=100,input=uniform(10,40),output=8")
    specs = make_specs(ws, 30, seed=2)
    cycle = [(s.turns, s.max_tokens) for s in specs[:12]]
    assert len(set(cycle)) == 12  # every prompt once in the first cycle
    assert [(s.turns, s.max_tokens) for s in specs[12:24]] == cycle  # then again, in order
    assert [(s.turns, s.max_tokens) for s in specs[24:]] == cycle[:6]
    assert [s.index for s in specs] == list(range(30))
    groups = [dict(s.labels)["group"] for s in specs[:12]]
    assert sorted(groups) == sorted(["0", "1", "2"] * 4)
    assert groups != sorted(groups)  # shuffled, not group by group
    prefixes = {g: {s.turns[0].content for s in specs if dict(s.labels)["group"] == g}
                for g in "012"}  # fmt: skip
    assert all(len(p) == 1 for p in prefixes.values())
    assert all(s.turns[0].content.num_tokens == 100 for s in specs)  # type: ignore[union-attr]
    assert make_specs(ws, 30, seed=2) == specs
    assert make_specs(ws, 30, seed=3) != specs


def test_without_prompts_a_prefix_workload_draws_every_question_afresh() -> None:
    specs = make_specs(parse_workload("prefix:groups=2,prefix=50,input=20,output=4"), 40)
    assert len({s.turns[1].content for s in specs}) == 40


def test_multiturn_carries_history_in_order() -> None:
    specs = make_specs(parse_workload("multiturn:turns=3,input=10,output=5,parallel=2"), 12)
    labels = [(dict(s.labels)["conversation"], dict(s.labels)["turn"]) for s in specs]
    assert labels[:6] == [("0", "0"), ("1", "0"), ("0", "1"), ("1", "1"), ("0", "2"), ("1", "2")]
    third = specs[4]  # conversation 0, turn 2
    assert [t.role for t in third.turns] == ["user", "assistant", "user", "assistant", "user"]
    assert third.turns[:3] == specs[2].turns  # turn 2 extends turn 1's messages
    assert third.prompt_tokens == 10 * 3 + 5 * 2


def test_sharegpt_file(tmp_path: Path) -> None:
    path = tmp_path / "sg.json"
    data = [
        {"conversations": [{"from": "human", "value": "hello " * 40},
                           {"from": "gpt", "value": "reply " * 20}]},
        {"conversations": [{"from": "human", "value": "only one turn"}]},
    ]  # fmt: skip
    path.write_text(json.dumps(data))
    specs = make_specs(parse_workload(f"sharegpt:{path}"), 3)
    assert len(specs) == 3  # the one usable conversation, cycled
    assert specs[0].turns[0].content == "hello " * 40
    assert specs[0].max_tokens == 30  # 120 characters ≈ 30 tokens
    path.write_text("[]")
    with pytest.raises(UserError, match="no usable ShareGPT"):
        make_specs(parse_workload(f"sharegpt:{path}"), 1)


def test_custom_jsonl_and_its_errors(tmp_path: Path) -> None:
    path = tmp_path / "reqs.jsonl"
    path.write_text(
        '{"prompt": "a b c", "max_tokens": 7}\n\n'
        '{"messages": [{"role": "user", "content": "hi"}], "output_tokens": 3}\n'
        '{"input_length": 40, "output_length": 9}\n'
    )
    specs = make_specs(parse_workload(f"jsonl:{path}"), 3)
    assert [s.max_tokens for s in specs] == [7, 3, 9]
    assert specs[2].prompt_tokens == 40 and isinstance(specs[2].turns[0].content, SynthText)
    for text, match in [
        ('{"prompt": "a"}\n{"max_tokens": 3}\n', r"reqs\.jsonl:2: a request needs"),
        ('{"prompt": "a"\n', r"reqs\.jsonl:1: malformed JSON"),
        ('{"prompt": "a", "max_tokens": -1}\n', "non-negative integer"),
        ('{"prompt": "a", "timestamp": 1}\n{"prompt": "b"}\n', "every line has a timestamp"),
    ]:
        path.write_text(text)
        with pytest.raises(UserError, match=match):
            make_specs(parse_workload(f"jsonl:{path}"), 1)
    with pytest.raises(UserError, match="cannot read"):
        make_specs(parse_workload(f"jsonl:{tmp_path / 'absent.jsonl'}"), 1)


def test_trace_replay_takes_its_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    lines = [{"timestamp_ms": 1000 + 250 * i, "input_length": 20, "output_length": 4}
             for i in range(8)]  # fmt: skip
    path.write_text("\n".join(json.dumps(line) for line in lines))
    ws = parse_workload(f"trace:{path},speed=2")
    schedule = make_schedule(ws, None, num_requests=None, duration_s=None)
    assert schedule.offsets_s is not None
    assert np.allclose(schedule.offsets_s, np.arange(8) * 0.125)
    short = make_schedule(ws, None, num_requests=3, duration_s=None)
    assert len(short) == 3
    with pytest.raises(UserError, match="replays its own timestamps"):
        make_schedule(ws, Arrivals(ArrivalKind.POISSON, 1.0), num_requests=3, duration_s=None)


def test_closed_loop_schedule_has_no_offsets() -> None:
    schedule = make_schedule(parse_workload("synthetic:input=8,output=8"), None,
                             num_requests=None, duration_s=2.0, concurrency=4)  # fmt: skip
    assert schedule.offsets_s is None and len(schedule) == 4 * 200


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("nonsense", "unknown workload"),
        ("synthetic:input", "not key=value"),
        ("synthetic:colour=3", "no option 'colour'"),
        ("sharegpt:", "needs a file"),
        ("synthetic:input=lognormal(5)", "is not a length"),
        ("synthetic:input=uniform(9,3)", "upper bound is below"),
        ("prefix:groups=many", "not a number"),
        ("synthetic:ignore_eos=maybe", "true or false"),
    ],
)
def test_bad_workload_specs_are_one_sentence(spec: str, match: str) -> None:
    with pytest.raises(UserError, match=match):
        make_specs(parse_workload(spec), 2)


def test_length_distributions() -> None:
    rng = np.random.default_rng(0)
    assert parse_length("64").sample(rng, 3).tolist() == [64, 64, 64]
    values = parse_length("normal(100,10)").sample(rng, 20_000)
    assert values.mean() == pytest.approx(100, rel=0.01)
    uniform = parse_length("uniform(5,9)").sample(rng, 1000)
    assert uniform.min() == 5 and uniform.max() == 9
    assert parse_length("lognormal(100,400)").sample(rng, 100, cap=150).max() <= 150


def test_exact_prompts_with_a_local_tokenizer(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(ONE_TOKEN_WORDS)}}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.decoder = tokenizers.decoders.WordPiece()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    local = LocalTokenizer(path)
    text = TextRenderer(local).text(SynthText(77, 3))
    assert local.count(text) == 77
    with pytest.raises(UserError, match="does not exist"):
        LocalTokenizer(tmp_path / "nope.json")
