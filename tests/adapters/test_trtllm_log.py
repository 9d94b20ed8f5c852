"""TensorRT-LLM's log as its adapter reads it: one test per line kind, on lines it wrote.

Each fixture line is copied from a public TensorRT-LLM or Triton log (an issue, a PR, a
tutorial) or, where no public copy of that kind of line exists, derived from one by the change
its source makes; the comment above each says which, and which version wrote it. Triton stamps
its glog lines in UTC without a year; the executor's iteration stamps are local time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from infertriage.analyze.logs import read_records
from infertriage.engines import TRTLLM, EventKind, LogEvent, LogFormat

assert TRTLLM.log is not None
LOG: LogFormat = TRTLLM.log
assert LOG.read_events is not None and LOG.recognises is not None and LOG.read_spec is not None
READ = LOG.read_events
READ_SPEC = LOG.read_spec
RECOGNISES = LOG.recognises

# TensorRT-LLM 0.18 executor API, `getLatestIterationStats()` as JSON: the first iteration of
# the list in github.com/NVIDIA/TensorRT-LLM/issues/3376
ITERATION_3376 = (
    '{"cpuMemUsage":3492,"gpuMemUsage":25330607135,"inflightBatchingStats":'
    '{"avgNumDecodedTokensPerIter":0.0,"microBatchId":0,"numContextRequests":1,"numCtxTokens":'
    '16000,"numGenRequests":0,"numPausedRequests":0,"numScheduledRequests":1},"iter":0,'
    '"iterLatencyMS":0.0,"kvCacheStats":{"allocNewBlocks":250,"allocTotalBlocks":250,'
    '"cacheHitRate":0.0,"freeNumBlocks":1745,"maxNumBlocks":7240,"missedBlocks":0,'
    '"reusedBlocks":0,"tokensPerBlock":64,"usedNumBlocks":5495},"maxBatchSizeRuntime":16,'
    '"maxBatchSizeStatic":16,"maxBatchSizeTunerRecommended":0,"maxNumActiveRequests":16,'
    '"maxNumTokensRuntime":17800,"maxNumTokensStatic":17800,"maxNumTokensTunerRecommended":0,'
    '"newActiveRequestsQueueLatencyMS":0.091039,"numActiveRequests":1,"numCompletedRequests":0,'
    '"numNewActiveRequests":1,"numQueuedRequests":7,"pinnedMemUsage":55538100068,'
    '"staticBatchingStats":null,"timestamp":"04-07-2025 20:33:17.747028"}'
)
# TensorRT-LLM 1.0.0rc4 `trtllm-serve` /metrics, TensorRT backend: one record of the list in
# github.com/NVIDIA/TensorRT-LLM/issues/6364, with the comma that follows it there
ITERATION_6364 = (
    '{"cpuMemUsage":68172,"gpuMemUsage":36100332423,"inflightBatchingStats":'
    '{"avgNumDecodedTokensPerIter":1.0,"microBatchId":0,"numContextRequests":0,"numCtxTokens":0,'
    '"numGenRequests":1,"numPausedRequests":0,"numScheduledRequests":1},"iter":60,'
    '"iterLatencyMS":13.021209,"kvCacheStats":{"allocNewBlocks":3,"allocTotalBlocks":3,'
    '"cacheHitRate":0.0,"freeNumBlocks":22952,"maxNumBlocks":22955,"missedBlocks":2,'
    '"reusedBlocks":0,"tokensPerBlock":32,"usedNumBlocks":3},"maxBatchSizeRuntime":256,'
    '"maxBatchSizeStatic":2048,"maxBatchSizeTunerRecommended":256,"maxNumActiveRequests":2048,'
    '"maxNumTokensRuntime":8192,"maxNumTokensStatic":8192,"maxNumTokensTunerRecommended":0,'
    '"newActiveRequestsQueueLatencyMS":0.0,"numActiveRequests":1,"numCompletedRequests":0,'
    '"numNewActiveRequests":0,"numQueuedRequests":0,"pinnedMemUsage":2952841216,'
    '"specDecodingStats":null,"staticBatchingStats":null,"timestamp":"07-25-2025 16:54:34.140189"},'
)
# Triton + TensorRT-LLM backend 0.5, --log-verbose=2, github.com/NVIDIA/TensorRT-LLM/issues/431
TRITON_431 = (
    'I1120 02:29:01.795279 42888 libtensorrtllm.cc:1009] {"Active Request Count":1,'
    '"Iteration Counter":200,"Timestamp":"11-20-2023 02:29:01"}'
)
# Triton + TensorRT-LLM backend 0.6, github.com/triton-inference-server/tensorrtllm_backend/
# issues/217 (the comment wrapped the one line in three; rejoined here)
TRITON_217 = (
    'I1218 03:35:37.688135 20559 libtensorrtllm.cc:1205] {"Active Request Count":1,"Context '
    'Requests":1,"Free KV cache blocks":480,"Generation Requests":0,"Iteration Counter":0,"Max '
    'KV cache blocks":513,"Max Request Count":64,"MicroBatch ID":0,"Runtime CPU Memory Usage":'
    '156,"Runtime GPU Memory Usage":3648012,"Runtime Pinned Memory Usage":16,"Scheduled '
    'Requests":1,"Timestamp":"12-18-2023 03:35:37","Tokens per KV cache block":64,"Total Context '
    'Tokens":2048,"Used KV cache blocks":1}'
)
# the PyTorch backend's print_iter_log, github.com/NVIDIA/TensorRT-LLM/pull/3914 (0.19)
ITER_LOG = (
    "[04/28/2025-09:56:44] [TRT-LLM] [I] iter = 198, global_rank = 0, rank = 0, "
    "currank_total_requests = 0/0, elapsed_time = 0.005060911178588867s, timestamp = 2025-04-28 "
    "09:56:44, num_scheduled_requests: 10, states = {'num_ctx_requests': 0, 'num_ctx_tokens': 0, "
    "'num_generation_tokens': 16}"
)


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time five hours behind UTC in winter (a POSIX rule: no zone database needed)."""
    monkeypatch.setenv("TZ", "EST5EDT,M3.2.0,M11.1.0")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _kinds(line: str) -> list[EventKind]:
    return [e.kind for e in READ(line)]


def _only(line: str, kind: EventKind) -> LogEvent:
    events = READ(line)
    assert [e.kind for e in events] == [kind], events
    return events[0]


def test_the_executors_iteration_stats() -> None:
    stats = LOG.read_stats(ITERATION_3376)
    assert stats is not None and stats.engine == "trtllm_triton"  # the adapter's name
    assert (stats.running, stats.waiting) == (1, 7)
    assert stats.kv_usage == pytest.approx(5495 / 7240)
    step = _only(ITERATION_3376, EventKind.STEP)
    assert step.values == pytest.approx(
        {"step_s": 0.0, "running": 1, "waiting": 7, "kv_usage": 5495 / 7240, "tokens": 16000}
    )
    assert LOG.read_stamp(ITERATION_3376, 1999) == "2025-04-07 20:33:17"  # its own, local


def test_trtllm_serves_metrics_record() -> None:
    stats = LOG.read_stats(ITERATION_6364)
    assert stats is not None and (stats.running, stats.waiting) == (1, 0)
    assert stats.kv_usage == pytest.approx(3 / 22955)
    step = _only(ITERATION_6364, EventKind.STEP)
    assert step.get("step_s") == pytest.approx(0.013021209)
    assert step.get("tokens") == 1  # no context tokens, one generation request
    assert READ_SPEC(ITERATION_6364) is None  # "specDecodingStats":null


def test_paused_requests_are_preemptions() -> None:
    # ITERATION_6364 with two requests paused (trtGptModelInflightBatching.cpp pauses requests
    # when the KV cache runs out under MAX_UTILIZATION); no public log shows a non-zero count
    line = ITERATION_6364.replace('"numPausedRequests":0', '"numPausedRequests":2')
    assert _kinds(line) == [EventKind.STEP, EventKind.PREEMPTED]
    assert READ(line)[1].values == {"count": 2}


def test_speculative_decoding_stats() -> None:
    # ITERATION_6364 as an iteration that drafted: `specDecodingStats` with the fields
    # tensorrt_llm's stats serialiser writes (numDraftTokens, numAcceptedTokens,
    # numRequestsWithDraftTokens, acceptanceLength = (accepted + requests) / requests,
    # iterLatencyMS, draftOverhead); its inner iterLatencyMS is not the iteration's
    spec = (
        '"specDecodingStats":{"acceptanceLength":2.5,"draftOverhead":0.25,"iterLatencyMS":3.25,'
        '"numAcceptedTokens":6,"numDraftTokens":12,"numRequestsWithDraftTokens":4}'
    )
    line = ITERATION_6364.replace('"specDecodingStats":null', spec)
    said = READ_SPEC(line)
    assert said is not None
    assert (said.mean_acceptance_length, said.accepted_tokens, said.drafted_tokens) == (2.5, 6, 12)
    assert said.acceptance_rate == pytest.approx(0.5)
    assert _only(line, EventKind.STEP).get("step_s") == pytest.approx(0.013021209)


def test_tritons_verbose_iteration_line() -> None:
    stats = LOG.read_stats(TRITON_217)
    assert stats is not None
    assert (stats.running, stats.waiting) == (1, None)  # the backend's line has no queue
    assert stats.kv_usage == pytest.approx(1 / 513)
    step = _only(TRITON_217, EventKind.STEP)
    assert step.values == pytest.approx({"running": 1, "kv_usage": 1 / 513, "tokens": 2048})
    stats = LOG.read_stats(TRITON_431)
    assert stats is not None and (stats.running, stats.kv_usage) == (1, None)


def test_tritons_escaped_message() -> None:
    # Triton 24.05+ writes the message in quotes and escapes its own (core src/logging.cc);
    # TRITON_217's message so written
    head, body = TRITON_217.split("] ", 1)
    line = head + '] "' + body.replace('"', '\\"') + '"'
    stats = LOG.read_stats(line)
    assert stats is not None and stats.kv_usage == pytest.approx(1 / 513)


def test_the_pytorch_backends_iteration_log() -> None:
    step = _only(ITER_LOG, EventKind.STEP)
    # num_generation_tokens (16) counts CUDA-graph padding, the PR says: the step's tokens are
    # the context tokens plus one per scheduled generation request, as the executor's are
    assert step.values == pytest.approx(
        {"step_s": 0.005060911178588867, "running": 10, "tokens": 10}
    )
    # before that PR the line said no scheduled requests (pull/3914's first line, verbatim)
    older = ITER_LOG.replace("num_scheduled_requests: 10, ", "")
    assert _only(older, EventKind.STEP).values == pytest.approx({"step_s": 0.005060911178588867})
    assert LOG.read_stats(ITER_LOG) is None
    assert LOG.read_stamp(ITER_LOG, 1999) == "2025-04-28 09:56:44"  # the logger's, local


def test_stamps(new_york: None) -> None:
    # Triton's glog stamp is UTC (core src/logging.cc: gmtime_r) and has no year
    assert LOG.read_stamp(TRITON_431, 2023) == "2023-11-19 21:29:01"
    assert LOG.read_stamp(TRITON_217, 2023) == "2023-12-17 22:35:37"
    # the executor's and the Python logger's are local time already
    assert LOG.read_stamp(ITERATION_3376, 2025) == "2025-04-07 20:33:17"
    assert LOG.read_stamp(ITER_LOG, 2025) == "2025-04-28 09:56:44"
    assert LOG.read_stamp("[TensorRT-LLM][INFO] Number of tokens per block: 32.", 2025) is None


def test_the_engines_limit_lines() -> None:
    cases = {
        # tensorrtllm_backend issues/577 (TensorRT-LLM 0.12, Triton)
        "[TensorRT-LLM][INFO] TRTGptModel maxBatchSize: 8": {"max_num_seqs": 8},
        "[TensorRT-LLM][INFO] TRTGptModel maxSequenceLen: 1048576": {"max_model_len": 1048576},
        "[TensorRT-LLM][INFO] TRTGptModel maxNumTokens: 8192": {"max_num_batched_tokens": 8192},
        # tensorrtllm_backend issues/576
        "[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 17210": {
            "num_gpu_blocks": 17210
        },
        # triton-inference-server/tutorials pull/150 (TensorRT-LLM 0.18+)
        "[TensorRT-LLM][INFO] Max KV cache blocks per sequence: 65 [window size=2051], tokens per "
        "block=32, primary blocks=116617, secondary blocks=0": {
            "block_size": 32,
            "num_gpu_blocks": 116617,
        },
        "[TensorRT-LLM][INFO] Number of tokens per block: 32.": {"block_size": 32},
        "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 78.30 GiB for max tokens in paged KV "
        "cache (3731744).": {"kv_cache_tokens": 3731744},
        # NVIDIA/TensorRT-LLM issues/224 (0.5)
        "[TensorRT-LLM][INFO] Using 10718 tokens in paged KV cache.": {"kv_cache_tokens": 10718},
    }
    for line, values in cases.items():
        assert _only(line, EventKind.CONFIG).values == values
    # tensorrtllm_backend issues/576: recognised, but no CONFIG key says pages per sequence
    line = "[TensorRT-LLM][INFO] Max KV cache pages per sequence: 125"
    assert READ(line) == () and RECOGNISES.search(line)
    # maxNumSequences is maxBatchSize again (tensorrtllm_backend issues/577 logs both)
    assert READ("[TensorRT-LLM][INFO] TRTGptModel maxNumSequences: 8") == ()


def test_other_engines_lines_are_not_trtllms() -> None:
    vllm = (
        "INFO 12-02 16:31:45 [loggers.py:123] Engine 000: Avg prompt throughput: 812.3 tokens/s, "
        "Running: 16 reqs, Waiting: 7 reqs, GPU KV cache usage: 81.5%"
    )
    tgi = (
        "2024-05-07T12:39:22.141566Z  INFO text_generation_router: router/src/main.rs:354: "
        "Setting max batch total tokens to 801568"
    )
    for line in (vllm, tgi):
        assert READ(line) == () and LOG.read_stats(line) is None
        assert not RECOGNISES.search(line) and LOG.read_stamp(line, 2025) is None


def test_a_metrics_list_on_one_line_is_split_into_its_iterations() -> None:
    # /metrics answers a JSON list, one object an iteration: the two records above as one list
    text = "[" + ITERATION_3376 + "," + ITERATION_6364.rstrip(",") + "]\n"
    records = read_records(text, near_unix_s=time.mktime((2025, 6, 1, 0, 0, 0, 0, 0, -1)))
    assert len(records) == 2
    assert [(r.stats.running, r.stats.waiting) for r in records if r.stats] == [(1, 7), (1, 0)]
    assert [r.at for r in records] == [
        time.mktime((2025, 4, 7, 20, 33, 17, 0, 0, -1)),
        time.mktime((2025, 7, 25, 16, 54, 34, 0, 0, -1)),
    ]
    assert all(r.engine == "trtllm_triton" for r in records)


# triton-inference-server/tutorials pull/150 (Triton with TensorRT-LLM 0.18+, the speculative
# decoding guide): the end of the model's loading, the engine's KV cache, then Triton's own lines
EXCERPT = "\n".join(
    [
        "[TensorRT-LLM][WARNING] [kv cache manager] storeContextBlocks: Can not find sequence for "
        "request 2049",
        "[TensorRT-LLM][WARNING] [kv cache manager] storeContextBlocks: Can not find sequence for "
        "request 2050",
        "[TensorRT-LLM][WARNING] [kv cache manager] storeContextBlocks: Can not find sequence for "
        "request 2051",
        "[TensorRT-LLM][WARNING] [kv cache manager] storeContextBlocks: Can not find sequence for "
        "request 2052",
        "[TensorRT-LLM][INFO] Max KV cache blocks per sequence: 65 [window size=2051], tokens per "
        "block=32, primary blocks=116617, secondary blocks=0",
        "[TensorRT-LLM][INFO] Number of tokens per block: 32.",
        "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 78.30 GiB for max tokens in paged KV "
        "cache (3731744).",
        "[TensorRT-LLM][WARNING] Attention workspace size is not enough, increase the size from 0 "
        "bytes to 67462144 bytes",
        "[TensorRT-LLM][WARNING] Attention workspace size is not enough, increase the size from 0 "
        "bytes to 35943424 bytes",
        "I0410 16:58:08.485508 1 model_lifecycle.cc:849] \"successfully loaded 'tensorrt_llm'\"",
        "I0410 16:58:08.485783 1 server.cc:620] ",
        "+------------------+------+",
        "| Repository Agent | Path |",
        "+------------------+------+",
        "+------------------+------+",
        "",
        "I0410 16:58:08.485849 1 server.cc:647] ",
        "",
    ]
)


def test_an_excerpt_read_through_the_records() -> None:
    records = read_records(EXCERPT, near_unix_s=time.mktime((2025, 4, 10, 12, 0, 0, 0, 0, -1)))
    said: dict[str, float] = {}
    for record in records:
        for event in record.events:
            if event.kind is EventKind.CONFIG:
                said.update(event.values)
    assert said == {"block_size": 32, "num_gpu_blocks": 116617, "kv_cache_tokens": 3731744}
    ours = [r for r in records if r.engine == "trtllm_triton"]
    assert len(ours) == 12 and len(records) == 16  # Triton's table is nobody's
    stamped = [r.at for r in records if r.at is not None]
    assert stamped == [time.mktime((2025, 4, 10, 16, 58, 8, 0, 0, -1))] * 3  # TZ=UTC in the suite
