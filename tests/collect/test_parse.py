"""Parsing: real captures parse; garbage, truncated and empty text are one sentence."""

from __future__ import annotations

import pytest

from infertriage.collect import parse_metrics_text
from infertriage.schemas import UserError

FIXTURES = ["vllm", "sglang", "tgi", "llamacpp", "triton", "trtllm_triton", "dcgm"]


def _one_sentence(err: pytest.ExceptionInfo[UserError]) -> str:
    message = str(err.value)
    assert "\n" not in message and message.endswith(".")
    return message


@pytest.mark.parametrize("name", FIXTURES)
def test_every_real_capture_parses(shared_fixture, name: str) -> None:  # type: ignore[no-untyped-def]
    text = shared_fixture(f"metrics/{name}.txt").read_text()
    exposition = parse_metrics_text(text, name)
    assert len(exposition.samples) >= 10
    assert exposition.family_types


def test_counters_are_found_with_and_without_total(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    exposition = parse_metrics_text(shared_fixture("metrics/triton.txt").read_text(), "triton")
    # The parser renames Triton's `nv_inference_request_success` to `..._total`; both find it.
    assert exposition.get("nv_inference_request_success")
    assert exposition.get("nv_inference_request_success") == exposition.get(
        "nv_inference_request_success_total"
    )


def test_a_missing_final_newline_is_a_note(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    exposition = parse_metrics_text(shared_fixture("metrics/dcgm.txt").read_text(), "dcgm.txt")
    assert any("newline" in note for note in exposition.notes)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty"),
        ("   \n\n", "empty"),
        ("# HELP x nothing\n# TYPE x gauge\n", "only comments"),
        ("<html><body><h1>502 Bad Gateway</h1></body></html>", "HTML"),
        ('{"detail": "Not Found"}', "JSON"),
        ("hello world, this is not metrics\n", "not valid Prometheus metrics text"),
        ("\x00\x01\x02 binary", "not valid Prometheus metrics text"),
    ],
)
def test_garbage_and_empty_text_is_one_clear_sentence(text: str, needle: str) -> None:
    with pytest.raises(UserError) as err:
        parse_metrics_text(text, "http://127.0.0.1:8000/metrics")
    message = _one_sentence(err)
    assert needle in message and "http://127.0.0.1:8000/metrics" in message


def test_text_cut_mid_line_is_an_error(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    text = shared_fixture("metrics/vllm.txt").read_text()
    cut = text.index('vllm:time_to_first_token_seconds_bucket{le="0.5"') + 30  # inside the labels
    with pytest.raises(UserError) as err:
        parse_metrics_text(text[:cut], "vllm.txt")
    assert "not valid Prometheus metrics text" in _one_sentence(err)


def test_text_cut_inside_a_histogram_is_truncated(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    text = shared_fixture("metrics/vllm.txt").read_text()
    line = 'vllm:time_to_first_token_seconds_bucket{le="0.5",model_name="facebook/opt-125m"} 1.0\n'
    cut = text.index(line) + len(line)  # on a line boundary: every line parses
    with pytest.raises(UserError) as err:
        parse_metrics_text(text[:cut], "vllm.txt")
    message = _one_sentence(err)
    assert "truncated" in message and "vllm:time_to_first_token_seconds" in message


def test_histogram_without_count_is_truncated() -> None:
    text = (
        "# TYPE h histogram\n"
        'h_bucket{le="1.0"} 1\nh_bucket{le="+Inf"} 2\nh_sum 3.0\n'
        "# TYPE g gauge\ng 1\n"
    )
    with pytest.raises(UserError) as err:
        parse_metrics_text(text, "h.txt")
    assert "no _count" in _one_sentence(err)
