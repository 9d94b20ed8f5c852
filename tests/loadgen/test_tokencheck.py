"""The `/tokenize` cross-check: vLLM's and llama.cpp's forms, agreement and the warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec, ClientSpec
from infertriage.workload import words_text
from infertriage_testing.testserver import ServerConfig, serve_in_thread


def _bench(
    tmp_path: Path,
    config: ServerConfig,
    endpoint: str = "chat",
    workload: str = "synthetic:input=40,output=4",
) -> tuple[dict, list[str]]:
    with serve_in_thread(config) as (url, _):
        result = run_bench(
            BenchSpec(
                url=url,
                concurrencies=[2],
                num_requests=10,
                out=tmp_path / "run",
                workload=workload,
                client=ClientSpec(endpoint=endpoint),
            )
        )
    check = result.token_check
    assert check is not None
    found = [w for w in result.warnings if "/tokenize" in w]
    return {
        "form": check.form, "n": check.num_prompts, "intended": check.intended_tokens,
        "text": check.server_tokens, "usage": check.usage_tokens, "request": check.request_tokens,
        "rescale": result.workload_fit.rescale if result.workload_fit else None,
    }, found  # fmt: skip


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_agreeing_counts_give_no_warning(tmp_path: Path, endpoint: str) -> None:
    check, warnings = _bench(tmp_path, ServerConfig(), endpoint)
    assert check["form"] == "vllm" and check["n"] == 8
    assert check["text"] == check["intended"] == 8 * 40  # one word, one token
    # The loopback server's chat usage adds 4 template tokens; /tokenize counts them too.
    assert check["usage"] == check["request"] == 8 * (44 if endpoint == "chat" else 40)
    assert warnings == []


def test_a_server_counting_differently_gets_the_intended_lengths(tmp_path: Path) -> None:
    # The server counts each word as 1.2 tokens: the fit regenerates the synthetic text at
    # 40 / 1.2 words, so /tokenize counts the intended 40; usage still disagrees with it.
    check, warnings = _bench(tmp_path, ServerConfig(tokenize_scale=1.2))
    assert check["rescale"] == pytest.approx(1.2)
    assert check["text"] == check["intended"] == 8 * 40 and check["request"] == 8 * 44
    assert len(warnings) == 1
    assert "usage.prompt_tokens add up to 296" in warnings[0] and "(-16%)" in warnings[0]


def test_literal_prompts_the_server_counts_differently_are_warned_about(tmp_path: Path) -> None:
    # Literal text is sent as it is: the file's 40-token lengths miss the server's by 20 %.
    lines = [
        json.dumps({"prompt": words_text(40, key), "prompt_tokens": 40, "max_tokens": 4})
        for key in range(8)
    ]
    (tmp_path / "prompts.jsonl").write_text("\n".join(lines))
    workload = f"jsonl:{tmp_path / 'prompts.jsonl'},replay=false"
    check, warnings = _bench(tmp_path, ServerConfig(tokenize_scale=1.2), workload=workload)
    assert check["text"] == 8 * 48 and check["rescale"] is None
    assert len(warnings) == 2
    assert "intended 320 (+20%)" in warnings[0] and "--tokenizer" in warnings[0]


def test_llama_cpp_form_checks_the_text_and_skips_the_chat_template(tmp_path: Path) -> None:
    check, warnings = _bench(tmp_path, ServerConfig(tokenize="llama.cpp", tokenize_scale=0.85))
    assert check["form"] == "llama.cpp" and check["rescale"] == pytest.approx(0.85)
    assert check["text"] == check["intended"] == 8 * 40  # regenerated at 40 / 0.85 words
    assert check["usage"] is None and check["request"] is None  # no template: not compared
    assert warnings == []
    check, warnings = _bench(tmp_path / "c", ServerConfig(tokenize="llama.cpp"), "completions")
    assert check["usage"] == check["request"] == 8 * 40 and warnings == []


def test_no_tokenize_is_recorded_without_a_warning(tmp_path: Path) -> None:
    check, warnings = _bench(tmp_path, ServerConfig(tokenize="none"))
    assert check["form"] == "none" and check["n"] == 0 and warnings == []
