"""Parsing: real captures parse; garbage and empty text are one sentence; a paste cut at its
end, indented or with Windows line ends is read for what it holds, with notes."""

from __future__ import annotations

import pytest

from infertriage.collect import parse_metrics_text, read_metrics_file
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


def test_a_paste_cut_mid_line_keeps_what_came_before(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    """The real vLLM capture cut inside a TTFT bucket's labels, as a copy cut short leaves it:
    the cut line and the histogram it ends in are left out with notes, the rest is read."""
    text = shared_fixture("metrics/vllm.txt").read_text()
    cut = text.index('vllm:time_to_first_token_seconds_bucket{le="0.5"') + 30  # inside the labels
    exposition = parse_metrics_text(text[:cut], "vllm.txt")
    assert exposition.get("vllm:num_requests_running")  # the families before the cut
    assert not exposition.has("vllm:time_to_first_token_seconds_bucket")
    first, second = exposition.notes
    assert "cut at its end" in first and "vllm:time_to_first_token_secon" in first
    assert "vllm:time_to_first_token_seconds" in second and "left out" in second


def test_a_paste_cut_inside_the_last_histogram_leaves_it_out(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    text = shared_fixture("metrics/vllm.txt").read_text()
    line = 'vllm:time_to_first_token_seconds_bucket{le="0.5",model_name="facebook/opt-125m"} 1.0\n'
    cut = text.index(line) + len(line)  # on a line boundary: every line parses
    exposition = parse_metrics_text(text[:cut], "vllm.txt")
    assert not exposition.has("vllm:time_to_first_token_seconds_bucket")
    assert "vllm:time_to_first_token_seconds" not in exposition.family_types
    (note,) = exposition.notes
    assert "ends inside histogram vllm:time_to_first_token_seconds" in note


# vLLM V1 with --data-parallel-size 2 (labels as vllm/v1/metrics/loggers.py sets them:
# model_name, engine), values made up; cut in the last histogram, inside engine 1's buckets
_DP_CUT = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 4.0
vllm:num_requests_running{engine="1",model_name="m"} 3.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="m"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 5.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 5.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 9.5
vllm:e2e_request_latency_seconds_bucket{engine="1",le="1.0",model_name="m"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="1",le="+In"""


def test_a_rank_cut_inside_the_last_histogram_is_left_out_and_the_others_kept() -> None:
    exposition = parse_metrics_text(_DP_CUT, "dp.txt")
    kept = exposition.get("vllm:e2e_request_latency_seconds_bucket")
    assert {s.label("engine") for s in kept} == {"0"}
    assert len(exposition.get("vllm:num_requests_running")) == 2
    assert any("1 of its series were cut" in note for note in exposition.notes)


@pytest.mark.parametrize(
    "tail",
    [
        "vllm:num_requests_wai",  # the brief's own example: the name cut
        'vllm:num_requests_waiting{engine="0",model_na',  # inside the labels
        'vllm:num_requests_waiting{engine="0",model_name="x"} ',  # before the value
        "# TYPE vllm:num_requests_waiting gau",  # a comment line cut
    ],
)
def test_a_cut_last_line_is_left_out_with_a_note(tail: str) -> None:
    text = '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0"} 1\n'
    exposition = parse_metrics_text(text + tail, "paste")
    assert [s.value for s in exposition.get("vllm:num_requests_running")] == [1.0]
    (note,) = exposition.notes
    assert "paste was cut at its end" in note and tail.strip()[:20] in note


def test_text_with_nothing_readable_before_its_cut_is_refused() -> None:
    with pytest.raises(UserError) as err:
        parse_metrics_text('vllm:num_requests_waiting{engine="0",model_na', "paste")
    assert "not valid Prometheus metrics text" in _one_sentence(err)
    with pytest.raises(UserError) as err:  # a bad line in the middle is not a cut end
        parse_metrics_text("# TYPE a gauge\na 1\nnot metrics at all\nb 2\n", "paste")
    assert "not valid Prometheus metrics text" in _one_sentence(err)


@pytest.mark.parametrize(
    "paste",
    [
        lambda text: "\ufeff" + text,  # saved by a Windows editor: a byte-order mark
        lambda text: text.replace("\n", "\r\n"),  # Windows line ends
        lambda text: "".join("    " + line for line in text.splitlines(keepends=True)),
        lambda text: "".join("\t" + line for line in text.replace("\n", "\r\n").splitlines(True)),
    ],
    ids=["bom", "crlf", "indented", "tab-indented-crlf"],
)
def test_pasted_formatting_reads_as_the_capture(shared_fixture, paste) -> None:  # type: ignore[no-untyped-def]
    text = shared_fixture("metrics/vllm.txt").read_text()
    exposition = parse_metrics_text(paste(text), "pasted")
    assert exposition.samples == parse_metrics_text(text, "capture").samples
    assert exposition.notes == ()


def test_histogram_without_count_is_truncated() -> None:
    text = (
        "# TYPE h histogram\n"
        'h_bucket{le="1.0"} 1\nh_bucket{le="+Inf"} 2\nh_sum 3.0\n'
        "# TYPE g gauge\ng 1\n"
    )
    with pytest.raises(UserError) as err:
        parse_metrics_text(text, "h.txt")
    assert "no _count" in _one_sentence(err)


def test_a_dump_saved_as_utf16_by_windows_is_read(shared_fixture, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """PowerShell's `curl … > metrics.txt` writes UTF-16 with a byte-order mark."""
    text = shared_fixture("metrics/vllm.txt").read_text()
    path = tmp_path / "metrics.txt"
    path.write_bytes(text.replace("\n", "\r\n").encode("utf-16"))
    exposition = parse_metrics_text(read_metrics_file(path), str(path))
    assert exposition.samples == parse_metrics_text(text, "capture").samples
