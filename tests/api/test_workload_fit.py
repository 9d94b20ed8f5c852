"""The default workload fitted to the real twin: nothing the twin (as vLLM) would reject is sent.

The twin rejects a prompt + max_tokens past `max_model_len` with vLLM's HTTP 400; its
chat template adds tokens and its tokenizer splits the workload's one long word, so
the default chat mix, unfitted, asks for more than the context now and then.
"""

from __future__ import annotations

import json
from pathlib import Path

from infertriage.api.bench import run_bench
from infertriage.api.diagnose import sweep_of
from infertriage.api.preflight import ServerInfo, WorkloadFit
from infertriage.api.specs import BenchSpec
from infertriage.loadgen.client import Endpoint
from infertriage.twin.frontend import apply_chat_template
from infertriage.twin.process import TwinProcess
from infertriage.workload import (
    ContextLimit,
    RequestSpec,
    TextRenderer,
    make_schedule,
    parse_workload,
)

_RENDERER = TextRenderer()


def _twin_total(spec: RequestSpec) -> int:
    """What the twin counts for the request: its chat template over the text, plus max_tokens."""
    messages = [{"role": role, "content": text} for role, text in _RENDERER.messages(spec.turns)]
    return len(apply_chat_template(messages)) + spec.max_tokens


def _over(specs: tuple[RequestSpec, ...], limit: int) -> int:
    # Only requests near the limit can pass it (the twin counts a word as at most 2 tokens,
    # and the text's words are one token but for one in 171).
    near = [s for s in specs if s.prompt_tokens * 1.1 + 16 + s.max_tokens > limit]
    return sum(1 for s in near if _twin_total(s) > limit)


def test_the_default_diagnose_load_fits_the_healthy_twin() -> None:
    # diagnose's measured level at its defaults: a closed loop of 16 streams for 20 s.
    concurrency = sweep_of(16)[-1]
    schedule = make_schedule(
        parse_workload("chat-mix"), None, num_requests=None, duration_s=20.0,
        concurrency=concurrency, max_model_len=8192,
    )  # fmt: skip
    assert _over(schedule.specs, 8192) > 10  # unfitted, the twin would reject these
    with TwinProcess("healthy", load_time_s=0.1) as twin:
        served = ServerInfo((), base_url=twin.url + "/v1")
        fit = WorkloadFit(
            ContextLimit(8192, "/v1/models max_model_len"), served,
            model="llama-3.1-8b", endpoint=Endpoint.CHAT, tokenizer=None,
        )  # fmt: skip
        fitted = fit.fit(schedule)
    assert fit.prompt_model is not None and fit.prompt_model.source == "/tokenize"
    assert dict(fit.prompt_model.overhead) == {1: 3, 2: 5}  # the twin's template: 1 + 2 a message
    assert _over(fitted.specs, 8192) == 0
    assert fit.report is not None and 0 < fit.report.num_capped < 100


def test_bench_sends_nothing_a_short_context_twin_rejects(tmp_path: Path) -> None:
    scenario = tmp_path / "short.yaml"
    scenario.write_text("gpu: B200\nengine: {max_model_len: 1024}\n")
    with TwinProcess(str(scenario), load_time_s=0.1) as twin:
        result = run_bench(
            BenchSpec(
                url=twin.url,
                concurrencies=[48],
                num_requests=48,
                out=tmp_path / "run",
                check_tokens=False,
            )
        )
    summary = result.levels[0].summary
    assert summary.num_ok == 48 and summary.num_failed == 0
    fit = result.workload_fit
    assert fit is not None and fit.max_model_len == 1024 and fit.num_capped > 0
    lines = (tmp_path / "run" / "requests.jsonl").read_text().splitlines()
    assert [json.loads(line)["http_status"] for line in lines] == [200] * 48
