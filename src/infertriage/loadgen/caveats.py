"""loadgen, level 2: the warnings a bench level earns, in words a user can act on.

Takes a `LevelResult` or a level's `RequestRecord`s; gives sentences: outputs
shorter than asked (and why), chunk-level ITL, a bound client or a busy host, a
closed loop that ran dry, stale kept-alive connections resent, a local tokenizer
that disagrees with the server's `usage`, requests the server rejected as
invalid or refused for load (429). `stop_if_rejected` ends `diagnose` and
`validate` when a level was rejected too often to measure the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from infertriage.analyze.stats.outcomes import Rejections, check_rejections
from infertriage.loadgen.results import BenchResult, LevelResult
from infertriage.schemas import RequestRecord, UserError

__all__ = [
    "level_warnings",
    "retry_warning",
    "stop_if_rejected",
    "stop_if_unauthorized",
    "tokenizer_warning",
]


def stop_if_unauthorized(level: LevelResult) -> None:
    """Raise a `UserError` when the server refused every request of a level for its key.

    /v1/models may be open where generation is not: the preflight passes, then every
    request gets a 401 or 403. Any command stops there, bench too.
    """
    rejections = level.summary.rejections
    if rejections.all_unauthorized:
        raise UserError(
            f"the server refused every request of level {level.name} "
            f"({rejections.causes[0][0]}): check --api-key."
        )


def stop_if_rejected(result: BenchResult) -> list[str]:
    """Raise a `UserError` when over 2 % of a level was rejected as invalid; else its lines.

    The lines name, for each level with some rejected, how many, the server's
    message and the flag that fixes it.
    """
    fit = result.workload_fit
    guessed = fit is not None and fit.estimated and fit.count_source.startswith("assumed")
    lines = [
        check_rejections(level.name, _blame_estimate(level.summary.rejections, guessed))
        for level in result.levels
    ]
    return [
        f"{level.name}: {line}" for level, line in zip(result.levels, lines, strict=True) if line
    ]


def _blame_estimate(rejections: Rejections, guessed: bool) -> Rejections:
    """Too long for the context while the prompts' lengths were guessed: the guess is the
    likely cause (a tokenizer that splits words finer than the estimate allows)."""
    if not (guessed and rejections.about_length):
        return rejections
    fix = (
        "--tokenizer (the served model's tokenizer.json): the prompts' lengths were estimated, "
        "not counted by the server's /tokenize"
    )
    return replace(rejections, fix=fix)


def level_warnings(level: LevelResult, *, exact_asked: bool) -> list[str]:
    s, out = level.summary, []
    if s.num_short_outputs:
        ratio = f" (mean {s.output_ratio:.0%} of the asked length)" if s.output_ratio else ""
        why = (
            "the server did not honour `ignore_eos` / `min_tokens`, so outputs end at the "
            "model's EOS and output-length figures are not the workload's"
            if exact_asked
            else "--no-ignore-eos lets them end at the model's EOS"
        )
        out.append(
            f"{level.name}: {s.num_short_outputs} of {s.num_ok} requests returned fewer output "
            f"tokens than asked{ratio}; {why}."
        )
    if s.num_ok and s.itl_token_level < 1.0:
        out.append(
            f"{level.name}: ITL is chunk-level for {1 - s.itl_token_level:.0%} of requests "
            "(no per-chunk token counts and usage ≠ events): their tokens were apportioned."
        )
    if level.client.client_bound:
        out.append(
            f"{level.name}: the client is the bottleneck ({'; '.join(level.client.reasons)}); "
            "its figures are distorted — use more --workers or a lower load."
        )
    if level.client.host_busy:
        out.append(
            f"{level.name}: the host is busy ({'; '.join(level.client.reasons)}, with the "
            f"client at {level.client.cpu_busiest:.0%} of a core): time stamps run late."
        )
    if level.exhausted:
        out.append(f"{level.name}: the closed loop ran out of requests before its duration.")
    if level.num_backoffs:
        out.append(
            f"{level.name}: users waited {level.num_backoffs} time(s) after a request failed "
            "fast, before any token (50 ms, doubling to 1 s): the load offered was lower than "
            "asked."
        )
    if line := s.rejections.line():
        out.append(f"{level.name}: {line}; not counted as errors.")
    if s.num_refused:
        out.append(
            f"{level.name}: {s.num_refused} requests ({s.admission_rate:.1%}) refused for load "
            "(HTTP 429: admission control or a rate limit); not counted as errors."
        )
    return out


def retry_warning(records: Sequence[RequestRecord]) -> list[str]:
    """The requests sent twice, and what their first send met: never a silent resend."""
    retried = [r for r in records if r.labels.get("retried") == "stale_connection"]
    if not retried:
        return []
    cause = retried[0].labels.get("retry_cause") or "the connection closed"
    return [
        f"{len(retried)} request(s) went out on a kept-alive connection the server had "
        f"already closed, before any answer ({cause}); each was sent once more on a fresh "
        "connection (labelled `retried` in requests.jsonl, counted as `resent`) and later "
        "requests opened a connection each. A server that closes after every streamed "
        "response while it answers keep-alive (llama-server) or a keep-alive timeout "
        "shorter than the gaps between requests does this."
        + (
            f" {again} of them failed again on the fresh connection: the server itself "
            "resets requests."
            if (again := sum(1 for r in retried if not r.ok))
            else ""
        )
    ]


def tokenizer_warning(records: Sequence[RequestRecord]) -> list[str]:
    pairs = [
        (r.output_tokens or 0, int(r.labels["tokenizer_output_tokens"]))
        for r in records
        if "tokenizer_output_tokens" in r.labels
    ]
    server, local = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
    if server and abs(local - server) > 0.10 * server:
        return [
            f"the local tokenizer counts {local:,} output tokens where the server reported "
            f"{server:,} ({local / server - 1:+.0%}): is it the served model's tokenizer?"
        ]
    return []
