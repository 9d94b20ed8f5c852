"""The default workload fitted to a short context, against a loopback server that rejects as vLLM.

The server counts each word of a prompt as 1.1 tokens and adds a chat template of 20
tokens plus 5 a message, and answers HTTP 400 with vLLM's message for a prompt +
max_tokens past its context (or min_tokens past max_tokens): bench learns that from
its /tokenize (or assumes it, without one), and not one request is rejected.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec, ClientSpec
from infertriage.loadgen import promptcount
from infertriage.loadgen.caveats import stop_if_rejected
from infertriage.loadgen.promptcount import pick_sample
from infertriage.loadgen.results import BenchResult
from infertriage.schemas import UserError
from infertriage.workload import make_specs, parse_workload, words_text
from infertriage_testing.testserver import Behavior, PathServer, ServerConfig, serve_in_thread

_FAST = Behavior(ttft_s=0.001, itl_s=0.0)


def _run(
    tmp_path: Path,
    context: int,
    *,
    tokenize: str = "vllm",
    endpoint: str = "chat",
    workload: str = "chat-mix",
) -> tuple[BenchResult, PathServer]:
    config = ServerConfig(
        behavior=_FAST, max_model_len=context, reject_over_context=True, tokenize=tokenize,
        prompt_token_scale=1.1, template_tokens=20, template_tokens_per_message=5,
    )  # fmt: skip
    with serve_in_thread(config) as (url, server):
        result = run_bench(
            BenchSpec(
                url=url,
                concurrencies=[16],
                num_requests=120,
                out=tmp_path / "run",
                check_tokens=False,
                workload=workload,
                client=ClientSpec(endpoint=endpoint),
            )
        )
    return result, server


def _assert_nothing_rejected(result: BenchResult, server: PathServer) -> None:
    assert server.rejected == [] and server.num_requests == 120
    assert result.levels[0].summary.num_ok == 120
    for asked in server.asked.values():
        assert asked["min_tokens"] <= asked["max_tokens"]  # type: ignore[operator]


@pytest.mark.parametrize("context", [2048, 1024])
def test_the_default_workload_at_a_short_context_is_never_rejected(
    tmp_path: Path, context: int
) -> None:
    result, server = _run(tmp_path, context)
    _assert_nothing_rejected(result, server)
    fit = result.workload_fit
    assert fit is not None and fit.max_model_len == context and not fit.estimated
    assert fit.limit_source == "/v1/models max_model_len" and fit.count_source == "/tokenize"
    assert fit.rescale == pytest.approx(1.1, abs=0.01)  # the text regenerated at n / 1.1 words
    assert fit.num_requests == 120 and fit.num_capped > 0 and fit.num_trimmed == 0
    capped = [w for w in result.warnings if "max_tokens capped" in w]
    assert capped == [
        f"{fit.num_capped} of 120 requests had max_tokens capped (down to {fit.capped_min:,}) "
        f"to fit the {context:,}-token context (/v1/models max_model_len): their outputs are "
        "shorter than the workload's."
    ]
    info = (tmp_path / "run" / "run.json").read_text()
    assert '"workload_fit"' in info and '"max_model_len_source"' in info


def test_without_tokenize_the_fit_is_estimated_and_still_fits(tmp_path: Path) -> None:
    result, server = _run(tmp_path, 2048, tokenize="none")
    _assert_nothing_rejected(result, server)
    fit = result.workload_fit
    assert fit is not None and fit.estimated and fit.count_source == "assumed"
    assert any("no /tokenize and no --tokenizer" in w for w in result.warnings)


@pytest.mark.parametrize(("tokenize", "endpoint"), [("llama.cpp", "chat"), ("vllm", "completions")])
def test_llama_cpp_template_and_the_completions_endpoint(
    tmp_path: Path, tokenize: str, endpoint: str
) -> None:
    result, server = _run(tmp_path, 1024, tokenize=tokenize, endpoint=endpoint)
    _assert_nothing_rejected(result, server)
    fit = result.workload_fit
    assert fit is not None and not fit.estimated  # llama.cpp: through /apply-template
    # The template of a two-message chat: 20 + 2 · 5 tokens (llama.cpp counts its text, 10 % up).
    assert fit.max_template_tokens == {"llama.cpp": 33, "vllm": 0}[tokenize]


def _files(tmp_path: Path) -> tuple[str, str]:
    """A ShareGPT file and a JSONL file of literal prompts, some longer than 1,024 tokens."""
    lengths = [30, 200, 600, 900, 1400, 2500] * 4
    sharegpt = [
        {"conversations": [
            {"from": "human", "value": words_text(n, i)},
            {"from": "gpt", "value": words_text(300, 100 + i)},
        ]}
        for i, n in enumerate(lengths)
    ]  # fmt: skip
    (tmp_path / "sharegpt.json").write_text(json.dumps(sharegpt))
    lines = [json.dumps({"prompt": words_text(n, 200 + i), "max_tokens": 400})
             for i, n in enumerate(lengths)]  # fmt: skip
    (tmp_path / "prompts.jsonl").write_text("\n".join(lines))
    return f"sharegpt:{tmp_path / 'sharegpt.json'}", f"jsonl:{tmp_path / 'prompts.jsonl'}"


@pytest.mark.parametrize(
    "workload",
    [
        "multiturn:turns=4,input=lognormal(200,800),output=300",
        "prefix:groups=4,prefix=700,input=400,output=600",
        "sharegpt",
        "jsonl",
    ],
)
def test_every_workload_kind_fits(tmp_path: Path, workload: str) -> None:
    sharegpt, jsonl = _files(tmp_path)
    workload = {"sharegpt": sharegpt, "jsonl": jsonl}.get(workload, workload)
    result, server = _run(tmp_path, 1024, workload=workload)
    _assert_nothing_rejected(result, server)
    fit = result.workload_fit
    assert fit is not None and fit.num_trimmed > 0  # each has prompts past 1,024 tokens
    assert any("were trimmed" in w for w in result.warnings)


def test_the_sample_covers_every_message_count_longest_first() -> None:
    specs = make_specs(parse_workload("chat-mix"), 500, seed=2)
    sample = pick_sample(specs, 6)
    assert sorted(len(s.turns) for s in sample[:2]) == [1, 2] and len(sample) == 6
    assert len({s.turns for s in sample}) == 6
    longest = max(specs, key=lambda s: s.prompt_tokens + s.max_tokens)
    assert longest in sample[:2]


def _run_fine_tokenizer(
    tmp_path: Path, *, first_delay_s: float, timeout_s: float = 600.0
) -> tuple[BenchResult, PathServer]:
    """The default workload at a 2,048-token context on a server whose tokenizer splits our
    words into 1.6 tokens each (past the 15 % an unknown tokenizer is allowed) and whose
    first /tokenize takes `first_delay_s` (a cold tokenizer, as a fresh vLLM's on a busy host)."""
    config = ServerConfig(
        behavior=_FAST, max_model_len=2048, reject_over_context=True, prompt_token_scale=1.6,
        template_tokens=20, template_tokens_per_message=5, tokenize_first_delay_s=first_delay_s,
    )  # fmt: skip
    with serve_in_thread(config) as (url, server):
        result = run_bench(
            BenchSpec(
                url=url, concurrencies=[16], num_requests=120, out=tmp_path / "run",
                check_tokens=False, timeout_s=timeout_s,
            )
        )  # fmt: skip
    return result, server


def test_a_slow_first_tokenize_is_waited_for_and_nothing_is_rejected(tmp_path: Path) -> None:
    # 3 s: longer than the sample's whole budget, which once counted the first ask too: the
    # fit then assumed 1.15 tokens a word, and this server rejected requests as over-long (a
    # fresh vLLM CPU install in CI: 2 of the first 4, and diagnose stopped with exit 2).
    result, server = _run_fine_tokenizer(tmp_path, first_delay_s=3.0)
    _assert_nothing_rejected(result, server)
    fit = result.workload_fit
    assert fit is not None and fit.count_source == "/tokenize" and not fit.estimated
    assert fit.rescale == pytest.approx(1.6, abs=0.02)


def test_the_runs_request_timeout_bounds_the_wait_for_the_first_tokenize(
    tmp_path: Path,
) -> None:
    """`bench --timeout 2s`: a /tokenize that does not answer is given up after 2 s, not
    after `FIRST_TIMEOUT_S` (20 s): a server that stalls costs the run no more before its
    load than one of its requests would (it once cost 27 s at --timeout 3s)."""
    result, _ = _run_fine_tokenizer(tmp_path, first_delay_s=5.0, timeout_s=2.0)
    fit = result.workload_fit
    assert fit is not None and fit.estimated
    assert fit.count_source == "assumed (/tokenize did not answer within 2 s)"


def test_a_tokenize_that_never_answers_is_said_and_its_rejections_blame_the_estimate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(promptcount, "FIRST_TIMEOUT_S", 0.5)
    result, server = _run_fine_tokenizer(tmp_path, first_delay_s=5.0)
    fit = result.workload_fit
    assert fit is not None and fit.estimated
    assert fit.count_source == "assumed (/tokenize did not answer within 0.5 s)"
    estimated = [w for w in result.warnings if "prompt lengths were estimated" in w]
    assert estimated and estimated[0].startswith("/tokenize did not answer within 0.5 s and no")
    # the assumed 1.15 tokens a word is short of this tokenizer's 1.6: vLLM rejects some, and
    # the stop names the estimate, not the workload's outputs, as what to fix
    assert server.rejected
    with pytest.raises(UserError, match=r"fix it with --tokenizer .*lengths were estimated"):
        stop_if_rejected(result)
