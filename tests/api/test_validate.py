"""`validate` end to end against real servers on 127.0.0.1: twins and a faulty server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infertriage.api.specs import ValidateSpec
from infertriage.api.validate import validate
from infertriage.cli.app import main
from infertriage.schemas import SAMPLE_VALIDITY, CheckStatus, RequestRecord, RunDir, UserError

from ..workloads import SHORT_OUTPUTS


def _statuses(result) -> dict[str, CheckStatus]:  # type: ignore[no-untyped-def]
    return {c.name: c.status for c in result.checks}


def test_healthy_twin_passes_all_but_its_short_sample_and_keeps_every_phase(
    tmp_path: Path,
) -> None:
    result = validate(
        ValidateSpec(scenario="healthy", rate=4, duration_s=5, soak_s=6, out=tmp_path / "run")
    )
    statuses = _statuses(result)
    failed = {c.name: c.detail for c in result.checks if c.failed}
    # 5 s at 4/s: too short and too small a sample for a p95 claim, so never ready
    assert list(failed) == [SAMPLE_VALIDITY], failed
    assert "INVALID" in failed[SAMPLE_VALIDITY] and "need ≥ 90 requests" in failed[SAMPLE_VALIDITY]
    assert not result.ready
    functional = [name for name in statuses if name.startswith("functional.")]
    assert len(functional) == 19  # 18 probes, and whether the request id survives
    assert statuses["functional.request_id"] is CheckStatus.PASS  # the twin names it as vLLM
    assert statuses["performance.ttft_p95"] in (CheckStatus.PASS, CheckStatus.MARGINAL)
    # 20-odd requests cannot prove a 0.1 % error rate: a marginal pass, and it says so.
    assert statuses["performance.error_rate"] is CheckStatus.MARGINAL
    assert statuses["stability.leak.kv"] is CheckStatus.PASS
    assert statuses["stability.leak.proc"] is CheckStatus.PASS  # the twin's pid is known
    assert statuses["stability.drain"] is CheckStatus.PASS
    run = RunDir.open(tmp_path / "run")
    assert run.read_info().command == "validate"
    phases = {r.labels["phase"] for r in run.iter_records(run.requests, RequestRecord)}
    assert phases == {"performance", "soak"}
    document = json.loads((run.root / "validate.json").read_text())
    assert document["schema"] == "infertriage.validate/v1" and document["ready"] is False


def test_an_error_rate_fault_fails_with_the_error_rate(tmp_path: Path) -> None:
    scenario = tmp_path / "errors.yaml"
    scenario.write_text("description: one request in five fails\nfaults: {error_rate: 0.2}\n")
    out = tmp_path / "run"
    code = main(
        ["validate", "--scenario", str(scenario), "--rate", "6", "--duration", "4s",
         "--workload", SHORT_OUTPUTS, "--skip-functional", "--out", str(out), "--json"]
    )  # fmt: skip
    assert code == 1
    document = json.loads((out / "validate.json").read_text())
    checks = {c["name"]: c for c in document["checks"]}
    assert checks["performance.error_rate"]["status"] == "fail"
    assert "requests failed" in checks["performance.error_rate"]["detail"]
    assert checks["stability.leak"]["status"] == "skip"  # no --soak


def test_a_kv_leak_fails_the_drain(tmp_path: Path) -> None:
    result = validate(
        ValidateSpec(
            scenario="kv-leak", rate=4, duration_s=3, soak_s=6, functional=False, out=tmp_path / "r"
        )
    )
    assert not result.ready
    drain = next(c for c in result.checks if c.name == "stability.drain")
    assert drain.status is CheckStatus.FAIL and "KV leak" in drain.detail


def test_a_500_on_an_over_length_prompt_fails_functional(bad_server: str, tmp_path: Path) -> None:
    result = validate(ValidateSpec(url=bad_server, rate=4, duration_s=2, out=tmp_path / "run"))
    statuses = _statuses(result)
    assert not result.ready
    over = next(c for c in result.checks if c.name == "functional.length.over_limit")
    assert over.status is CheckStatus.FAIL and "HTTP 500" in over.detail
    assert statuses["functional.chat.stream"] is CheckStatus.PASS
    # It has no /metrics: the drain cannot be judged, and the check says what would judge it.
    assert statuses["stability.drain"] is CheckStatus.SKIP


def test_bad_arguments_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--rate or --concurrency"):
        validate(ValidateSpec(rate=1, concurrency=2, out=tmp_path))
    with pytest.raises(UserError, match="--soak"):
        validate(ValidateSpec(soak_s=-1, out=tmp_path))


def test_a_wrong_url_is_one_sentence_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["validate", "--url", "http://127.0.0.1:9", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("infertriage: error:") and "\n" not in err


@pytest.mark.e2e
def test_the_default_load_judges_the_steady_window_and_a_healthy_twin_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No --rate: a closed loop of 16 streams whose first burst queues behind itself. The
    # level is shorter than the default 60 s, so the burst weighs more, not less.
    out = tmp_path / "run"
    # The default 60 s: the sample a p95 claim needs grows with the requests over the limit
    # (90 with none, 130 with one: 25 s judged 99 with one TTFT over 200 ms on a busy host)
    code = main(["validate", "--skip-functional", "--out", str(out), "--json"])
    document = json.loads(capsys.readouterr().out)
    checks = {c["name"]: c for c in document["checks"]}
    assert code == 0, {name: c["detail"] for name, c in checks.items() if c["status"] == "fail"}
    assert checks["performance.ttft_p95"]["status"] in ("pass", "marginal")
    judged = document["judged"]
    assert judged["basis"] == "steady" and judged["num_first_burst"] >= 15
    assert judged["num_judged"] + judged["num_first_burst"] == judged["num_requests"]
    assert any(note.startswith("performance judged ") for note in document["notes"])
