"""`infertriage logs`' reading of a server's log: formats, messy lines, the timeline, signals.

Every line here is written by hand in the format of the logger it names:
- vLLM 0.10.1 V1 `v1/metrics/loggers.py` (`Engine 000: Avg prompt throughput: …, Running: N
  reqs, Waiting: M reqs, GPU KV cache usage: X%, Prefix cache hit rate: Y%`), with the
  `(APIServer pid=N)` prefix of 0.10; vLLM 0.7.3 V1 (`Running: N reqs, Waiting: M reqs `, no
  KV usage yet); vLLM 0.6.3 V0 `engine/metrics.py` (`… Swapped: S reqs, Pending: M reqs, GPU
  KV cache usage: X%, CPU KV cache usage: Y%.`) and its `scheduler.py` preemption warning;
- vLLM 0.10.1 `v1/spec_decode/metrics.py` (`SpecDecoding metrics: Mean acceptance length: …,
  Accepted: N tokens, Drafted: M tokens, Per-position acceptance rate: …, Avg Draft acceptance
  rate: X%`) and 0.8.5's shorter `SpecDecoding metrics: Draft acceptance rate: X%, Accepted: N
  tokens, Drafted: M tokens`;
- SGLang 0.3.6 `managers/scheduler.py` (`Decode batch. #running-req: …, #token: …, token usage:
  …, gen throughput (token/s): …, #queue-req: …`) and 0.4.6 (`Decode batch, … cuda graph:
  True, …` and, with EAGLE, `accept len: …`), and its `Prefill batch.` line.
"""

from __future__ import annotations

import time

import pytest

from infertriage.analyze.logs import (
    clean_lines,
    formats_of,
    make_timeline,
    pick_interval,
    read_records,
    timeline_signals,
)

V1 = (
    "(APIServer pid=2917) INFO 12-02 14:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg prompt "
    "throughput: {p} tokens/s, Avg generation throughput: {g} tokens/s, Running: {r} reqs, "
    "Waiting: {w} reqs, GPU KV cache usage: {kv}%, Prefix cache hit rate: 40.0%"
)
V1_07 = (
    "INFO 02-10 09:00:10 [loggers.py:78] Avg prompt throughput: 120.0 tokens/s, Avg generation "
    "throughput: 35.5 tokens/s, Running: 3 reqs, Waiting: 1 reqs "
)
V0 = (
    "INFO 10-17 08:00:{s:02d} metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg "
    "generation throughput: 210.4 tokens/s, Running: 64 reqs, Swapped: 0 reqs, Pending: 12 reqs, "
    "GPU KV cache usage: 99.2%, CPU KV cache usage: 0.0%."
)
PREEMPTED = (
    "WARNING 10-17 08:00:{s:02d} scheduler.py:1481] Sequence group cmpl-{s} is preempted by "
    "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect "
    "the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to "
    "provide more KV cache memory. total_num_cumulative_preemption={n}"
)
SPEC_010 = (
    "(APIServer pid=2917) INFO 12-02 14:00:10 [metrics.py:96] SpecDecoding metrics: Mean "
    "acceptance length: 2.60, Accepted throughput: 160.00 tokens/s, Drafted throughput: 300.00 "
    "tokens/s, Accepted: 1600 tokens, Drafted: 3000 tokens, Per-position acceptance rate: "
    "0.800, 0.500, 0.300, Avg Draft acceptance rate: 53.3%"
)
SPEC_085 = (
    "INFO 05-01 10:00:10 [metrics.py:88] SpecDecoding metrics: Draft acceptance rate: 25.0%, "
    "Accepted: 250 tokens, Drafted: 1000 tokens"
)
SGL_036 = (
    "[2024-11-20 10:00:{s:02d} TP0] Decode batch. #running-req: 12, #token: 9000, token usage: "
    "0.42, gen throughput (token/s): 455.10, #queue-req: 7"
)
SGL_046 = (
    "[2025-05-01 10:00:{s:02d} TP0] Decode batch, #running-req: 48, #token: 30512, token usage: "
    "0.61, accept len: 2.31, cuda graph: True, gen throughput (token/s): 1824.33, #queue-req: 0"
)
SGL_PREFILL = (
    "[2025-05-01 10:00:{s:02d} TP0] Prefill batch. #new-seq: 4, #new-token: 2048, #cached-token: "
    "0, token usage: 0.31, #running-req: 8, #queue-req: 120"
)


def _unix(text: str) -> float:
    return time.mktime(time.strptime(text, "%Y-%m-%d %H:%M:%S"))


def _in(year: int) -> float:
    """A moment in `year` (1 July, local time): what dates the stamps that carry none."""
    return time.mktime((year, 7, 1, 0, 0, 0, 0, 0, -1))


def test_a_stamp_without_a_year_takes_the_year_nearest_the_log() -> None:
    """vLLM's stamps carry no year: a New Year's Eve log read after midnight is last
    year's, a log of 1 January read on New Year's Eve is next year's, and 29 February
    is only read in a leap year."""
    eve = V1.format(m=59, s=50, p=1.0, g=1.0, r=1, w=0, kv=1.0).replace("12-02 14:", "12-31 23:")
    just_after = time.mktime((2027, 1, 1, 0, 20, 0, 0, 0, -1))
    (late,) = read_records(eve, just_after)
    assert late.at == _unix("2026-12-31 23:59:50")
    new_year = eve.replace("12-31 23:", "01-01 00:")
    (early,) = read_records(new_year, time.mktime((2026, 12, 31, 23, 0, 0, 0, 0, -1)))
    assert early.at == _unix("2027-01-01 00:59:50")
    leap = eve.replace("12-31 23:", "02-29 23:")
    (day,) = read_records(leap, time.mktime((2028, 9, 15, 9, 0, 0, 0, 0, -1)))
    assert day.at == _unix("2028-02-29 23:59:50")
    (iso,) = read_records(SGL_036.format(s=1), just_after)  # carries its own year
    assert iso.at == _unix("2024-11-20 10:00:01")


def test_each_format_reads_its_figures() -> None:
    (v1,) = read_records(V1.format(m=0, s=10, p=812.3, g=95.0, r=16, w=7, kv=81.5), _in(2026))
    assert v1.at == _unix("2026-12-02 14:00:10") and v1.stats is not None
    s = v1.stats
    assert (s.engine, s.running, s.waiting) == ("vllm", 16.0, 7.0)
    assert (s.kv_usage, s.prompt_tok_s, s.gen_tok_s, s.prefix_hit_rate) == pytest.approx(
        (0.815, 812.3, 95.0, 0.40)
    )
    (old,) = read_records(V1_07, _in(2025))
    assert old.stats is not None and old.stats.kv_usage is None and old.stats.waiting == 1
    (v0,) = read_records(V0.format(s=1), _in(2024))
    assert v0.stats is not None and (v0.stats.engine, v0.stats.waiting) == ("vllm-v0", 12.0)
    (sgl,) = read_records(SGL_036.format(s=1), _in(2024))
    assert sgl.stats is not None and sgl.stats.cuda_graph is None
    assert (sgl.stats.running, sgl.stats.waiting, sgl.stats.kv_usage) == (12.0, 7.0, 0.42)
    assert sgl.stats.gen_tok_s == pytest.approx(455.1)
    (new,) = read_records(SGL_046.format(s=1), _in(2025))
    assert new.stats is not None and new.stats.cuda_graph is True
    assert new.spec is not None and new.spec.mean_acceptance_length == pytest.approx(2.31)


def test_spec_decoding_lines_of_both_vllm_versions() -> None:
    (new,) = read_records(SPEC_010, _in(2026))
    assert new.spec is not None
    assert (new.spec.accepted_tokens, new.spec.drafted_tokens) == (1600, 3000)
    assert new.spec.per_position == (0.8, 0.5, 0.3)
    assert new.spec.mean_acceptance_length == pytest.approx(2.6)
    (old,) = read_records(SPEC_085, _in(2025))
    assert old.spec is not None and old.spec.acceptance_rate == pytest.approx(0.25)
    assert old.spec.per_position == () and old.spec.drafted_tokens == 1000


def test_messy_lines_colour_glued_records_and_prefixes() -> None:
    first = V1.format(m=0, s=10, p=1.0, g=2.0, r=3, w=0, kv=5.0)
    second = V1.format(m=0, s=20, p=1.0, g=2.0, r=4, w=1, kv=6.0)
    sgl = SGL_036.format(s=30)
    text = "\n".join(
        [
            f"\x1b[32m{first}\x1b[0m{second}",  # colour, and two records on one line
            f"vllm-1  | {sgl}",  # a container runtime's prefix
            "",
        ]
    )
    lines = clean_lines(text)
    assert lines == [first, second, "vllm-1  |", sgl]
    records = read_records(text, _in(2026))
    assert [r.stats.running for r in records if r.stats] == [3.0, 4.0, 12.0]


def test_engine_restricts_the_formats() -> None:
    text = "\n".join([V1.format(m=0, s=10, p=1, g=2, r=3, w=0, kv=5.0), SGL_036.format(s=1)])
    engines = [r.stats.engine for r in read_records(text, 2026, formats_of("sglang")) if r.stats]
    assert engines == ["sglang"]
    assert formats_of("nope") == ()  # no such engine: nothing is read


def _v1(m: int, s: int, g: float, r: int, w: int, kv: float, p: float = 300.0) -> str:
    return V1.format(m=m, s=s, p=p, g=g, r=r, w=w, kv=kv)


def test_timeline_intervals_and_the_kv_cache_while_requests_waited() -> None:
    lines = [
        _v1(0, 10, 900.0, 40, 0, 99.0),  # full, but nobody waits
        _v1(0, 20, 950.0, 60, 0, 60.0),
        _v1(0, 30, 980.0, 64, 5, 70.0),  # the queue forms with room in the cache
        _v1(0, 40, 990.0, 64, 15, 72.0),
        _v1(0, 50, 985.0, 64, 25, 71.0),
        SPEC_010,
    ]
    tl = make_timeline(read_records("\n".join(lines), _in(2026)), (None, None), 10.0)
    assert tl is not None and tl.engine == "vllm"
    assert [row.waiting for row in tl.intervals] == [0.0, 0.0, 5.0, 15.0, 25.0]
    assert tl.intervals[0].spec_acceptance == pytest.approx(1600 / 3000)
    assert tl.preemptions is None and tl.stalls == ()
    signals = {s.name: s.value for s in timeline_signals(tl)}
    assert signals["kv.usage_max"] == pytest.approx(0.72)  # while requests waited
    assert signals["queue.waiting_max"] == 25.0 and signals["queue.running_max"] == 64.0
    # fitted from the last line with none waiting to the peak: 0, 5, 15, 25 at 10 s steps
    assert signals["queue.waiting_slope"] == pytest.approx(0.85)
    assert signals["log.engine_stuck_s"] == 0.0 and signals["log.oom_errors"] == 0.0
    assert "preemptions.total" not in signals  # V1 logs none: no zero
    assert "trace.recompilations" not in signals  # TORCH_LOGS may be off: no zero
    assert signals["spec.acceptance_rate"] == pytest.approx(1600 / 3000)
    assert signals["spec.mean_accepted_tokens"] == pytest.approx(1.6)
    assert signals["spec.acceptance_decay"] == pytest.approx(0.3 / 0.8)
    assert signals["spec.num_draft_tokens"] == 3.0


def test_v0_preemptions_count_by_their_running_total_and_oom_once_per_traceback() -> None:
    lines = [
        V0.format(s=1),
        PREEMPTED.format(s=2, n=1),
        PREEMPTED.format(s=3, n=51),  # 0.6 warns at every 50th after the first
        V0.format(s=11),
        "ERROR 10-17 08:00:12 engine.py:135] CUDA out of memory. Tried to allocate 2.00 GiB",
        "Traceback (most recent call last):",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",  # undated
    ]
    tl = make_timeline(read_records("\n".join(lines), _in(2024)), (None, None), 10.0)
    assert tl is not None and tl.engine == "vllm-v0"
    assert tl.preemptions == 51 and tl.oom_errors == 1
    assert [(r.preemptions, r.oom_errors) for r in tl.intervals] == [(51, 0), (0, 1)]
    signals = {s.name: s.value for s in timeline_signals(tl)}
    assert signals["preemptions.total"] == 51.0 and signals["log.oom_errors"] == 1.0


def test_a_stall_lasts_until_work_shows_or_the_log_ends() -> None:
    access = '(APIServer pid=2917) INFO 12-02 14:{m:02d}:00 [launcher.py:80] "GET /health" 200'
    ended = [
        _v1(0, 10, 900.0, 12, 0, 20.0),
        _v1(0, 20, 0.0, 12, 2, 20.0, p=0.0),  # nothing generated; then vLLM goes quiet
        *(access.format(m=m) for m in (1, 2, 3)),
    ]
    tl = make_timeline(read_records("\n".join(ended), _in(2026)), (None, None), 10.0)
    assert tl is not None and len(tl.stalls) == 1
    assert tl.stalls[0].duration_s == pytest.approx(160.0) and tl.stalls[0].running == 12.0
    assert [row.stalled for row in tl.intervals] == [False, True]
    resumed = [
        _v1(0, 10, 0.0, 12, 0, 20.0, p=0.0),
        _v1(0, 20, 0.0, 12, 0, 20.0, p=0.0),
        _v1(0, 30, 400.0, 12, 0, 20.0),
        _v1(0, 40, 0.0, 0, 0, 0.0, p=0.0),  # idle with nothing running: no stall
    ]
    tl = make_timeline(read_records("\n".join(resumed), _in(2026)), (None, None), 10.0)
    assert tl is not None and [s.duration_s for s in tl.stalls] == [20.0]
    prefilling = [_v1(0, 10, 0.0, 12, 0, 20.0, p=8000.0), _v1(0, 20, 0.0, 12, 0, 20.0, p=9000.0)]
    tl = make_timeline(read_records("\n".join(prefilling), _in(2026)), (None, None), 10.0)
    assert tl is not None and tl.stalls == ()  # long prompts, no decode yet: not stuck


def test_the_window_keeps_its_lines_and_the_interval_widens_to_fit() -> None:
    lines = [_v1(m, 0, 500.0, 4, 0, 10.0) for m in range(10)]
    records = read_records("\n".join(lines), _in(2026))
    window = (_unix("2026-12-02 14:03:00"), _unix("2026-12-02 14:05:00"))
    tl = make_timeline(records, window, 60.0)
    assert tl is not None and len(tl.intervals) == 3
    assert make_timeline(records, (_unix("2026-12-02 15:00:00"), None), 10.0) is None
    assert pick_interval(300.0, 10.0, 60) == 10.0
    assert pick_interval(3600.0, 10.0, 60) == 60.0
    assert pick_interval(86400.0 * 3, 10.0, 60) == 3600.0


def test_data_parallel_engines_are_summed_and_stall_on_their_own() -> None:
    def dp(engine: int, s: int, g: float, r: int, w: int, kv: float) -> str:
        line = _v1(0, s, g, r, w, kv, p=0.0 if g == 0 else 300.0)
        return line.replace("Engine 000:", f"Engine {engine:03d}:")

    lines = [
        *(dp(0, s, 800.0, 30, 4, 60.0) for s in (10, 20, 30)),
        *(dp(1, s, 0.0, 12, 6, 90.0) for s in (10, 20, 30)),  # engine 1 hangs
        dp(1, 40, 0.0, 0, 0, 0.0),  # and is restarted empty
        dp(0, 40, 800.0, 30, 4, 60.0),
    ]
    (first,) = read_records(lines[3], _in(2026))
    assert first.stats is not None and first.stats.engine_index == 1
    tl = make_timeline(read_records("\n".join(lines), _in(2026)), (None, None), 10.0)
    assert tl is not None
    row = tl.intervals[0]
    assert (row.running, row.waiting, row.kv_usage, row.gen_tok_s) == pytest.approx(
        (42.0, 10.0, 0.9, 800.0)
    )
    assert [(s.start, s.duration_s, s.running) for s in tl.stalls] == [
        (_unix("2026-12-02 14:00:10"), 30.0, 12.0)
    ]
    signals = {s.name: s.value for s in timeline_signals(tl)}
    assert signals["queue.running_max"] == 42.0 and signals["queue.waiting_max"] == 10.0


def test_sglang_watchdog_is_a_stall_of_its_timeout() -> None:
    lines = [
        SGL_046.format(s=10),
        # SGLang 0.4.6 `scheduler.py` watchdog_thread, after 300 s without a forward step
        "[2025-05-01 10:05:10 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, "
        "self.soft=False)",
    ]
    tl = make_timeline(read_records("\n".join(lines), _in(2025)), (None, None), 10.0)
    assert tl is not None
    assert [(s.start, s.duration_s, s.running) for s in tl.stalls] == [
        (_unix("2025-05-01 10:00:10"), 300.0, 48.0)
    ]
    assert tl.intervals[-1].stalled
    assert {s.name: s.value for s in timeline_signals(tl)}["log.engine_stuck_s"] == 300.0
