"""report.exports, level 4: one load level as `vllm bench serve --save-result --save-detailed`.

Takes an `ExportLevel`; gives the result JSON vLLM's benchmark writes (the dict
`main` in `vllm/benchmarks/serve.py` saves: its setup keys, then `benchmark`'s
result; read at vllm-project/vllm commit 009e6d4a1cd6, the 0.3x line), as if run
with `--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,95,99`.
Each figure follows vLLM's definition, computed from our records: durations in
milliseconds in the statistics (`mean_ttft_ms`), seconds in the per-request lists
(`ttfts`, `itls`, `latencies`), statistics over successful requests, throughput
over the whole level (first send to last finish: vLLM's `duration`, not our
steady window), a failed request's TTFT and latency 0 and its output length 0,
an empty list's statistics 0. `itls` are the gaps between content chunks (vLLM
times each SSE event; ours a read, which may hold several coalesced events).
`generated_texts` and `rtfx` are left out: we keep no text and send no audio.
`docs/exports.md` lists every field and where it differs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

import numpy as np

from infertriage.analyze.stats.latency import e2e_s, tpot_s
from infertriage.report.exports.level import (
    ExportLevel,
    chunk_gaps_s,
    finished_ts,
    level_span,
    output_len,
)
from infertriage.schemas import RequestRecord

__all__ = ["PERCENTILES", "vllm_result"]

PERCENTILES = (50.0, 90.0, 95.0, 99.0)  # vLLM's `--metric-percentiles 50,90,95,99`
_MS = 1000.0


def _backend(endpoint: str) -> str:
    """vLLM's `--backend` for our endpoint: `openai-chat` or `openai` (completions)."""
    return "openai-chat" if endpoint == "chat" else "openai"


def _request_rate(level: ExportLevel) -> float | str:
    """vLLM writes "inf" for all at once; a closed loop is its `--max-concurrency N`
    at rate inf."""
    if level.mode == "rate" and level.value is not None and math.isfinite(level.value):
        return level.value
    return "inf"


def _max_concurrency(level: ExportLevel) -> int | None:
    if level.mode == "concurrency" and level.value is not None:
        return round(level.value)
    return level.max_concurrency


def _stats(stem: str, values_s: Sequence[float]) -> dict[str, float]:
    """`mean_/median_/std_/pNN_<stem>_ms` as vLLM's `process_one_metric` writes them
    (`np.mean(values or 0)`: no value gives 0)."""
    data = np.asarray(values_s if len(values_s) else [0.0], dtype=np.float64) * _MS
    out = {
        f"mean_{stem}_ms": float(np.mean(data)),
        f"median_{stem}_ms": float(np.median(data)),
        f"std_{stem}_ms": float(np.std(data)),
    }
    for p in PERCENTILES:
        word = str(int(p)) if int(p) == p else str(p)
        out[f"p{word}_{stem}_ms"] = float(np.percentile(data, p))
    return out


def _peaks(ok: Sequence[RequestRecord]) -> tuple[float, int]:
    """vLLM's `max_output_tokens_per_s` and `max_concurrent_requests`, as its
    `calculate_metrics` buckets them: whole seconds from the first successful send; each
    token in the second it arrived; each successful request in every second from the one
    it was sent in to the one it ended in, inclusive (so a second counts every request
    active at any moment of it, not the most in flight at one instant)."""
    if not ok:
        return 0.0, 0
    start = min(r.sent_ts for r in ok)
    tokens: dict[int, float] = {}
    active: dict[int, int] = {}
    for record in ok:
        for chunk in record.chunks:
            second = int(chunk.ts - start)
            tokens[second] = tokens.get(second, 0.0) + chunk.num_tokens
        first, last = int(record.sent_ts - start), int(finished_ts(record) - start)
        for second in range(first, last + 1):
            active[second] = active.get(second, 0) + 1
    return max(tokens.values(), default=0.0), max(active.values(), default=0)


def _goodput(level: ExportLevel, ok: Sequence[RequestRecord], duration_s: float) -> float | None:
    """Requests meeting every `--goodput` SLO per second; None (as vLLM) when none was set."""
    if not level.slos:
        return None
    return sum(1 for r in ok if all(slo.met(r) for slo in level.slos)) / duration_s


def _setup(level: ExportLevel, date: str) -> dict[str, object]:
    burstiness = level.burstiness if level.mode == "rate" else 1.0
    return {
        "date": date,
        "endpoint_type": _backend(level.endpoint),
        "backend": _backend(level.endpoint),
        "label": f"infertriage {level.name}",
        "model_id": level.model,
        "tokenizer_id": level.tokenizer,
        "num_prompts": len(level.records),
        # vLLM's --metadata KEY=VALUE pairs land here, as strings
        "infertriage_level": level.name,
        "infertriage_version": level.generator,
        "request_rate": _request_rate(level),
        "burstiness": burstiness,
        "max_concurrency": _max_concurrency(level),
    }


def vllm_result(level: ExportLevel) -> dict[str, object]:
    """The level as vLLM's saved result (see the module docstring)."""
    records = level.records
    ok = [r for r in records if r.ok]
    start, end = level_span(records)
    duration = max(end - start, 1e-9)
    date = datetime.fromtimestamp(level.wall_anchor_s + start).strftime("%Y%m%d-%H%M%S")
    output_lens = [output_len(r) if r.ok else 0 for r in records]
    total_input = sum(r.prompt_tokens or 0 for r in ok)
    total_output = sum(output_lens)
    peak_tokens, peak_requests = _peaks(ok)
    result: dict[str, object] = {
        **_setup(level, date),
        "duration": duration,
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "request_throughput": len(ok) / duration,
        "request_goodput": _goodput(level, ok, duration),
        "output_throughput": total_output / duration,
        "total_token_throughput": (total_input + total_output) / duration,
        "input_lens": [r.prompt_tokens for r in records],
        "output_lens": output_lens,
        "ttfts": [r.ttft_s if r.ttft_s is not None else 0.0 for r in records],
        "itls": [chunk_gaps_s(r) for r in records],
        "latencies": [(e2e_s(r) or 0.0) if r.ok else 0.0 for r in records],
        "start_times": [r.sent_ts for r in records],
        "queue_times": [r.client_queue_s for r in records],
        "errors": ["" if r.ok else (r.error_text or r.error_kind.value) for r in records],
        "max_output_tokens_per_s": peak_tokens,
        "max_concurrent_requests": peak_requests,
    }
    result.update(_stats("ttft", [v for r in ok if (v := r.ttft_s) is not None]))
    result.update(_stats("tpot", [v for r in ok if (v := tpot_s(r)) is not None]))
    result.update(_stats("itl", [gap for r in ok for gap in chunk_gaps_s(r)]))
    result.update(_stats("e2el", [v for r in ok if (v := e2e_s(r)) is not None]))
    if _max_concurrency(level) is not None:  # vLLM adds the client's queue under a cap
        result.update(_stats("client_queue_time", [r.client_queue_s for r in ok]))
    return result
