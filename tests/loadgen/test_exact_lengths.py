"""Exact output lengths: `ignore_eos` and `min_tokens` sent, honoured, and the warning when not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec
from infertriage.schemas import RequestRecord
from infertriage_testing.testserver import PRESETS, PathServer, ServerConfig, serve_in_thread

Fetch = Callable[..., RequestRecord]


def test_exact_lengths_are_asked_for_unless_disabled(
    server: tuple[str, PathServer], fetch_one: Fetch
) -> None:
    url, srv = server
    fetch_one(url, max_tokens=12)
    assert srv.asked["req-1"] == {"max_tokens": 12, "min_tokens": 12, "ignore_eos": True}
    fetch_one(url, max_tokens=12, send_ignore_eos=False)
    assert srv.asked["req-1"] == {"max_tokens": 12}


@pytest.mark.parametrize(
    ("behavior", "send", "got", "warning"),
    [
        ("eos", True, 10, None),  # honoured: every request gives its max_tokens
        ("eos", False, 3, "--no-ignore-eos"),  # not asked: the model's EOS ends them
        ("eos_unsupported", True, 3, "did not honour `ignore_eos` / `min_tokens`"),
    ],
)
def test_short_outputs_are_found_and_explained(
    tmp_path: Path, behavior: str, send: bool, got: int, warning: str | None
) -> None:
    config = ServerConfig(behavior=PRESETS[behavior])
    with serve_in_thread(config) as (url, _):
        result = run_bench(
            BenchSpec(
                url=url,
                concurrencies=[2],
                num_requests=4,
                out=tmp_path / "run",
                workload="synthetic:input=8,output=10",
                ignore_eos=send,
            )
        )
    summary = result.levels[0].summary
    assert summary.num_ok == 4 and summary.total_output_tokens == 4 * got
    assert summary.num_short_outputs == (0 if got == 10 else 4)
    assert summary.output_ratio == pytest.approx(got / 10)
    found = [w for w in result.warnings if "fewer output tokens than asked" in w]
    if warning is None:
        assert found == []
    else:
        assert len(found) == 1 and warning in found[0] and "4 of 4 requests" in found[0]
