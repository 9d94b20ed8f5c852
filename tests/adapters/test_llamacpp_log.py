"""engines.llamacpp's log format: every kind of llama-server line it reads, on real lines.

Each fixture is a line llama-server printed, copied from a public log (cited: the
repository and issue or pull request, and the build when the thread says it). Where no
public log shows a line, it is the format string in ggml-org/llama.cpp's source with its
macro's prefix and the figures filled in, and the comment says so.
"""

from __future__ import annotations

import time

import pytest

from infertriage.analyze.logs import clean_lines, read_records
from infertriage.engines import LLAMACPP, EventKind, LogEvent, LogFormat

# ggml-org/llama.cpp#19408 (server : improve context checkpoint logic, 2026), a log pasted in
# its thread by podium868909: a request's timings, its slot freed, the next taken and its
# cached prefix refused (a hybrid model's memory)
CHECKPOINT_THREAD = """\
slot update_slots: id  0 | task 124 | prompt done, n_tokens = 1360, batch.n_tokens = 1360
slot init_sampler: id  0 | task 124 | init sampler, took 0.32 ms, tokens: text = 1360, total = 1360
slot print_timing: id  0 | task 124 | 
prompt eval time =    5093.47 ms /  1360 tokens (    3.75 ms per token,   267.01 tokens per second)
       eval time =     319.58 ms /    10 tokens (   31.96 ms per token,    31.29 tokens per second)
      total time =    5413.05 ms /  1370 tokens
slot      release: id  0 | task 124 | stop processing: n_tokens = 1369, truncated = 0
srv  update_slots: all slots are idle
srv  log_server_r: done request: POST /infill 10.8.0.6 200
slot launch_slot_: id  0 | task -1 | sampler chain: logits -> top-k -> top-p -> infill -> dist 
slot launch_slot_: id  0 | task 135 | processing task, is_child = 0
slot update_slots: id  0 | task 135 | new prompt, n_ctx_slot = 32768, n_keep = 0, task.n_tokens = 1371
slot update_slots: id  0 | task 135 | n_past = 848, slot.prompt.tokens.size() = 1369, seq_id = 0, pos_min = 1368, n_swa = 1
slot update_slots: id  0 | task 135 | forcing full prompt re-processing due to lack of cache data (likely due to SWA or hybrid/recurrent memory, see https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055)
slot update_slots: id  0 | task 135 | n_tokens = 0, memory_seq_rm [0, end)
"""  # noqa: E501, W291

# ggml-org/llama.cpp#24536 (spec: add spec metrics mean acceptance length …, 2026-06-15), a log
# by ruixiang63 with --log-timestamps: timings on one line each, the drafts' acceptance
SPEC_THREAD = """\
0.06.895.980 I slot print_timing: id  1 | task 0 | prompt eval time =     300.11 ms /    20 tokens (   15.01 ms per token,    66.64 tokens per second)
0.06.895.998 I slot print_timing: id  1 | task 0 |        eval time =    2296.72 ms /   256 tokens (    8.97 ms per token,   111.46 tokens per second)
0.06.895.999 I slot print_timing: id  1 | task 0 |       total time =    2596.83 ms /   276 tokens
0.06.896.009 I slot print_timing: id  1 | task 0 |    graphs reused =         85
0.06.896.015 I slot print_timing: id  1 | task 0 | draft acceptance = 0.64479 (  167 accepted /   259 generated), mean acceptance length =  2.92, acceptance rate per position = (0.805, 0.632, 0.483)
0.06.896.057 I statistics     draft-eagle3: #calls(b,g,a) =    1     87     87, #gen drafts =     87, #acc drafts =    70, #gen tokens =    259, #acc tokens =   167, #mean acc len = 2.92, #acc rate/pos = (0.805, 0.632, 0.483), dur(b,g,a) = 0.005, 325.555, 0.114 ms
0.06.896.125 I slot      release: id  1 | task 0 | stop processing: n_tokens = 275, truncated = 0
0.06.896.140 I srv  update_slots: all slots are idle
0.06.920.935 I srv  params_from_: Chat format: peg-native
"""  # noqa: E501


def _log() -> LogFormat:
    assert LLAMACPP.log is not None
    return LLAMACPP.log


def _events(line: str) -> tuple[LogEvent, ...]:
    read = _log().read_events
    assert read is not None
    return read(line)


def _one(line: str) -> LogEvent:
    (event,) = _events(line)
    return event


@pytest.mark.parametrize(
    ("line", "seat"),
    [
        # ggml-org/llama.cpp#19408 (2026)
        ("slot launch_slot_: id  0 | task 135 | processing task, is_child = 0", 0),
        # ggml-org/llama.cpp#10547 (b4261, 2024-12), under journald
        ("Dec 04 03:23:08 kamala llama-server[52276]: slot launch_slot_: id  0 | task 0 | "
         "processing task", 0),
        # ggml-org/llama.cpp#24681 (2026): router mode under docker compose
        ("llama-cpp       | [34255] 0.07.631.911 I slot launch_slot_: id  1 | task 0 | "
         "processing task, is_child = 0", 1),
        # ggml-org/llama.cpp#9013 (2024-08): LOG_INFO text records
        ('INFO [   launch_slot_with_task] slot is processing task | tid="11744" '
         "timestamp=1723514873 id_slot=0 id_task=0", 0),
        # ggml-org/llama.cpp#5195 (2024-01)
        ("slot 0 is processing [task id: 283]", 0),
    ],
)  # fmt: skip
def test_a_slot_taking_a_task_is_a_seat_taken(line: str, seat: int) -> None:
    assert _one(line) == LogEvent(EventKind.SEAT_TAKEN, {"seat": seat})


@pytest.mark.parametrize(
    ("line", "seat"),
    [
        # ggml-org/llama.cpp#19408 (2026)
        ("slot      release: id  0 | task 124 | stop processing: n_tokens = 1369, truncated = 0",
         0),
        # ggml-org/llama.cpp#10547 (b4261, 2024-12): "n_past" before late 2025
        ("Dec 02 12:10:29 kamala llama-server[24689]: slot      release: id  0 | task 519 | stop "
         "processing: n_past = 380, truncated = 0", 0),
        # ggml-org/llama.cpp#7637 (2024-05): LOG_INFO records as JSON (--log-format json)
        ('{"tid":"14964","timestamp":1717067386,"level":"INFO","function":"update_slots","line":'
         '1794,"msg":"slot released","id_slot":0,"id_task":19,"n_ctx":1536,"n_past":323,'
         '"n_system_tokens":969,"n_cache_tokens":323,"truncated":false}', 0),
        # ggml-org/llama.cpp#5195 (2024-01)
        ("slot 0 released (269 tokens in cache)", 0),
    ],
)  # fmt: skip
def test_a_slot_released_is_a_seat_freed(line: str, seat: int) -> None:
    assert _one(line) == LogEvent(EventKind.SEAT_FREED, {"seat": seat})


@pytest.mark.parametrize(
    "line",
    [
        "srv  update_slots: all slots are idle",  # ggml-org/llama.cpp#19408 (2026)
        # ggml-org/llama.cpp#9013 (2024-08)
        'INFO [            update_slots] all slots are idle | tid="11744" timestamp=1723514861',
        # ggml-org/llama.cpp#5104 (2024-01)
        "all slots are idle and system prompt is empty, clear the KV cache",
    ],
)
def test_all_slots_idle_is_a_stats_line_of_nothing_running_or_waiting(line: str) -> None:
    stats = _log().read_stats(line)
    assert stats is not None
    assert (stats.engine, stats.running, stats.waiting, stats.kv_usage) == ("llamacpp", 0, 0, None)
    assert _events(line) == ()


def test_no_other_line_is_a_stats_line() -> None:
    for line in CHECKPOINT_THREAD.splitlines():
        if "all slots are idle" not in line:
            assert _log().read_stats(line) is None


@pytest.mark.parametrize(
    "line",
    [
        # tools/server/server-context.cpp process_single_task (2025–2026), printed with
        # --verbose only: SRV_DBG("no slot is available, defer task, id_task = %d\n", id_task)
        # under SRV_DBG's "srv  %12.*s: " (figures ours; no public log shows it)
        "srv  process_sing: no slot is available, defer task, id_task = 5",
        # the same function: SRV_DBG("requested slot is unavailable, defer task, id_task = %d\n")
        "srv  process_sing: requested slot is unavailable, defer task, id_task = 7",
    ],
)
def test_a_task_waiting_for_a_free_slot_is_deferred(line: str) -> None:
    assert _one(line) == LogEvent(EventKind.DEFERRED)


@pytest.mark.parametrize(
    "line",
    [
        # ggml-org/llama.cpp#19408 (2026)
        "slot update_slots: id  0 | task 135 | forcing full prompt re-processing due to lack of "
        "cache data (likely due to SWA or hybrid/recurrent memory, see "
        "https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055)",
        # ggml-org/llama.cpp#28302 (2026): --log-prefix without timestamps
        "I slot   operator(): id  0 | task 1288 | forcing full prompt re-processing due to lack of "
        "cache data (likely due to SWA or hybrid/recurrent memory, see "
        "https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055)",
        # tools/server/server.cpp update_slots (2025): SLT_WRN(slot, "failed to truncate tokens
        # with position >= %d - clearing the memory\n", p0) (figures ours)
        "slot update_slots: id  0 | task 14 | failed to truncate tokens with position >= 398 - "
        "clearing the memory",
    ],
)
def test_a_prompt_processed_again_from_scratch_is_a_cache_miss(line: str) -> None:
    assert _one(line) == LogEvent(EventKind.CACHE_MISS)


@pytest.mark.parametrize(
    "line",
    [
        # ggml-org/llama.cpp#19408 (2026): the cached prefix, before a checkpoint is looked for
        "slot update_slots: id  0 | task 135 | n_past = 848, slot.prompt.tokens.size() = 1369, "
        "seq_id = 0, pos_min = 1368, n_swa = 1",
        "slot update_slots: id  0 | task 135 | n_tokens = 0, memory_seq_rm [0, end)",
        # ggml-org/llama.cpp#9390 (2024-09): once per chunk of the prompt, not once per request
        "slot update_slots: id  0 | task 0 | kv cache rm [256, end)",
    ],
)
def test_cache_bookkeeping_lines_are_no_miss(line: str) -> None:
    assert _events(line) == ()


@pytest.mark.parametrize(
    ("line", "event"),
    [
        # tools/server/server.cpp update_slots (2024-09 to 2026): SLT_WRN(slot, "slot context
        # shift, n_keep = %d, n_left = %d, n_discard = %d\n", …) (figures ours; context shift
        # is off by default since 2025-08 and no public log shows the line)
        ("slot update_slots: id  0 | task 5 | slot context shift, n_keep = 1, n_left = 4094, "
         "n_discard = 2047", LogEvent(EventKind.CONTEXT_SHIFT, {"discarded": 2047})),
        # ggml-org/llama.cpp#5195 (2024-01)
        ("slot 0: context shift - n_keep = 0, n_left = 511, n_discard = 255",
         LogEvent(EventKind.CONTEXT_SHIFT, {"discarded": 255})),
        # ggml-org/llama.cpp#10547 (b4261): a prompt longer than the slot's context, cut
        ("Dec 04 03:23:08 kamala llama-server[52276]: slot update_slots: id  0 | task 0 | input "
         "truncated, n_ctx = 4096, n_keep = 0, n_left = 4096, n_prompt_tokens = 2982",
         LogEvent(EventKind.CONTEXT_SHIFT)),
    ],
)  # fmt: skip
def test_a_full_context_dropping_tokens_is_a_context_shift(line: str, event: LogEvent) -> None:
    assert _one(line) == event


def test_context_shift_refused_is_no_shift() -> None:
    # tools/server/server.cpp send_error's SRV_ERR("task id = %d, error: %s\n") with the
    # error update_slots sends (figures ours)
    assert _events("srv    send_error: task id = 12, error: context shift is disabled") == ()


@pytest.mark.parametrize(
    ("line", "values"),
    [
        # ggml-org/llama.cpp#19408 (2026): print_timings's lines after "slot print_timing: …"
        ("prompt eval time =    5093.47 ms /  1360 tokens (    3.75 ms per token,   267.01 "
         "tokens per second)",
         {"prefill_s": 5.09347, "prompt_tokens": 1360, "prefill_tok_s": 267.01}),
        ("       eval time =     319.58 ms /    10 tokens (   31.96 ms per token,    31.29 "
         "tokens per second)",
         {"decode_s": 0.31958, "output_tokens": 10, "decode_tok_s": 31.29, "tpot_s": 0.03196}),
        # the same thread: a one-token answer has no rate worth keeping
        ("       eval time =       0.00 ms /     1 tokens (    0.00 ms per token, 1000000.00 "
         "tokens per second)", {"decode_s": 0.0, "output_tokens": 1}),
        # ggml-org/llama.cpp#24536 (2026): each on its own slot line
        ("0.06.895.980 I slot print_timing: id  1 | task 0 | prompt eval time =     300.11 ms /  "
         "  20 tokens (   15.01 ms per token,    66.64 tokens per second)",
         {"prefill_s": 0.30011, "prompt_tokens": 20, "prefill_tok_s": 66.64}),
        # ggml-org/llama.cpp#23269 (2026): router mode
        ("[53409]        eval time =   14323.78 ms /   192 tokens (   74.60 ms per token,    "
         "13.40 tokens per second)",
         {"decode_s": 14.32378, "output_tokens": 192, "decode_tok_s": 13.4, "tpot_s": 0.0746}),
        # ggml-org/llama.cpp#9013 (2024-08): LOG_INFO text records
        ('INFO [           print_timings] prompt eval time     =     222.95 ms /    12 tokens (   '
         '18.58 ms per token,    53.82 tokens per second) | tid="11744" timestamp=1723514879 '
         "id_slot=0 id_task=0 t_prompt_processing=222.948 n_prompt_tokens_processed=12 "
         "t_token=18.579 n_tokens_second=53.82421012971635",
         {"prefill_s": 0.22295, "prompt_tokens": 12, "prefill_tok_s": 53.82}),
        # ggml-org/llama.cpp#7637 (2024-05): LOG_INFO as JSON, "generation eval time … runs"
        ('{"tid":"14964","timestamp":1717067386,"level":"INFO","function":"print_timings","line":'
         '337,"msg":"generation eval time =    3559.27 ms /    25 runs   (  142.37 ms per token,'
         '     7.02 tokens per second)","id_slot":0,"id_task":19,"t_token_generation":3559.272,'
         '"n_decoded":25,"t_token":142.37088,"n_tokens_second":7.023908259891348}',
         {"decode_s": 3.55927, "output_tokens": 25, "decode_tok_s": 7.02, "tpot_s": 0.14237}),
        # ggml-org/llama.cpp#5195 (2024-01): a prompt all cached, its rate "inf"
        ("print_timings: prompt eval time =      57.36 ms /     0 tokens (     inf ms per token,  "
         "   0.00 tokens per second)", {"prefill_s": 0.05736, "prompt_tokens": 0}),
    ],
)  # fmt: skip
def test_each_timing_line_is_a_request_piece(line: str, values: dict[str, float]) -> None:
    event = _one(line)
    assert event.kind is EventKind.REQUEST
    assert event.values.keys() == values.keys()
    for key, value in values.items():
        assert event.values[key] == pytest.approx(value)


@pytest.mark.parametrize(
    "line",
    [
        "      total time =    5413.05 ms /  1370 tokens",  # ggml-org/llama.cpp#19408
        # ggml-org/llama.cpp#2237 (2023): llama.cpp's totals for a whole context, no request's
        "llama_print_timings: prompt eval time =  6294.68 ms /   271 tokens (   23.23 ms per token,"
        "    43.05 tokens per second)",
        # ggml-org/llama.cpp#24536 (2026): progress while a request runs
        "0.06.896.009 I slot print_timing: id  1 | task 0 |    graphs reused =         85",
        # noonghunna/club-3090#1106 (2026)
        "132.13.746.042 I slot print_timing: id  0 | task 9161 | prompt processing, n_tokens =   "
        "1934, progress = 1.00, t =   8.36 s / 231.47 tokens per second",
    ],
)
def test_totals_and_progress_lines_are_no_request(line: str) -> None:
    assert _events(line) == ()


@pytest.mark.parametrize(
    ("line", "rate", "accepted", "drafted", "length", "positions"),
    [
        # ggml-org/llama.cpp#23269 (2026): SLT_CNT, a line of its own
        ("[53409] draft acceptance rate = 0.81944 (  118 accepted /   144 generated)",
         0.81944, 118, 144, None, ()),
        # ggml-org/llama.cpp#24536 (2026-06)
        ("0.06.896.015 I slot print_timing: id  1 | task 0 | draft acceptance = 0.64479 (  167 "
         "accepted /   259 generated), mean acceptance length =  2.92, acceptance rate per "
         "position = (0.805, 0.632, 0.483)", 0.64479, 167, 259, 2.92, (0.805, 0.632, 0.483)),
        # noonghunna/club-3090#1106 (2026)
        ("132.05.318.181 I slot print_timing: id  0 | task 9126 | draft acceptance = 0.67500 (  "
         "108 accepted /   160 generated), mean len =  4.38", 0.675, 108, 160, 4.38, ()),
    ],
)  # fmt: skip
def test_draft_acceptance_is_a_spec_line(
    line: str,
    rate: float,
    accepted: int,
    drafted: int,
    length: float | None,
    positions: tuple[float, ...],
) -> None:
    read = _log().read_spec
    assert read is not None
    spec = read(line)
    assert spec is not None
    assert (spec.acceptance_rate, spec.accepted_tokens, spec.drafted_tokens) == (
        rate,
        accepted,
        drafted,
    )
    assert (spec.mean_acceptance_length, spec.per_position) == (length, positions)


def test_speculative_statistics_since_start_are_no_spec_line() -> None:
    read = _log().read_spec
    assert read is not None
    # ggml-org/llama.cpp#23269 (2026): common_speculative_print_stats, counted since the start
    line = (
        "[53409] 4.48.313.680 I statistics draft-mtp: #calls(b,g,a) = 10 727 727, #gen drafts = "
        "727, #acc drafts = 632, #gen tokens = 1447, #acc tokens = 1135, dur(b,g,a) = 0.007, "
        "30384.874, 1.156 ms"
    )
    assert read(line) is None and _events(line) == ()


@pytest.mark.parametrize(
    ("line", "values"),
    [
        # ggml-org/llama.cpp#17300 (b7079, 2025-11)
        ("srv          init: initializing slots, n_slots = 4", {"max_num_seqs": 4}),
        # ggml-org/llama.cpp#26297 (2026-08)
        ("1.07.304.130 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 50176, "
         "kv_unified = 'false'", {"max_num_seqs": 1, "max_model_len": 50176}),
        # tools/server/server.cpp main (2025–2026): LOG_INF("%s: n_parallel is set to auto,
        # using n_parallel = 4 and kv_unified = true\n", __func__)
        ("main: n_parallel is set to auto, using n_parallel = 4 and kv_unified = true",
         {"max_num_seqs": 4}),
        # examples/server/server.cpp init (2024-09 to 2025): SLT_INF(slot, "new slot n_ctx_slot
        # = %d\n", slot.n_ctx) (figure ours)
        ("slot         init: id  0 | task -1 | new slot n_ctx_slot = 4096",
         {"max_model_len": 4096}),
        # ggml-org/llama.cpp#24124 (2026-06)
        ("0.03.084.366 I slot   load_model: id  0 | task -1 | new slot, n_ctx = 4096",
         {"max_model_len": 4096}),
        ("0.02.635.267 W llama_context: n_ctx_seq (16384) < n_ctx_train (262144) -- the full "
         "capacity of the model will not be utilized", {"max_model_len": 16384}),
        # ggml-org/llama.cpp#19408 (2026)
        ("llama_context: n_ctx         = 32768", {"kv_cache_tokens": 32768}),
        ("llama_context: n_ctx_seq     = 32768", {"max_model_len": 32768}),
        ("llama_context: n_batch       = 2048", {"max_num_batched_tokens": 2048}),
        # ggml-org/llama.cpp#13248 (2025)
        ("llama_context: n_ctx_per_seq = 131072", {"max_model_len": 131072}),
        # ggml-org/llama.cpp#9390 (2024-09): every prompt repeats its slot's context
        ("slot update_slots: id  0 | task 0 | new prompt, n_ctx_slot = 2048, n_keep = 0, "
         "n_prompt_tokens = 895", {"max_model_len": 2048}),
        # ggml-org/llama.cpp#5104 (2024-01)
        ("llama_new_context_with_model: n_ctx      = 512", {"kv_cache_tokens": 512}),
        (" -> Slot 0 - max context: 512", {"max_model_len": 512}),
    ],
)  # fmt: skip
def test_start_up_lines_say_the_configuration(line: str, values: dict[str, float]) -> None:
    assert _one(line) == LogEvent(EventKind.CONFIG, values)


@pytest.mark.parametrize(
    "line",
    [
        # ggml-org/llama.cpp#22368 (2025): the model's trained length, not the server's
        "print_info: n_ctx_train           = 4096",
        # ggml-org/llama.cpp#19408: the physical batch has no CONFIG key
        "llama_context: n_ubatch      = 2048",
    ],
)
def test_other_start_up_figures_are_not_configuration(line: str) -> None:
    assert _events(line) == ()


@pytest.mark.parametrize(
    ("line", "values"),
    [
        # gpustack/gpustack#852 (llama-box, a llama-server fork, 2024-12): upstream's 2025
        # message, which names no figure
        ("9.16.412.167 E srv                send_error: task 40 | error = the request exceeds the "
         "available context size. try increasing the context size or enable context shift", {}),
        # tools/server/server-context.cpp send_error's SRV_ERR("task id = %d, error: %s\n") with
        # the message of ggml-org/llama.cpp#19774 (2026-02; task id ours)
        ("srv    send_error: task id = 7, error: request (4390 tokens) exceeds the available "
         "context size (4096 tokens), try increasing it", {"prompt_tokens": 4390, "limit": 4096}),
    ],
)  # fmt: skip
def test_a_request_over_the_context_is_rejected(line: str, values: dict[str, float]) -> None:
    assert _one(line) == LogEvent(EventKind.REJECTED, values)


def test_only_log_info_records_carry_a_wall_clock_stamp() -> None:
    log = _log()
    # ggml-org/llama.cpp#9013 and #7637: Unix seconds, read as local time
    text = 'INFO [            update_slots] all slots are idle | tid="11744" timestamp=1723514861'
    json = '{"tid":"14964","timestamp":1717067386,"level":"INFO","function":"print_timings"}'
    for line, unix_s in ((text, 1723514861), (json, 1717067386)):
        assert log.read_stamp(line, 1999) == time.strftime(
            "%Y-%m-%d %H:%M:%S", time.localtime(unix_s)
        )
    # the --log-timestamps prefix counts from the server's start: no wall-clock time
    for line in SPEC_THREAD.splitlines() + CHECKPOINT_THREAD.splitlines():
        assert log.read_stamp(line, 2026) is None


def test_it_recognises_llama_server_lines_and_no_other_engines() -> None:
    recognises = _log().recognises
    assert recognises is not None
    ours = [
        *CHECKPOINT_THREAD.splitlines(),
        *SPEC_THREAD.splitlines(),
        # ggml-org/llama.cpp#20431 (2026): llama.cpp's own words for a CUDA out-of-memory
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 144817.04 MiB on device 0: "
        "cudaMalloc failed: out of memory",
        # ggml-org/llama.cpp#15256 (2025): and Vulkan's
        "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory",
        # ggml-org/llama.cpp#22929 (2026): under journald, with timestamps
        "May 23 00:30:27 corrm-pc start_llama_server.sh[385247]: 48.36.669.531 I srv  "
        "update_slots: all slots are idle",
        "print_info: n_ctx_train           = 4096",
    ]
    for line in ours:
        assert recognises.search(line), line
    others = [
        "(APIServer pid=7) INFO 12-02 16:31:45 [loggers.py:123] Engine 000: Avg prompt "
        "throughput: 10.0 tokens/s, Running: 4 reqs, Waiting: 2 reqs, GPU KV cache usage: 37.5%",
        "[2026-12-02 16:31:45] Decode batch. #running-req: 233, #token: 370959, token usage: "
        "0.82, cuda graph: True, gen throughput (token/s): 4594.01, #queue-req: 317",
    ]
    for line in others:
        assert not recognises.search(line), line
        assert _events(line) == ()


def test_records_glued_together_are_cut_at_the_second_stamp_only() -> None:
    # two lines of ggml-org/llama.cpp#24536 with the newline between them lost
    release, idle = SPEC_THREAD.splitlines()[6:8]
    assert clean_lines(release + idle) == [release, idle]
    # a wrapper's prefix before a stamp (ggml-org/llama.cpp#22929, #24681) is no record
    for line in (
        "Jun 18 08:57:40  llama-Qwen:[1351]: 10.13.175.674 I slot print_timing: id  0 | task "
        "1684 | prompt processing, n_tokens =  36864, progress = 0.24, t =  21.09 s / 1748.02 "
        "tokens per second",
        "llama-cpp       | [34255] 0.06.816.562 I srv  update_slots: all slots are idle",
    ):
        assert clean_lines(line) == [line]


def test_an_excerpt_reads_as_one_request_a_seat_freed_and_taken_and_a_cache_miss() -> None:
    records = read_records(CHECKPOINT_THREAD, near_unix_s=0.0)
    assert len(records) == 15
    assert all(r.at is None for r in records)  # llama-server's lines carry no clock
    assert all(r.engine == "llamacpp" for r in records)
    said = [(i, e) for i, r in enumerate(records) for e in r.events]
    assert [(i, e.kind) for i, e in said] == [
        (3, EventKind.REQUEST),
        (4, EventKind.REQUEST),
        (6, EventKind.SEAT_FREED),
        (10, EventKind.SEAT_TAKEN),
        (11, EventKind.CONFIG),
        (13, EventKind.CACHE_MISS),
    ]
    assert said[0][1].values["prompt_tokens"] == 1360
    assert said[1][1].values["output_tokens"] == 10
    assert said[4][1] == LogEvent(EventKind.CONFIG, {"max_model_len": 32768})
    idle = records[7].stats
    assert idle is not None and (idle.running, idle.waiting) == (0, 0)


def test_a_stamped_excerpt_reads_its_timings_its_drafts_and_its_seat() -> None:
    records = read_records(SPEC_THREAD, near_unix_s=0.0)
    assert len(records) == 9
    assert all(r.at is None and r.engine == "llamacpp" for r in records)
    kinds = [[e.kind for e in r.events] for r in records]
    assert kinds == [
        [EventKind.REQUEST],
        [EventKind.REQUEST],
        [],
        [],
        [],
        [],
        [EventKind.SEAT_FREED],
        [],
        [],
    ]
    spec = records[4].spec
    assert spec is not None and (spec.accepted_tokens, spec.drafted_tokens) == (167, 259)
    assert records[7].stats is not None
