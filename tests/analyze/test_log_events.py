"""analyze.logs.events: what a log's lines say happened, summed; seat events as stats lines.

The lines are llama-server's own (ggml-org/llama.cpp tools/server, format of 2025, as in
ggml-org/llama.cpp#19408) and vLLM's (0.10 `kv_cache_utils.py`, V0 `scheduler.py`); the
numbers are chosen here.
"""

from __future__ import annotations

import dataclasses

from infertriage.analyze.logs import LogRecord, read_records, seat_stats, summarise_events
from infertriage.analyze.logs.signals import timeline_signals
from infertriage.analyze.logs.timeline import make_timeline

LLAMA = """\
srv          init: initializing slots, n_slots = 2
slot launch_slot_: id  0 | task 0 | processing task
slot launch_slot_: id  1 | task 1 | processing task
srv  get_availabl: no slot is available, defer task, id_task = 2
slot print_timing: id  0 | task 0 |
prompt eval time =      35.47 ms /    12 tokens (    2.96 ms per token,   338.31 tokens per second)
       eval time =     512.63 ms /    38 tokens (   13.49 ms per token,    74.13 tokens per second)
      total time =     548.10 ms /    50 tokens
slot      release: id  0 | task 0 | stop processing: n_past = 49, truncated = 0
slot launch_slot_: id  0 | task 2 | processing task
{miss}
slot      release: id  1 | task 1 | stop processing: n_past = 80, truncated = 1
srv  update_slots: all slots are idle
""".format(
    miss="forcing full prompt re-processing due to lack of cache data (likely due to SWA or "
    "hybrid/recurrent memory, see https://github.com/ggml-org/llama.cpp/pull/13194)"
)


def _records(text: str) -> list[LogRecord]:
    return read_records(text, 0.0)


def _undated(records: list[LogRecord]) -> list[LogRecord]:
    """As `api.logs` reads a log without stamps: every record at one moment."""
    return [dataclasses.replace(r, at=0.0) for r in records]


def test_prompt_and_decode_lines_are_one_request() -> None:
    summary = summarise_events(_records(LLAMA))
    times = summary.requests
    assert times.count == 1
    assert times.prefill_s == (0.03547,) and times.prompt_tokens == (12.0,)
    assert times.output_tokens == (38.0,) and abs(times.tpot_s[0] - 0.01349) < 1e-9
    assert summary.seats_taken == 3 and summary.deferred == 1
    assert summary.cache_misses == 1 and summary.context_shifts == 1  # truncated = 1
    assert summary.config["max_num_seqs"] == 2


def test_seat_events_become_the_stats_llama_cpp_never_prints() -> None:
    records = seat_stats(_records(LLAMA), "llamacpp")
    said = [(r.stats.running, r.stats.waiting) for r in records if r.stats is not None]
    # two taken, one deferred, one freed, the deferred one takes it, one freed, all idle
    assert said == [(1, 0), (2, 0), (2, 1), (1, 1), (2, 0), (1, 0), (0, 0)]


def test_a_log_without_stamps_is_a_snapshot_without_rates() -> None:
    records = _undated(seat_stats(_records(LLAMA), "llamacpp"))
    timeline = make_timeline(records, (None, None), 10.0, dated=False)
    assert timeline is not None and not timeline.dated
    names = {s.name: s.value for s in timeline_signals(timeline)}
    assert "queue.waiting_slope" not in names  # no time: no rate
    assert names["queue.waiting_max"] == 1 and names["queue.running_max"] == 2
    assert names["config.max_num_seqs"] == 2 and names["log.cache_misses"] == 1
    assert names["log.cache_miss_share"] == 1 / 3  # of the three requests started
    assert names["server.itl_mean_s"] == 0.01349


def test_vllm_limits_and_kv_sizes_are_config_and_refusals() -> None:
    text = "\n".join(
        [
            "WARNING 02-16 15:37:32 scheduler.py:947] Input prompt (2501 tokens) is too long "
            "and exceeds limit of 2048",
            "INFO 05-01 10:00:00 [kv_cache_utils.py:716] GPU KV cache size: 14,336 tokens",
            "INFO 05-01 10:00:00 [kv_cache_utils.py:720] Maximum concurrency for 32,768 tokens "
            "per request: 0.44x",
        ]
    )
    summary = summarise_events(_records(text))
    assert summary.over_limit == 1 and summary.prompt_limit == 2048
    assert summary.config["max_model_len"] == 32768
    timeline = make_timeline(_undated(_records(text)), (None, None), 10.0, dated=False)
    assert timeline is not None
    names = {s.name: s.value for s in timeline_signals(timeline)}
    assert names["log.kv_cache_short"] == 1  # 14,418 tokens hold less than one 32k request
    assert names["log.prompts_over_limit"] == 1 and names["log.prompt_limit_tokens"] == 2048


def test_generic_lines_are_read_whatever_the_engine() -> None:
    text = "\n".join(
        [
            "[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=81, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600005 milliseconds before timing out.",
            "Prefill transfer failed ... Failed to send kv chunk",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
        ]
    )
    summary = summarise_events(_records(text))
    assert summary.collective_timeouts == 1 and summary.kv_transfer_failures == 1
    assert summary.engine_deaths == 1
