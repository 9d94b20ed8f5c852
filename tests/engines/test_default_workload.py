"""`diagnose` with its DEFAULT workload and flags (no `--workload`, no `--tokenizer`) against
real engines at small contexts: the workload is fitted to the server before the load, so
no request is rejected (no 4xx), and the map names the layer the set-up starves.

Before the workload was fitted (2026-12-03, vLLM 0.32.0 CPU, 24 blocks, default 2,048-token
context): 45 of 105 requests were rejected with HTTP 400 ("maximum context length is 2048
tokens", "min_tokens must be less than or equal to max_tokens") and the primary was
`application.error_rate`.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from infertriage.loadgen import promptcount
from infertriage.loadgen.client import Endpoint, prompt_fields
from infertriage.workload import (
    DEFAULT_WORKLOAD,
    ContextLimit,
    TextRenderer,
    estimate_tokens,
    fit_specs,
    make_specs,
    parse_workload,
)

Cli = Callable[[list[str]], tuple[int, Any]]


def _findings(diagnosis: dict[str, Any]) -> dict[str, str]:
    return {f["id"]: layer["status"] for layer in diagnosis["layers"] for f in layer["findings"]}


def _client_errors(run: Path) -> Counter[str]:
    """The 4xx answers in a run's requests.jsonl, by status and the message's first words."""
    found: Counter[str] = Counter()
    for line in (run / "requests.jsonl").read_text().splitlines():
        record = json.loads(line)
        status = record.get("http_status")
        if status is not None and 400 <= status < 500:
            found[f"{status}: {record.get('error_text', '')[:100]}"] += 1
    return found


def _diagnose(cli: Cli, url: str, pid: int, out: Path, *extra: str) -> dict[str, Any]:
    code, diagnosis = cli(
        ["diagnose", "--url", url, "--duration", "30", "--server-pid", str(pid),
         "--out", str(out), *extra]
    )  # fmt: skip
    assert code == 0, diagnosis
    return dict(diagnosis)


def test_vllm_default_context_few_kv_blocks_is_memory_with_no_4xx(
    vllm: ModuleType, cli: Cli, tmp_path: Path
) -> None:
    # Declared: vLLM's default 2,048-token context, 24 blocks of 128 tokens, the default chat
    # mix at the default 16 streams — requests wait for blocks: primary memory, no 4xx.
    with vllm.serve(port=0, num_gpu_blocks_override=24) as server:
        diagnosis = _diagnose(cli, server.url, server.pid, tmp_path / "d")
    assert not _client_errors(tmp_path / "d")
    assert diagnosis["primary"] is not None, _findings(diagnosis)
    assert diagnosis["primary"]["layer"] == "memory", _findings(diagnosis)


def test_vllm_default_context_two_seats_is_scheduling_with_no_4xx(
    vllm: ModuleType, cli: Cli, tmp_path: Path
) -> None:
    # Declared: two sequence seats (`--max-num-seqs 2`) and ample KV blocks, the default chat
    # mix at 16 streams — requests wait for a seat: primary scheduling, no 4xx.
    with vllm.serve(port=0, max_num_seqs=2) as server:
        diagnosis = _diagnose(cli, server.url, server.pid, tmp_path / "d")
    assert not _client_errors(tmp_path / "d")
    assert diagnosis["primary"] is not None, _findings(diagnosis)
    assert diagnosis["primary"]["layer"] == "scheduling", _findings(diagnosis)


def test_llama_cpp_small_context_default_workload_has_no_4xx(
    llama: ModuleType, cli: Cli, tmp_path: Path
) -> None:
    # Declared: `-c 1024` over 2 slots (512 tokens each, far below the chat mix's long
    # prompts) — every prompt is fitted to the slot: no 4xx, and no application error rate.
    with llama.serve(port=0, np=2, ctx=1024) as server:
        diagnosis = _diagnose(cli, server.url, server.pid, tmp_path / "d", "--concurrency", "4")
    assert not _client_errors(tmp_path / "d")
    ids = _findings(diagnosis)
    assert "application.error_rate" not in ids, ids


def test_vllm_counts_every_fitted_request_within_its_context(
    vllm: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tiny Llama's tokenizer splits our words into 2.7 tokens, each text differently
    # (sd 1.1 a word): the fit learnt from the least sample (MIN_SPECS prompts: no budget
    # left after them) must keep every one of 900 default-mix requests, as vLLM itself
    # counts it, within the 2,048-token context. Before the fit bounded the spread, 1-8 of
    # each 300 were over (vLLM answers those with HTTP 400).
    monkeypatch.setattr(promptcount, "BUDGET_S", 0.0)
    renderer = TextRenderer(None)
    with vllm.serve(port=0) as server:
        over = []
        for seed in range(3):
            specs = make_specs(parse_workload(DEFAULT_WORKLOAD), 300, seed=seed, max_model_len=2048)
            model = asyncio.run(
                promptcount.learn_prompt_model(
                    base_url=server.url + "/v1", model=server.model, endpoint=Endpoint.CHAT,
                    specs=specs, renderer=renderer, count_text=estimate_tokens, headers={},
                    have_tokenizer=False,
                )
            )  # fmt: skip
            assert model.source == "/tokenize" and model.synth_spread > 0
            fitted, _ = fit_specs(specs, ContextLimit(2048, "test"), model)
            for spec in fitted:
                prompt = vllm.count_tokens(server, prompt_fields(renderer, spec, chat=True))
                if prompt + spec.max_tokens > 2048:
                    over.append((seed, spec.index, prompt, spec.max_tokens))
    assert over == []
