"""How requests ended: the server's own words for a rejection, the fix, and the 2 % stop."""

from __future__ import annotations

import pytest

from infertriage.analyze.stats.outcomes import (
    MAX_REJECTED_SHARE,
    check_rejections,
    is_counted,
    is_incomplete,
    rejections_of,
    server_message,
)
from infertriage.schemas import ErrorKind, RequestRecord, UserError, http_error_kind


def _answer(status: int, body: str, rid: str = "r") -> RequestRecord:
    return RequestRecord(
        id=rid, scheduled_ts=0.0, sent_ts=0.0, end_ts=0.01, http_status=status,
        error_kind=http_error_kind(status), fault=f"http_{status // 100}xx",
        error_text=f"HTTP {status}: {body}"[:300],
    )  # fmt: skip


def _ok(rid: str) -> RequestRecord:
    return RequestRecord(id=rid, scheduled_ts=0.0, sent_ts=0.0, first_token_ts=0.1, end_ts=0.2)


VLLM_CONTEXT = (
    '{"object":"error","message":"This model\'s maximum context length is 2048 tokens. However, '
    "you requested 2310 tokens (2054 in the messages, 256 in the completion). Please reduce the "
    'length of the messages or completion.","type":"BadRequestError","param":null,"code":400}'
)


def test_statuses_are_classed_429_admission_408_and_5xx_the_servers() -> None:
    assert http_error_kind(400) is ErrorKind.REJECTED
    assert http_error_kind(401) is ErrorKind.REJECTED
    assert http_error_kind(404) is ErrorKind.REJECTED
    assert http_error_kind(422) is ErrorKind.REJECTED
    assert http_error_kind(429) is ErrorKind.ADMISSION
    assert http_error_kind(408) is ErrorKind.HTTP
    assert http_error_kind(500) is ErrorKind.HTTP
    assert http_error_kind(503) is ErrorKind.HTTP


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (400, VLLM_CONTEXT, "This model's maximum context length is 2048 tokens. However, you"),
        # OpenAI's (and the twin's, and llama.cpp's) wrapping
        (400, '{"error":{"code":400,"message":"the request exceeds the available context size",'
              '"type":"exceed_context_size_error"}}', "the request exceeds the available context"),
        # TGI: a string under "error"
        (422, '{"error":"Input validation error: `inputs` tokens + `max_new_tokens` must be '
              '<= 2048.","error_type":"validation"}', "Input validation error: `inputs` tokens"),
        # FastAPI's own 422
        (422, '{"detail":[{"loc":["body","max_tokens"],"msg":"Input should be a valid integer"}]}',
         "Input should be a valid integer"),
        (404, "Not Found", "Not Found"),
    ],
)  # fmt: skip
def test_the_servers_message_is_taken_out_of_its_json(status: int, body: str, message: str) -> None:
    assert server_message(_answer(status, body)).startswith(message)


def test_a_message_cut_at_the_records_length_limit_is_still_read() -> None:
    long_type = VLLM_CONTEXT.replace("BadRequestError", "BadRequestError" * 8)
    record = _answer(400, long_type)
    assert len(record.error_text) == 300 and not record.error_text.endswith("}")  # cut JSON
    read = server_message(record)
    assert read.endswith("Please reduce the length of the messages or completion.")


@pytest.mark.parametrize(
    ("status", "body", "fix"),
    [
        (400, VLLM_CONTEXT, "--max-model-len / a shorter --workload"),
        (400, '{"message":"min_tokens must be less than or equal to max_tokens=12, got 200."}',
         "a --workload with shorter outputs (bench: --no-ignore-eos)"),
        (404, '{"message":"The model `llama` does not exist."}', "--model"),
        (404, "Not Found", "--url / --endpoint"),
        (401, '{"error":{"message":"bad key"}}', "--api-key"),
        (403, "forbidden", "--api-key"),
        (422, '{"message":"temperature must be non-negative"}', "--workload / --endpoint"),
    ],
)  # fmt: skip
def test_each_rejection_names_the_flag_that_fixes_it(status: int, body: str, fix: str) -> None:
    assert rejections_of([_answer(status, body)]).fix.startswith(fix)


def test_rejections_group_by_message_with_numbers_aside_most_common_first() -> None:
    long = [_answer(400, VLLM_CONTEXT.replace("2310", str(2310 + i)), f"l{i}") for i in range(3)]
    unknown = [_answer(404, '{"message":"The model `x` does not exist."}', "u")]
    refused = [_answer(429, '{"message":"rate limited"}', "q")]
    rejections = rejections_of([*long, *unknown, *refused, _ok("a"), _ok("b")])
    assert rejections.num_rejected == 4 and rejections.num_requests == 7
    (first, count), (second, one) = rejections.causes
    assert count == 3 and one == 1
    assert first.startswith("HTTP 400 'This model's maximum context length is 2048 tokens.")
    assert first.endswith("…'") and second == "HTTP 404 'The model `x` does not exist.'"
    assert rejections.fix == "--max-model-len / a shorter --workload"


def test_a_request_cut_by_the_runs_end_is_never_counted_whatever_its_kind() -> None:
    for kind, fault in ((ErrorKind.TIMEOUT, "run_deadline"), (ErrorKind.CLIENT, "cancelled")):
        cut = RequestRecord(id="c", scheduled_ts=0, sent_ts=0, error_kind=kind, fault=fault)
        assert is_incomplete(cut) and not is_counted(cut)
    assert rejections_of([_answer(400, "x"), _ok("a")]).num_requests == 2


def test_more_than_2_percent_rejected_stops_with_the_cause_and_the_fix() -> None:
    ok = [_ok(f"o{i}") for i in range(97)]
    rejected = [_answer(400, VLLM_CONTEXT, f"r{i}") for i in range(3)]
    with pytest.raises(UserError) as caught:
        check_rejections("concurrency=16", rejections_of([*ok, *rejected]))
    sentence = str(caught.value)
    assert sentence.startswith("3 of 100 requests of level concurrency=16 (3.0 %, over 2.0 %)")
    assert "HTTP 400 'This model's maximum context length is 2048 tokens" in sentence
    assert sentence.endswith("fix it with --max-model-len / a shorter --workload.")
    assert sentence.count(". ") == 1  # one sentence ("2048 tokens. However" is the server's)


def test_up_to_2_percent_rejected_is_one_line_and_no_stop() -> None:
    ok = [_ok(f"o{i}") for i in range(98)]
    rejected = [_answer(400, VLLM_CONTEXT, f"r{i}") for i in range(2)]
    line = check_rejections("c", rejections_of([*ok, *rejected]))
    assert MAX_REJECTED_SHARE == 0.02
    assert line.startswith("2 requests (2.0 %) rejected by the server as invalid: HTTP 400 '")
    assert line.endswith("' — fix: --max-model-len / a shorter --workload")
    assert check_rejections("c", rejections_of(ok)) == ""


def test_every_request_refused_for_its_key_is_told_apart() -> None:
    keyless = [_answer(401, '{"error":{"message":"bad key"}}', f"k{i}") for i in range(3)]
    assert rejections_of(keyless).all_unauthorized
    assert rejections_of(keyless).status == 401
    assert not rejections_of([*keyless, _ok("a")]).all_unauthorized  # one got through
    assert not rejections_of([_answer(400, VLLM_CONTEXT)]).all_unauthorized
    assert not rejections_of([]).all_unauthorized
