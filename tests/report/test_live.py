"""The live view (issue 20 part 4): one phase's figures, the observer's phase names, and the
rich display driven on a forced terminal."""

from __future__ import annotations

import io
import re
import threading
import time

import pytest
from rich.console import Console

from infertriage.loadgen.results import RunObserver, in_phase, within
from infertriage.report.live import LivePhase, LiveView, figures_line
from infertriage.schemas import RequestRecord
from infertriage.schemas.records import Chunk, ErrorKind


def _ok(ttft_s: float, itl_s: float = 0.01, tokens: int = 5, sent_ts: float = 0.0) -> RequestRecord:
    first = sent_ts + ttft_s
    chunks = tuple(Chunk(first + i * itl_s, 1) for i in range(tokens))
    return RequestRecord(
        id="r", scheduled_ts=sent_ts, sent_ts=sent_ts, first_token_ts=first,
        last_token_ts=chunks[-1].ts, end_ts=chunks[-1].ts, chunks=chunks, output_tokens=tokens,
        http_status=200,
    )  # fmt: skip


def _failed(kind: ErrorKind = ErrorKind.HTTP, fault: str = "") -> RequestRecord:
    return RequestRecord(
        id="f", scheduled_ts=0.0, sent_ts=0.0, end_ts=0.1, http_status=500, error_kind=kind,
        fault=fault,
    )  # fmt: skip


# --- one phase's figures (pure) --------------------------------------------------------------


def test_counts_and_latencies_of_one_phase() -> None:
    phase = LivePhase("measure", started_s=10.0, duration_s=20.0)
    phase.add([_ok(ttft, itl_s=0.02) for ttft in (0.1, 0.2, 0.3, 0.4)])
    phase.add([_failed(), _failed(fault="run_deadline")])  # cut by the drain: not a failure
    f = phase.figures(now_s=15.0)
    assert (f.name, f.num_done, f.num_failed, f.num_cut) == ("measure", 5, 1, 1)
    assert f.ttft_p50_s == pytest.approx(0.25)
    assert f.ttft_p95_s == pytest.approx(0.385)  # numpy's linear percentile of 0.1…0.4
    assert f.itl_p50_s == pytest.approx(0.02)
    assert (f.elapsed_s, f.remaining_s) == (5.0, 15.0)
    assert phase.figures(now_s=40.0).remaining_s == 0.0  # past its plan: finishing in flight


def test_remaining_time_from_a_count_at_the_pace_so_far_and_none_without_a_plan() -> None:
    counted = LivePhase("performance", started_s=0.0, num_requests=10)
    assert counted.figures(now_s=1.0).remaining_s is None  # no pace yet
    counted.add([_ok(0.05)] * 4)
    assert counted.figures(now_s=2.0).remaining_s == pytest.approx(3.0)  # 6 left at 2 req/s
    bare = LivePhase("analysis", started_s=0.0)
    figures = bare.figures(now_s=3.0)
    assert figures.remaining_s is None and figures.ttft_p50_s is None and figures.num_done == 0


def test_latencies_roll_over_the_latest_requests() -> None:
    phase = LivePhase("soak", started_s=0.0, duration_s=60.0)
    phase.add([_ok(1.0, itl_s=0.5)] * 300)
    for _ in range(30):  # more than the windows, redraw by redraw: the slow start is forgotten
        phase.add([_ok(0.01, itl_s=0.005, tokens=20)] * 10)
    f = phase.figures(now_s=30.0)
    assert f.num_done == 600
    assert f.ttft_p95_s == pytest.approx(0.01) and f.itl_p50_s == pytest.approx(0.005)
    burst = LivePhase("overload", started_s=0.0)
    burst.add([_ok(0.01, itl_s=0.5)] * 100 + [_ok(0.01, itl_s=0.02)] * 16)
    # all counted; the ITL sampled from the newest of the redraw only
    assert burst.figures(now_s=1.0).num_done == 116
    assert burst.figures(now_s=1.0).itl_p50_s == pytest.approx(0.02)


def test_the_line_shows_ms_and_the_time_left() -> None:
    phase = LivePhase("warm-up · concurrency=4", started_s=0.0, duration_s=10.0)
    phase.add([_ok(0.0042, itl_s=0.012), _failed()])
    line = figures_line(phase.figures(now_s=4.0)).plain
    assert line.startswith("warm-up · concurrency=4  2 done, 1 failed")
    phase.add([_failed(fault="cancelled")])  # Ctrl-C
    line = figures_line(phase.figures(now_s=4.0)).plain
    assert line.startswith("warm-up · concurrency=4  2 done, 1 failed, 1 cut")
    assert "TTFT p50 4.2 p95 4.2 ms" in line and "ITL p50 12 ms" in line and "6 s left" in line
    assert "finishing the requests in flight" in figures_line(phase.figures(now_s=11.0)).plain
    assert figures_line(phase.figures(now_s=11.0), done=True).plain.endswith("in 11.0 s")


# --- phase names -------------------------------------------------------------------------------


class _Told:
    """A `RunObserver` that writes down what it is told."""

    def __init__(self) -> None:
        self.said: list[tuple[str, str, float | None, int | None]] = []

    def phase_started(
        self, name: str, *, duration_s: float | None = None, num_requests: int | None = None
    ) -> None:
        self.said.append(("start", name, duration_s, num_requests))

    def request_finished(self, record: RequestRecord) -> None:
        self.said.append(("request", record.id, None, None))

    def phase_ended(self, name: str, *, interrupted: bool = False) -> None:
        self.said.append(("end" if not interrupted else "cut", name, None, None))


def test_within_names_each_level_inside_the_commands_phase() -> None:
    told = _Told()
    observer: RunObserver | None = within(told, "warm-up")
    assert observer is not None and within(None, "warm-up") is None
    observer.phase_started("concurrency=1", duration_s=2.0, num_requests=7)
    observer.request_finished(_ok(0.1))
    observer.phase_ended("concurrency=1")
    observer.phase_ended("concurrency=4", interrupted=True)
    assert told.said == [
        ("start", "warm-up · concurrency=1", 2.0, 7),
        ("request", "r", None, None),
        ("end", "warm-up · concurrency=1", None, None),
        ("cut", "warm-up · concurrency=4", None, None),
    ]


def test_a_phase_of_no_requests_ends_only_when_its_work_did() -> None:
    told = _Told()
    with in_phase(told, "drain", duration_s=2.0):
        assert told.said == [("start", "drain", 2.0, None)]
    assert told.said[-1] == ("end", "drain", None, None)
    with pytest.raises(RuntimeError), in_phase(told, "analysis"):
        raise RuntimeError("boom")
    assert told.said[-1] == ("start", "analysis", None, None)  # the view marks it stopped
    with in_phase(None, "drain"):
        pass  # no observer: nothing to tell


# --- the display -----------------------------------------------------------------------------

_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _drawn(out: io.StringIO, needle: str, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while needle not in _CONTROL.sub("", out.getvalue()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _stopped(out: io.StringIO) -> bool:
    """The cursor shown again and the live line erased: the terminal is as it was."""
    tail = out.getvalue()[-30:]
    return "\x1b[?25h" in tail and tail.endswith("\x1b[2K")


def _terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=150, color_system=None), out


def test_the_display_draws_each_phase_and_leaves_one_line_per_finished_phase() -> None:
    console, out = _terminal()
    with LiveView(console, refresh_per_second=20) as view:
        view.phase_started("warm-up · concurrency=1", duration_s=5.0, num_requests=3)
        for ttft in (0.05, 0.06, 0.07):
            view.request_finished(_ok(ttft))
        view.request_finished(_failed())
        view.phase_ended("warm-up · concurrency=1")
        view.phase_started("measure · concurrency=16", duration_s=5.0)
        view.request_finished(_ok(0.2))
        assert _drawn(out, "measure · concurrency=16  1 done, 0 failed")  # by the redraws
        view.phase_ended("measure · concurrency=16")
        view.phase_started("overload · rate=6", duration_s=5.0)
        view.phase_ended("overload · rate=6", interrupted=True)  # Ctrl-C: the level cut short
    text = _CONTROL.sub("", out.getvalue())
    assert "✓ warm-up · concurrency=1  4 done, 1 failed  TTFT p50 60 p95 69 ms" in text
    assert "✓ measure · concurrency=16  1 done, 0 failed" in text
    assert re.search(r"✗ overload · rate=6  in 0\.\d s  \(stopped\)", text)
    assert _stopped(out)


def test_an_error_inside_marks_the_open_phase_and_stops_the_display() -> None:
    console, out = _terminal()
    with pytest.raises(KeyboardInterrupt), LiveView(console) as view:
        view.phase_started("overload · rate=6", duration_s=10.0)
        view.request_finished(_ok(0.1))
        raise KeyboardInterrupt
    text = _CONTROL.sub("", out.getvalue())
    assert "✗ overload · rate=6  1 done, 0 failed" in text and "(stopped)" in text
    assert _stopped(out)
    deadline = time.monotonic() + 10.0  # rich's refresh thread ends at its next tick
    while any(type(t).__name__ == "_RefreshThread" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the display's refresh thread is still running"
        time.sleep(0.05)


def test_a_command_refused_before_any_phase_draws_nothing() -> None:
    console, out = _terminal()
    with pytest.raises(ValueError), LiveView(console):
        raise ValueError("refused")
    assert out.getvalue() == ""
