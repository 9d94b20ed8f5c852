"""api, level 5: `validate`'s operations checks — cold start, the longest generation.

`cold_start_check` runs right after `validate` has started the server (the
twin), before any other request: process start → `/health` ready → first
token, and the prefix cache's warm-up (`loadgen.coldstart`); `plan
--from-run` reads its `first_token_s` as the scale-up lead time. A server at
`--url` was already up: its cold start is not measurable here (SKIP).

`long_generation_check` sends two streams at once whose `max_tokens` is the
server's limit (the context left after a short prompt; bench's workload fit
caps it) with `ignore_eos`, for at most `--long-generation-max-s`, into a run
of its own under the validate run (`long_generation/`), so its long outputs
never mix with the performance level's records. When both streams end
mid-way at one elapsed time, something between the client and the server
(a gateway's or load balancer's read timeout) cut them: the check fails with
the `application.stream_cut` finding's title and next step, the same rule
`diagnose` applies. Streams that finish pass; streams the cap stopped prove
only the seconds they ran, and the check says how long a whole one takes.
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson

from infertriage.analyze.signals.client import consistent_stream_cuts
from infertriage.analyze.stats.outcomes import is_incomplete
from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec, ValidateSpec
from infertriage.api.target import Target
from infertriage.diagnose import Evidence
from infertriage.diagnose.rules.application import stream_cut
from infertriage.engines import read_model_list
from infertriage.loadgen.client import ClientConfig
from infertriage.loadgen.coldstart import ColdStart, measure_cold_start
from infertriage.net import api_url, sync_request
from infertriage.schemas import (
    Check,
    CheckGroup,
    CheckStatus,
    ErrorKind,
    RequestRecord,
    RunDir,
    Signal,
    Thresholds,
)

__all__ = ["COLD_START_CHECK", "LONG_GENERATION_CHECK", "cold_start_check", "long_generation_check"]

COLD_START_CHECK = "operations.cold_start"  # `plan --from-run` reads its figures
LONG_GENERATION_CHECK = "operations.gateway_timeout"
_MAX_PREFIX_TOKENS = 2048  # a long system prompt; half the context at most
_DEFAULT_CONTEXT = 4096
_STREAMS = 2  # a cut is a timeout when streams end at one elapsed time: two are the least
_PROMPT_TOKENS = 16
_UNBOUNDED_OUTPUT = 10_000_000  # capped by the workload fit to what the context leaves
_CAP_SHARE = 0.9  # a stream that timed out this close to the cap was stopped by it


def _lg(status: CheckStatus, detail: str, figures: dict[str, float]) -> Check:
    return Check(CheckGroup.OPERATIONS, LONG_GENERATION_CHECK, status, detail, figures)


def _records(run_dir: Path) -> list[RequestRecord]:
    run = RunDir.open(run_dir)
    return list(run.iter_records(run.requests, RequestRecord)) if run.requests.exists() else []


def _cut_finding_lines(share: float, at_s: float, thresholds: Thresholds) -> tuple[str, str] | None:
    """(title, next step) of `application.stream_cut` on these streams, or None."""
    signals = [
        Signal("client.stream_cut_fraction", share, "fraction", "client"),
        Signal("client.stream_cut_at_s", at_s, "s", "client"),
    ]
    finding = stream_cut(Evidence.of(signals), thresholds)
    if finding is None:
        return None
    return finding.title, finding.next_steps[0] if finding.next_steps else ""


def _judge(records: list[RequestRecord], max_s: float, thresholds: Thresholds) -> Check:
    asked = max((r.max_tokens or 0 for r in records), default=0)
    figures: dict[str, float] = {"max_tokens": float(asked), "max_s": max_s}
    share, at_s = consistent_stream_cuts(records)
    cut = _cut_finding_lines(share, at_s, thresholds)
    if cut is not None:
        title, step = cut
        whole = _whole_s(records, asked)
        figures |= {"cut_at_s": at_s, "cut_fraction": share, "estimated_s": whole}
        detail = (
            f"{title} of a {asked:,}-token generation (a whole one takes about {whole:.0f} s): "
            f"something between the client and the server cuts it (application.stream_cut); "
            f"{step}."
        )
        return Check(
            CheckGroup.OPERATIONS, LONG_GENERATION_CHECK, CheckStatus.FAIL, detail, figures
        )
    done = [r for r in records if r.ok and r.end_ts is not None]
    if done and len(done) == len(records):
        longest = max((r.end_ts or 0.0) - r.sent_ts for r in done)
        tokens = max(r.output_tokens or 0 for r in done)
        figures |= {"longest_s": longest, "output_tokens": float(tokens)}
        detail = f"{len(done)} streams of {tokens:,} tokens ran {longest:.1f} s uncut."
        return Check(
            CheckGroup.OPERATIONS, LONG_GENERATION_CHECK, CheckStatus.PASS, detail, figures
        )
    return _unfinished(records, asked, figures)


def _whole_s(records: list[RequestRecord], asked: int) -> float:
    """How long a whole generation of `asked` tokens takes, at the pace the streams kept."""
    ran = max(((r.end_ts or r.sent_ts) - r.sent_ts for r in records), default=0.0)
    made = max((sum(c.num_tokens for c in r.chunks) for r in records), default=0)
    return asked * ran / made if made > 0 else float("inf")


def _capped(record: RequestRecord, max_s: float) -> bool:
    """Stopped by our own `--long-generation-max-s`, tokens flowing until then."""
    ran = (record.end_ts or record.sent_ts) - record.sent_ts
    timed_out = record.error_kind is ErrorKind.TIMEOUT and ran >= _CAP_SHARE * max_s
    return is_incomplete(record) or (timed_out and record.first_token_ts is not None)


def _unfinished(records: list[RequestRecord], asked: int, figures: dict[str, float]) -> Check:
    """Streams the cap stopped, or that broke some other way: what they prove, what to do."""
    max_s = figures["max_s"]
    broken = [r for r in records if r.error_kind is not ErrorKind.NONE and not _capped(r, max_s)]
    if broken:
        first = broken[0]
        ran = (first.end_ts or first.sent_ts) - first.sent_ts
        detail = (
            f"a {asked:,}-token stream failed after {ran:.1f} s ({first.error_kind.value}"
            f"{f', {first.fault}' if first.fault else ''}), not at one time for every stream; "
            "rerun to tell a timeout from a fault."
        )
        return Check(
            CheckGroup.OPERATIONS, LONG_GENERATION_CHECK, CheckStatus.WARN, detail, figures
        )
    ran = max(((r.end_ts or r.sent_ts) - r.sent_ts for r in records), default=0.0)
    made = max((sum(c.num_tokens for c in r.chunks) for r in records), default=0)
    whole = _whole_s(records, asked)
    figures |= {"ran_s": ran, "estimated_s": whole}
    detail = (
        f"nothing cut the streams in the {ran:.1f} s they ran ({made:,} of {asked:,} tokens); "
        f"a whole one takes about {whole:.0f} s: rerun with --long-generation-max-s "
        f"{int(whole * 1.2) + 1} to check all of it."
    )
    return _lg(CheckStatus.WARN, detail, figures)


def long_generation_check(
    url: str, spec: ValidateSpec, out: Path, thresholds: Thresholds
) -> tuple[Check, Path]:
    """Two streams of the longest generation the server allows, at most
    `spec.long_generation_max_s` each, into the run `out`; the check (module docstring)
    and the run directory."""
    max_s = spec.long_generation_max_s
    bench = BenchSpec(
        url=url,
        client=spec.client,
        concurrencies=(_STREAMS,),
        num_requests=_STREAMS,
        workload=f"synthetic:input={_PROMPT_TOKENS},output={_UNBOUNDED_OUTPUT}",
        timeout_s=max_s,
        stall_timeout_s=max_s,
        drain_timeout_s=1.0,
        out=out,
        ignore_eos=True,
        check_tokens=False,
        labels=(("phase", "long_generation"),),
    )
    result = run_bench(bench)
    return _judge(_records(result.run_dir), max_s, thresholds), result.run_dir


# --- cold start ------------------------------------------------------------------------------


def _model(spec: ValidateSpec, url: str) -> str:
    if spec.client.model:
        return spec.client.model
    answer = sync_request(api_url(url) + "/models", timeout_s=10, max_bytes=1 << 20)
    try:
        ids = read_model_list(orjson.loads(answer.body or b"null")).ids
    except orjson.JSONDecodeError:
        ids = ()
    return ids[0] if ids else "default"


def _cold_start_detail(found: ColdStart) -> str:
    text = (
        f"process start → /health ready {found.health_ready_s:.2f} s, → first token "
        f"{found.first_token_s:.2f} s"
    )
    if found.prefix_cache_warm_s is None:
        text += (
            f"; no prefix-cache warm-up seen on a {found.prefix_tokens:,}-token prefix "
            f"(TTFT {found.cold_ttft_s * 1e3:.0f} ms first, {found.warm_ttft_s * 1e3:.0f} ms "
            "after: caching off, or its prefill too cheap to see)"
        )
    else:
        text += (
            f"; the prefix cache is warm {found.prefix_cache_warm_s:.2f} s after ready "
            f"({found.prefix_tokens:,}-token prefix: TTFT {found.cold_ttft_s * 1e3:.0f} ms "
            f"cold, {found.warm_ttft_s * 1e3:.0f} ms warm)"
        )
    return (
        text + f". `plan --from-run` takes {found.first_token_s:.1f} s as the scale-up lead time."
    )


def cold_start_check(target: Target, spec: ValidateSpec) -> Check:
    """The cold start of a server `validate` started itself (module docstring)."""
    if target.started_s is None or target.health_ready_s is None:
        return Check(
            CheckGroup.OPERATIONS,
            COLD_START_CHECK,
            CheckStatus.SKIP,
            "the server at --url was already running: cold start is measured when validate "
            "starts the server (the twin). Time yours from the pod's start to its first token "
            "and give it to `plan --cold-start SECONDS`.",
        )
    context = target.deployment.max_model_len or spec.client.max_model_len or 0
    prefix = min(_MAX_PREFIX_TOKENS, (context or _DEFAULT_CONTEXT) // 2)
    config = ClientConfig(
        base_url=api_url(target.url),
        model=_model(spec, target.url),
        endpoint=spec.client.endpoint,
        api_key=spec.client.api_key,
        timeout_s=60.0,
        stall_timeout_s=30.0,
    )
    found = measure_cold_start(
        config, time.monotonic() - target.started_s, target.health_ready_s, prefix
    )
    figures = {
        "health_ready_s": found.health_ready_s,
        "first_token_s": found.first_token_s,
        "cold_ttft_s": found.cold_ttft_s,
        "warm_ttft_s": found.warm_ttft_s,
        "prefix_tokens": float(found.prefix_tokens),
    }
    if found.prefix_cache_warm_s is not None:
        figures["prefix_cache_warm_s"] = found.prefix_cache_warm_s
    if found.error:
        detail = f"a cold-start probe failed ({found.error[:200]}); figures are partial."
        return Check(CheckGroup.OPERATIONS, COLD_START_CHECK, CheckStatus.WARN, detail, figures)
    detail = _cold_start_detail(found)
    return Check(CheckGroup.OPERATIONS, COLD_START_CHECK, CheckStatus.PASS, detail, figures)
