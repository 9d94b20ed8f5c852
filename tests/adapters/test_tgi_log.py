"""TGI's log as its adapter reads it: one test per line kind, on lines from TGI's own logs.

Each fixture line is copied from a public TGI log (an issue, a README, a blog post) or, where
no public copy of that kind of line exists, built from TGI's source as it writes the line; the
comment above each says which, and which TGI version wrote it. TGI stamps its lines in UTC;
the tool reads local time, so the stamp is converted (tested here in a zone west of UTC).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from infertriage.analyze.logs import read_records
from infertriage.engines import TGI, EventKind, LogEvent, LogFormat

assert TGI.log is not None
LOG: LogFormat = TGI.log
assert LOG.read_events is not None and LOG.recognises is not None
READ = LOG.read_events
RECOGNISES = LOG.recognises

# TGI 1.4 (ghcr.io/huggingface/text-generation-inference:1.4), from Niklas Heidloff, "Deploying
# LLMs via Hugging Face on IBM Cloud", heidloff.net/article/deploying-llms-ibm-cloud/ (2024-02-14)
SUCCESS_1_4 = (
    "2024-02-14T06:49:51.437631Z  INFO generate{parameters=GenerateParameters { best_of: None, "
    "temperature: None, repetition_penalty: None, frequency_penalty: None, top_k: None, top_p: "
    "None, typical_p: None, do_sample: false, max_new_tokens: Some(14), return_full_text: None, "
    "stop: [], truncate: None, watermark: false, details: false, decoder_input_details: false, "
    'seed: None, top_n_tokens: None } total_time="611.286748ms" validation_time="754.5µs" '
    'queue_time="127.337µs" inference_time="610.405028ms" time_per_token="43.600359ms" '
    'seed="None"}: text_generation_router::server: router/src/server.rs:299: Success'
)
# TGI 2.4.0, github.com/dheerajoruganty/Huggingface-TGI-EC2 README.md (`docker logs -f
# HuggingfaceTGI`): a total time in seconds
SUCCESS_2_4 = (
    "2024-11-03T14:51:27.393883Z  INFO generate{parameters=GenerateParameters { best_of: None, "
    "temperature: None, repetition_penalty: None, frequency_penalty: None, top_k: None, top_p: "
    "None, typical_p: None, do_sample: false, max_new_tokens: Some(100), return_full_text: None, "
    "stop: [], truncate: None, watermark: false, details: false, decoder_input_details: false, "
    "seed: Some(42), top_n_tokens: None, grammar: None, adapter_id: None } "
    'total_time="4.065504959s" validation_time="440.038965ms" queue_time="94.981µs" '
    'inference_time="3.625371193s" time_per_token="38.982485ms" seed="None"}: '
    "text_generation_router::server: router/src/server.rs:402: Success"
)
# TGI 1.x (router/src/server.rs:289) under docker compose, github.com/huggingface/
# text-generation-inference/issues/1374:
# the container's prefix, and the OpenAI-compatible route's span around the request's
SUCCESS_COMPOSE = (
    "chat_inference-text_generation_inference-1  | 2023-12-22T00:21:24.202169Z  INFO "
    "compat_generate{default_return_full_text=true}:generate{parameters=GenerateParameters { "
    "best_of: None, temperature: None, repetition_penalty: None, top_k: None, top_p: None, "
    "typical_p: None, do_sample: false, max_new_tokens: Some(40), return_full_text: Some(false), "
    "stop: [], truncate: None, watermark: false, details: true, decoder_input_details: false, "
    'seed: None, top_n_tokens: None } total_time="2.458150804s" validation_time="13.678487ms" '
    'queue_time="184.26µs" inference_time="2.444288229s" time_per_token="61.107205ms" '
    'seed="None"}: text_generation_router::server: router/src/server.rs:289: Success'
)


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time five hours behind UTC in winter (a POSIX rule: no zone database needed)."""
    monkeypatch.setenv("TZ", "EST5EDT,M3.2.0,M11.1.0")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _only(line: str, kind: EventKind) -> LogEvent:
    events = READ(line)
    assert [e.kind for e in events] == [kind], events
    return events[0]


def test_a_success_line_gives_the_request_timings() -> None:
    event = _only(SUCCESS_1_4, EventKind.REQUEST)
    assert event.values == pytest.approx(
        {"e2e_s": 0.611286748, "queue_s": 127.337e-6, "tpot_s": 0.043600359}
    )
    assert LOG.read_stamp(SUCCESS_1_4, 1999) == "2024-02-14 06:49:51"  # TZ=UTC in the suite
    assert LOG.read_stats(SUCCESS_1_4) is None  # TGI logs no periodic stats line


def test_durations_in_seconds_and_behind_a_container_prefix() -> None:
    assert _only(SUCCESS_2_4, EventKind.REQUEST).values == pytest.approx(
        {"e2e_s": 4.065504959, "queue_s": 94.981e-6, "tpot_s": 0.038982485}
    )
    assert _only(SUCCESS_COMPOSE, EventKind.REQUEST).get("e2e_s") == pytest.approx(2.458150804)


@pytest.mark.parametrize(
    ("spelled", "seconds"),
    [("1.5s", 1.5), ("800ms", 0.8), ("12.3µs", 12.3e-6), ("12.3us", 12.3e-6), ("70ns", 70e-9)],
)
def test_every_unit_rusts_duration_debug_prints(spelled: str, seconds: float) -> None:
    # SUCCESS_1_4 with its queue time in each unit `impl Debug for Duration` (Rust std) writes
    line = SUCCESS_1_4.replace('queue_time="127.337µs"', f'queue_time="{spelled}"')
    assert _only(line, EventKind.REQUEST).get("queue_s") == pytest.approx(seconds)


def test_the_json_output_form_of_a_request() -> None:
    # --json-output (router/src/logging.rs: `fmt::layer().json().flatten_event(true)`): the
    # event's fields at the top, the current span under "span" and every span under "spans"
    # (tracing-subscriber's Json format). No public copy of one: built from SUCCESS_1_4's
    # figures in that layout
    line = (
        '{"timestamp":"2024-02-14T06:49:51.437631Z","level":"INFO","message":"Success",'
        '"target":"text_generation_router::server","filename":"router/src/server.rs",'
        '"line_number":299,"span":{"inference_time":"610.405028ms","parameters":'
        '"GenerateParameters { best_of: None, max_new_tokens: Some(14) }","queue_time":'
        '"127.337µs","seed":"None","time_per_token":"43.600359ms","total_time":"611.286748ms",'
        '"validation_time":"754.5µs","name":"generate"},"spans":[{"inference_time":'
        '"610.405028ms","queue_time":"127.337µs","time_per_token":"43.600359ms","total_time":'
        '"611.286748ms","validation_time":"754.5µs","name":"generate"}]}'
    )
    assert _only(line, EventKind.REQUEST).values == pytest.approx(
        {"e2e_s": 0.611286748, "queue_s": 127.337e-6, "tpot_s": 0.043600359}
    )
    assert LOG.read_stamp(line, 1999) == "2024-02-14 06:49:51"


def test_the_spans_other_lines_are_not_requests() -> None:
    # at LOG_LEVEL=debug the span logs its output too (router/src/server.rs
    # `tracing::debug!(parent: &span, "Output: {}", output_text)`), with the same fields
    line = SUCCESS_1_4.replace(": Success", ": Output: SELECT COUNT(*) FROM Employee")
    assert READ(line) == ()


def test_utc_stamps_are_read_as_local_time(new_york: None) -> None:
    assert LOG.read_stamp(SUCCESS_1_4, 2024) == "2024-02-14 01:49:51"
    assert LOG.read_stamp(SUCCESS_2_4, 2024) == "2024-11-03 09:51:27"  # EST again since 3 Nov
    assert LOG.read_stamp("2024-02-14T06:49:51+01:00 INFO x", 2024) == "2024-02-14 00:49:51"
    assert LOG.read_stamp("text_generation_launcher: Args {", 2024) is None


def test_the_routers_limit_lines() -> None:
    # TGI 2.x, huggingface/ms-build-mi300 README.md (router/src/main.rs:354) and
    # github.com/Infinite-Limit-Data-Science/chat-app README3-hf-tgi.md (TGI 2.2.0,
    # router/src/server.rs:1651)
    for line, tokens in [
        (
            "2024-05-07T12:39:22.141566Z  INFO text_generation_router: router/src/main.rs:354: "
            "Setting max batch total tokens to 801568",
            801568,
        ),
        (
            "2024-09-03T04:40:19.370247Z  INFO text_generation_router::server: "
            "router/src/server.rs:1651: Setting max batch total tokens to 19056",
            19056,
        ),
    ]:
        assert _only(line, EventKind.CONFIG).values == {"kv_cache_tokens": tokens}
    # TGI 3.x, backends/v3/src/main.rs: `tracing::info!("Maximum total tokens defaulted to
    # {max_total_tokens}")`
    line = (
        "2025-07-04T12:36:09.356606Z  INFO text_generation_router: backends/v3/src/main.rs:171: "
        "Maximum total tokens defaulted to 8000"
    )
    assert _only(line, EventKind.CONFIG).values == {"max_model_len": 8000}


def test_the_json_output_form_of_a_limit_line() -> None:
    # cloud.google.com/kubernetes-engine/docs/tutorials/serve-multiple-gpu (`kubectl logs`)
    line = (
        '{"timestamp":"2024-03-09T05:08:19.961136Z","level":"INFO","message":"Setting max batch '
        'total tokens to 133696","target":"text_generation_router","filename":"router/src/main.rs"'
        ',"line_number":328}'
    )
    assert _only(line, EventKind.CONFIG).values == {"kv_cache_tokens": 133696}
    assert LOG.read_stamp(line, 1999) == "2024-03-09 05:08:19"


def test_the_launchers_defaults_shards_and_cuda_graphs() -> None:
    # huggingface/ms-build-mi300 README.md (TGI sha-5dad0c0-rocm, 2024-05-07) and
    # Infinite-Limit-Data-Science/chat-app README3-hf-tgi.md (TGI 2.2.0, 2024-09-03)
    cases = {
        "2024-05-07T12:39:07.078387Z  INFO text_generation_launcher: Default `max_total_tokens` "
        "to 4096": {"max_model_len": 4096},
        "2024-05-07T12:39:07.078391Z  INFO text_generation_launcher: Default "
        "`max_batch_prefill_tokens` to 4145": {"max_num_batched_tokens": 4145},
        "2024-05-07T12:39:07.078395Z  INFO text_generation_launcher: Sharding model on 2 "
        "processes": {"tensor_parallel": 2},
        "2024-09-03T04:36:57.507106Z  INFO text_generation_launcher: Using default cuda graphs "
        "[1, 2, 4, 8, 16, 32]": {"cuda_graphs": 1},
        "2024-09-03T04:40:18.377577Z  INFO text_generation_launcher: Cuda Graphs are enabled for "
        "sizes [32, 16, 8, 4, 2, 1]": {"cuda_graphs": 1},
    }
    for line, values in cases.items():
        assert _only(line, EventKind.CONFIG).values == values
    # "Default `max_input_tokens` to 4095": the prompt limit has no CONFIG key
    assert (
        READ(
            "2024-05-07T12:39:07.078381Z  INFO text_generation_launcher: Default "
            "`max_input_tokens` to 4095"
        )
        == ()
    )


def test_the_shards_kv_cache_blocks() -> None:
    # server/text_generation_server/models/flash_causal_lm.py: `log_master(logger.info,
    # f"KV-cache blocks: {num_blocks}, size: {BLOCK_SIZE}")` as the launcher relays it (TGI 3.x)
    line = (
        "2025-07-04T12:36:06.251692Z  INFO text_generation_launcher: KV-cache blocks: 52719, "
        "size: 1"
    )
    assert _only(line, EventKind.CONFIG).values == {"num_gpu_blocks": 52719, "block_size": 1}


def test_the_launchers_args_on_one_line() -> None:
    # TGI 1.0, github.com/huggingface/text-generation-inference/issues/832
    line = (
        "2023-08-22T18:35:50.966384Z  INFO text_generation_launcher: Args { model_id: "
        '"meta-llama/Llama-2-13b-chat-hf", revision: None, validation_workers: 2, sharded: None, '
        "num_shard: Some(4), quantize: None, dtype: None, trust_remote_code: false, "
        "max_concurrent_requests: 128, max_best_of: 2, max_stop_sequences: 4, max_input_length: "
        "4096, max_total_tokens: 8192, waiting_served_ratio: 1.2, max_batch_prefill_tokens: 4096, "
        'max_batch_total_tokens: 16000, max_waiting_tokens: 20, hostname: "831e9d857f4c", port: '
        '80, shard_uds_path: "/tmp/text-generation-server", master_addr: "localhost", '
        'master_port: 29500, huggingface_hub_cache: Some("/data"), weights_cache_override: None, '
        "disable_custom_kernels: false, json_output: false, otlp_endpoint: None, "
        "cors_allow_origin: [], watermark_gamma: None, watermark_delta: None, ngrok: false, "
        "ngrok_authtoken: None, ngrok_domain: None, ngrok_username: None, ngrok_password: None, "
        "env: false }"
    )
    assert _only(line, EventKind.CONFIG).values == {
        "max_num_seqs": 128,
        "max_model_len": 8192,
        "max_num_batched_tokens": 4096,
        "kv_cache_tokens": 16000,
        "tensor_parallel": 4,
    }


def test_the_launchers_pretty_printed_args() -> None:
    # TGI 3.x prints Args one field a line, github.com/huggingface/text-generation-inference/
    # issues/3105: a plain number is read; an Option's value sits alone on the next line
    assert _only("max_concurrent_requests: 128,", EventKind.CONFIG).values == {"max_num_seqs": 128}
    assert RECOGNISES.search("max_concurrent_requests: 128,")
    assert READ("max_total_tokens: Some(") == () and READ("64000,") == ()


def test_a_request_over_the_concurrency_limit_is_rejected() -> None:
    # TGI 2.0 era (router/src/infer.rs:130), github.com/vllm-project/vllm/issues/4936: the
    # semaphore of --max-concurrent-requests is full; the client gets 429 "Model is overloaded"
    line = (
        "2024-05-21T06:25:30.209697Z ERROR generate_stream{parameters=GenerateParameters { "
        "best_of: Some(1), temperature: Some(0.01), repetition_penalty: None, frequency_penalty: "
        "None, top_k: None, top_p: Some(0.99), typical_p: None, do_sample: true, max_new_tokens: "
        "Some(393), return_full_text: None, stop: [], truncate: None, watermark: false, details: "
        "false, decoder_input_details: false, seed: None, top_n_tokens: None, grammar: None }}:"
        "async_stream:generate_stream: text_generation_router::infer: router/src/infer.rs:130: "
        "no permits available"
    )
    assert _only(line, EventKind.REJECTED).values == {}


def test_an_invalid_request_is_rejected() -> None:
    # TGI 1.x (router/src/infer.rs:110, validation), github.com/bionic-gpt/bionic-gpt/issues/154
    line = (
        "bionic-tgi-1             | 2023-12-07T13:57:23.464203Z ERROR generate_stream{"
        "parameters=GenerateParameters { best_of: None, temperature: Some(0.7), "
        "repetition_penalty: None, top_k: None, top_p: None, typical_p: None, do_sample: false, "
        "max_new_tokens: Some(1024), return_full_text: Some(false), stop: [], truncate: None, "
        "watermark: false, details: true, decoder_input_details: false, seed: None, "
        "top_n_tokens: None }}:async_stream:generate_stream: text_generation_router::infer: "
        "router/src/infer.rs:110: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: "
        "1235 `inputs` tokens and 1024 `max_new_tokens`"
    )
    _only(line, EventKind.REJECTED)
    # a failure of a request already admitted is not a refusal (router/src/infer.rs before 2.0
    # logged `InferError::GenerationError` under the same target)
    failed = line.replace(
        line[line.index("`inputs`") :], "Request failed during generation: Server error: boom"
    )
    assert READ(failed) == ()


def test_the_out_of_memory_lines_are_tgis() -> None:
    # TGI 1.0, github.com/huggingface/text-generation-inference/issues/755 (warmup) and /1374
    # (a batch's prefill, cut after its first sentence): the words are counted as OOM
    # elsewhere (analyze.logs.OOM); here the lines are TGI's
    warmup = (
        "RuntimeError: Not enough memory to handle 1024 prefill tokens. You need to decrease "
        "`--max-batch-prefill-tokens`"
    )
    batch = (
        "2023-12-22T00:21:35.318928Z ERROR batch{batch_size=1}:prefill:prefill{id=1 size=1}:"
        "prefill{id=1 size=1}: text_generation_client: router/client/src/lib.rs:33: Server "
        "error: CUDA out of memory. Tried to allocate 222.00 MiB."
    )
    assert RECOGNISES.search(warmup) and RECOGNISES.search(batch)
    assert READ(warmup) == () and READ(batch) == ()
    # torch's words alone name no engine: every engine's OOM says them
    assert not RECOGNISES.search("torch.cuda.OutOfMemoryError: CUDA out of memory.")


def test_other_engines_lines_are_not_tgis() -> None:
    vllm = (
        "INFO 12-02 16:31:45 [loggers.py:123] Engine 000: Avg prompt throughput: 812.3 tokens/s, "
        "Running: 16 reqs, Waiting: 7 reqs, GPU KV cache usage: 81.5%"
    )
    sglang = "[2025-06-01 10:00:02 TP0] Decode batch. #running-req: 12, #queue-req: 3"
    for line in (vllm, sglang):
        assert READ(line) == () and not RECOGNISES.search(line)
        assert LOG.read_stamp(line, 2025) is None


# TGI 1.4, the whole excerpt of Heidloff's post above (its first line elided by the author)
EXCERPT_1_4 = "\n".join(
    [
        "2024-02-14T06:49:24.783197Z  INFO text_generation_launcher: Args { model_id: "
        '"/data/models--mistralai--Mistral-7B-v0.1/snapshots/'
        '26bca36bde8333b5d7f72e9ed20ccda6a618af24", ...',
        "2024-02-14T06:49:24.783316Z  INFO download: text_generation_launcher: Starting download "
        "process.",
        "2024-02-14T06:49:27.099268Z  INFO text_generation_launcher: Files are already present on "
        "the host. Skipping download.",
        "",
        "2024-02-14T06:49:27.587880Z  INFO download: text_generation_launcher: Successfully "
        "downloaded weights.",
        "2024-02-14T06:49:27.588182Z  INFO shard-manager: text_generation_launcher: Starting shard "
        "rank=0",
        "2024-02-14T06:49:38.479212Z  INFO text_generation_launcher: Server started at "
        "unix:///tmp/text-generation-server-0",
        "2024-02-14T06:49:38.600975Z  INFO text_generation_launcher: Starting Webserver",
        "2024-02-14T06:49:38.688621Z  INFO text_generation_router: router/src/main.rs:288: Warming "
        "up model",
        "2024-02-14T06:49:40.621798Z  INFO text_generation_router: router/src/main.rs:326: "
        "Connected",
        "",
        SUCCESS_1_4,
        "",
    ]
)


def test_an_excerpt_read_through_the_records() -> None:
    records = read_records(EXCERPT_1_4, near_unix_s=time.mktime((2024, 2, 14, 12, 0, 0, 0, 0, -1)))
    assert len(records) == 10
    assert all(r.engine == "tgi" for r in records)
    assert all(r.at is not None for r in records)
    requests = [e for r in records for e in r.events if e.kind is EventKind.REQUEST]
    assert [e.get("e2e_s") for e in requests] == [pytest.approx(0.611286748)]
    last = records[-1]
    assert last.at == time.mktime((2024, 2, 14, 6, 49, 51, 0, 0, -1))  # TZ=UTC in the suite


# TGI sha-5dad0c0-rocm, huggingface/ms-build-mi300 README.md: a progress bar without its newline
# glued to the launcher's first line, then the limits it settles on (lines 1–5 and the last 4)
EXCERPT_ROCM = "\n".join(
    [
        "config.json [00:00:00] [" + "█" * 104 + "] 654 B/654 B 2.90 KiB/s (0s)"
        "2024-05-07T12:39:07.078362Z  INFO text_generation_launcher: Model supports up to 8192 but "
        "tgi will now set its default to 4096 instead. This is to save VRAM by refusing large "
        "prompts in order to allow more users on the same hardware. You can increase that size "
        "using `--max-batch-prefill-tokens=8242 --max-total-tokens=8192 --max-input-tokens=8191`.",
        "2024-05-07T12:39:07.078381Z  INFO text_generation_launcher: Default `max_input_tokens` to "
        "4095",
        "2024-05-07T12:39:07.078387Z  INFO text_generation_launcher: Default `max_total_tokens` to "
        "4096",
        "2024-05-07T12:39:07.078391Z  INFO text_generation_launcher: Default "
        "`max_batch_prefill_tokens` to 4145",
        "2024-05-07T12:39:07.078395Z  INFO text_generation_launcher: Sharding model on 2 processes",
        "2024-05-07T12:39:21.278450Z  INFO text_generation_router: router/src/main.rs:317: Warming "
        "up model",
        "2024-05-07T12:39:22.141566Z  INFO text_generation_router: router/src/main.rs:354: Setting "
        "max batch total tokens to 801568",
        "2024-05-07T12:39:22.141574Z  INFO text_generation_router: router/src/main.rs:355: "
        "Connected",
        "2024-05-07T12:39:22.141577Z  WARN text_generation_router: router/src/main.rs:369: Invalid "
        "hostname, defaulting to 0.0.0.0",
        "",
    ]
)


def test_a_startup_excerpt_gives_the_servers_limits() -> None:
    records = read_records(EXCERPT_ROCM, near_unix_s=time.mktime((2024, 5, 7, 0, 0, 0, 0, 0, -1)))
    assert records[0].text.startswith("config.json") and records[0].engine is None
    assert records[1].text.startswith("2024-05-07T12:39:07.078362Z")  # split where it begins
    said: dict[str, float] = {}
    for record in records:
        for event in record.events:
            if event.kind is EventKind.CONFIG:
                said.update(event.values)
    assert said == {
        "max_model_len": 4096,
        "max_num_batched_tokens": 4145,
        "tensor_parallel": 2,
        "kv_cache_tokens": 801568,
    }
