"""loadgen, level 2: the functional half of the go-live checklist (`infertriage validate`).

Takes an OpenAI-compatible server's base URL (and, optionally, the model and
its context length); gives one `CheckResult` per check, in this order:
`ready` (listed and generating, not just `/health`), `chat`, `chat.stream`,
`completions`, `completions.stream`, `stream.usage`, `special.*` (CJK, emoji,
combining marks, RTL, quotes and backslashes, control characters, a lone
surrogate; each cross-checked against `/tokenize` where the server has it),
`length.near_limit`, `length.over_limit`, `max_tokens_1`, `stop` and
`concurrent`. Each check is a small function of a `_Probe`; a failure to
reach the server at the start is a `UserError`, every later failure is a
failed check whose detail says what was seen and why it matters. Requests
are small (max_tokens ≤ 32, never `ignore_eos`), so the list takes seconds.
The requests themselves, and the reading of answers, are in `probe_http`.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import aiohttp
import orjson

from infertriage.engines import read_model_list
from infertriage.loadgen.context import find_context_limit
from infertriage.loadgen.probe_http import (
    _PROMPT,
    _answer,
    _chat,
    _completion,
    _count_tokens,
    _describe,
    _first_choice,
    _is_utf8,
    _path,
    _Probe,
    _reply_problem,
    _request,
    _snippet,
    _stream,
    _stream_problem,
    _streamed_finish,
    _streamed_text,
    _tokenize,
    _usage,
)
from infertriage.net import auth_headers, open_session, redactor_of, root_url
from infertriage.schemas import UserError
from infertriage.schemas.redact import Redactor

__all__ = ["CheckResult", "functional_checks", "functional_checks_async"]

_STOP_MAX_TOKENS = 32
_NEAR_MAX_TOKENS = 16
_NUM_CONCURRENT = 8
_NEAR_MARGIN = 64  # tokens under the limit for `length.near_limit`
_OVER_MARGIN = 256  # tokens over the limit for `length.over_limit`
_NEAR_ESTIMATE = 0.75  # without /tokenize: words, as a fraction of the limit (a word ≥ 1 token)
_OVER_ESTIMATE = 2.0
_SAMPLE_WORDS = 256
_CALIBRATION_ROUNDS = 4
_TOLERANCE = 16  # tokens either side of the calibration target
_SEED = 1234
_CONNECT_TIMEOUT_S = 10.0

_STOP_PROMPT = "Count the colours of the rainbow, one by one:"
_ONE_TOKEN_PROMPT = "The capital of France is"
_VOCAB = ("the", "house", "river", "green", "table", "music", "light", "water", "paper", "stone")
_SPECIALS: dict[str, tuple[str, str]] = {
    "cjk": ("CJK text", "请用一句话介绍东京。東京は日本の首都です。서울은 한국의 수도입니다."),
    "emoji": (
        "emoji",
        "Rate it 👍🏽 🎉, a family 👨\u200d👩\u200d👧\u200d👦, flags 🇯🇵 🇫🇷 and 🏳\ufe0f\u200d🌈.",
    ),
    "combining": (
        "combining marks",
        "cafe\u0301 vs café, n\u0303, a\u0308, Z\u0351\u0352\u0353, e\u0301\u0301.",
    ),
    "rtl": (
        "right-to-left text",
        "\u202bمرحبا بالعالم\u202c then \u200fשלום עולם\u200e and \u2067نص\u2069 back.",
    ),
    "quotes": (
        "quotes and backslashes",
        'He said "hi", \'bye\', `tick` \\ \\\\ \\n \\u0041 \\" and "\\"" C:\\temp\\new.',
    ),
    "control": (
        "control characters",
        "controls[" + "".join(chr(c) for c in range(1, 32)) + "]end",
    ),
}
_LONE_SURROGATE = b"a lone surrogate \\ud800 in the middle"
_WORD = re.compile(r"\w{3,}")
_NO_LIMIT = (
    "skipped: the server does not say its context length (not in /v1/models, /props, "
    "/get_server_info, /info or /tokenize); give --max-model-len to test it."
)

_Outcome = tuple[bool | None, str]


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str  # e.g. "chat.stream", "special.cjk", "length.over_limit"
    ok: bool | None  # None: skipped, and `detail` says why
    detail: str  # one sentence: what was seen; on failure, what is wrong and why it matters
    duration_s: float


# ---------------------------------------------------------------------- checks


def _content_verdict(text: str, reason: str | None, what: str) -> _Outcome:
    if not text:
        return False, f"{what} answered with empty content; a client would show nothing."
    if reason is None:
        return False, (
            f"{what} gave no finish_reason; a client cannot tell a finished answer from a cut one."
        )
    return True, f"{what} answered {len(text)} characters with finish_reason {reason!r}."


async def _check_ready(p: _Probe) -> _Outcome:
    if p.model is None or p.model not in p.listed:
        seen = ", ".join(p.listed) if p.listed else p.models_problem or "no model"
        name = repr(p.model) if p.model else "a model"
        return False, f"/v1/models does not list {name} ({seen}); /health {p.health}."
    started = time.perf_counter()
    reply = await _request(p, "/v1/completions", _completion(p, _ONE_TOKEN_PROMPT, 1))
    problem = _reply_problem(reply, "a 1-token completions request")
    if problem:
        return False, f"{p.model!r} is listed but {problem}; /health {p.health}."
    took_s = time.perf_counter() - started
    return True, (
        f"{p.model!r} is listed and answered a 1-token request in {took_s:.2f} s; "
        f"/health {p.health}."
    )


async def _check_whole(p: _Probe, chat: bool) -> _Outcome:
    path = _path(chat)
    body = _chat(p) if chat else _completion(p, _PROMPT)
    reply = await _request(p, path, body)
    problem = _reply_problem(reply, path)
    if problem:
        return False, problem + "."
    return _content_verdict(*_answer(reply.document(), chat), path)


async def _check_stream(p: _Probe, chat: bool) -> _Outcome:
    path = _path(chat)
    s = await _stream(p, path, _chat(p) if chat else _completion(p, _PROMPT))
    what = f"the {path} stream"
    problem = _stream_problem(s, what)
    if problem:
        return False, problem + "."
    ok, detail = _content_verdict("".join(_streamed_text(s, chat)), _streamed_finish(s), what)
    return ok, detail.removesuffix(".") + f" in {len(s.chunks)} chunks and ended with [DONE]."


async def _check_stream_usage(p: _Probe) -> _Outcome:
    what = "the chat stream with stream_options.include_usage"
    s = await _stream(p, _path(True), _chat(p, stream_options={"include_usage": True}))
    problem = _stream_problem(s, what)
    if problem:
        return False, problem + "."
    last = s.chunks[-1] if s.chunks else {}
    prompt, completion = _usage(last, "prompt_tokens"), _usage(last, "completion_tokens")
    if prompt is None or completion is None:
        seen = (
            "usage only before its last chunk"
            if any("usage" in c for c in s.chunks)
            else "no usage"
        )
        return False, (
            f"{what} carried {seen}, so no final chunk gave prompt_tokens and completion_tokens; "
            "benchmarks and billing must then estimate token counts."
        )
    return True, f"{what} ended with usage: {prompt} prompt and {completion} completion tokens."


async def _cross_check(p: _Probe, prompt: str, document: Any) -> _Outcome:
    """Does `/tokenize` count the prompt as `usage.prompt_tokens` does?"""
    count = await _tokenize(p, prompt)
    if count is None:
        return None, "the server has no /tokenize, so the token count was not cross-checked"
    usage = _usage(document, "prompt_tokens")
    if usage is None:
        return None, "the answer had no usage.prompt_tokens to cross-check against /tokenize"
    if usage != count:
        return False, (
            f"/tokenize counts {count} tokens but usage.prompt_tokens says {usage}, so length "
            "limits and token accounting disagree on such text"
        )
    return True, f"/tokenize agrees with usage.prompt_tokens ({count} tokens)"


async def _check_special(p: _Probe, label: str, text: str) -> _Outcome:
    reply = await _request(p, "/v1/completions", _completion(p, text, 4))
    problem = _reply_problem(reply, f"a completions request with {label}")
    if problem:
        return False, f"{problem}; such prompts must be served like any other."
    if not _first_choice(reply.document()):
        return False, f"the answer to {label} has no choices."
    ok, detail = await _cross_check(p, text, reply.document())
    if ok is False:
        return False, f"a prompt with {label} was answered, but {detail}."
    return True, f"a prompt with {label} was answered with valid JSON (HTTP 200); {detail}."


async def _check_lone_surrogate(p: _Probe) -> _Outcome:
    # orjson refuses to encode a lone surrogate, so the body is written by hand.
    body = b'{"model": %s, "prompt": "%s", "max_tokens": 4, "temperature": 0}' % (
        orjson.dumps(p.model),
        _LONE_SURROGATE,
    )
    reply = await _request(p, "/v1/completions", body)
    what = 'a prompt with a lone surrogate ("\\ud800")'
    status = reply.status or 0
    if 400 <= status < 500:
        if not reply.body.strip() or not _is_utf8(reply.body):
            return False, f"{what} was rejected with HTTP {status} but no readable error body."
        return True, f"{what} was rejected clearly: HTTP {status}, {_snippet(reply.body)}."
    if status >= 500:
        return False, (
            f"{what} got HTTP {status} ({_snippet(reply.body)}); invalid input must be "
            "rejected with a 4xx, not crash the request."
        )
    problem = _reply_problem(reply, what)
    if problem:
        return False, f"{problem}; it must be served or rejected with a 4xx."
    return True, f"{what} was accepted (HTTP 200) with a valid JSON answer."


def _words(num_words: int) -> str:
    return " ".join(_VOCAB[i % len(_VOCAB)] for i in range(num_words))


async def _sized_prompt(p: _Probe, target: int, estimate_words: int) -> tuple[str, int | None]:
    """A prompt of about `target` tokens by /tokenize (with its count), else by estimate (None)."""
    sample = await _count_tokens(p, _words(_SAMPLE_WORDS))
    if sample is None or sample <= 0:
        return _words(estimate_words), None
    per_word = sample / _SAMPLE_WORDS
    num_words = max(1, round(target / per_word))
    count = sample
    for _ in range(_CALIBRATION_ROUNDS):
        measured = await _count_tokens(p, _words(num_words))
        if measured is None:
            return _words(estimate_words), None
        count = measured
        if abs(count - target) <= _TOLERANCE:
            break
        num_words = max(1, num_words + round((target - count) / per_word))
    return _words(num_words), count


def _size_words(prompt: str, count: int | None, estimate: str) -> str:
    if count is None:
        num_words = prompt.count(" ") + 1
        return f"{num_words} words (an estimate, {estimate}: the server has no /tokenize)"
    return f"{count} tokens (counted by /tokenize)"


async def _check_near_limit(p: _Probe) -> _Outcome:
    limit = p.max_model_len
    if limit is None:
        return None, _NO_LIMIT
    target = max(limit - _NEAR_MARGIN, limit // 2)
    prompt, count = await _sized_prompt(p, target, int(limit * _NEAR_ESTIMATE))
    max_tokens = min(_NEAR_MAX_TOKENS, max(1, limit // 8))
    size = _size_words(prompt, count, f"{_NEAR_ESTIMATE:.0%} of the limit")
    if count is not None and count + max_tokens > limit:
        return None, f"skipped: could not build a prompt under the limit of {limit} ({size})."
    reply = await _request(p, "/v1/completions", _completion(p, prompt, max_tokens))
    what = f"a prompt of {size} under the limit of {limit} tokens ({p.limit_source})"
    problem = _reply_problem(reply, what)
    if problem:
        return False, f"{problem}; prompts that fit the context must be served."
    return True, f"{what} was answered (HTTP 200)."


async def _check_over_limit(p: _Probe) -> _Outcome:
    limit = p.max_model_len
    if limit is None:
        return None, _NO_LIMIT
    prompt, count = await _sized_prompt(p, limit + _OVER_MARGIN, int(limit * _OVER_ESTIMATE))
    size = _size_words(prompt, count, f"{_OVER_ESTIMATE:g}× the limit")
    if count is not None and count <= limit:
        return None, f"skipped: could not build a prompt over the limit of {limit} ({size})."
    reply = await _request(p, "/v1/completions", _completion(p, prompt, _NEAR_MAX_TOKENS))
    what = f"a prompt of {size} over the limit of {limit} tokens ({p.limit_source})"
    if reply.status is None:
        return False, f"{what} got no answer ({reply.error}); it must be rejected with a 4xx."
    if reply.status >= 500:
        return False, (
            f"the server answered HTTP {reply.status} to an over-length prompt; it must reject "
            f"it with a 4xx ({what}; it said: {_snippet(reply.body)})."
        )
    if reply.status < 400:
        why = "the server's context is longer" if p.limit_source == "as given" else "it truncated"
        return False, (
            f"{what} was answered with HTTP {reply.status}; it must be rejected with a 4xx "
            f"(unless {why})."
        )
    return True, f"{what} was rejected with HTTP {reply.status}: {_snippet(reply.body)}."


async def _check_max_tokens_1(p: _Probe) -> _Outcome:
    reply = await _request(p, "/v1/completions", _completion(p, _ONE_TOKEN_PROMPT, 1))
    problem = _reply_problem(reply, "a max_tokens=1 request")
    if problem:
        return False, problem + "."
    num = _usage(reply.document(), "completion_tokens")
    if num != 1:
        return False, (
            f"with max_tokens=1 usage.completion_tokens is {num}; max_tokens is not honoured "
            "or tokens are miscounted, so every length limit is suspect."
        )
    options = {"include_usage": True}
    s = await _stream(
        p, "/v1/completions", _completion(p, _ONE_TOKEN_PROMPT, 1, stream_options=options)
    )
    problem = _stream_problem(s, "a streamed max_tokens=1 request")
    if problem:
        return False, problem + "."
    pieces = _streamed_text(s, chat=False)
    streamed = _usage(s.chunks[-1], "completion_tokens") if s.chunks else None
    if len(pieces) != 1 or streamed not in {None, 1}:
        return False, (
            f"streamed with max_tokens=1 the server sent {len(pieces)} content chunks "
            f"(usage.completion_tokens {streamed}); it should send exactly one token."
        )
    return True, "max_tokens=1 gave usage.completion_tokens 1 and, streamed, one content chunk."


def _stop_word(text: str) -> str | None:
    """A word from the middle of `text` that first appears after its start."""
    words = _WORD.findall(text)
    middle = len(words) // 2
    for word in words[middle:] + words[:middle]:
        if text.find(word) > 0:
            return str(word)
    return None


async def _check_stop(p: _Probe) -> _Outcome:
    body = _completion(p, _STOP_PROMPT, _STOP_MAX_TOKENS, seed=_SEED)
    first = await _request(p, "/v1/completions", body)
    problem = _reply_problem(first, "the request without stop")
    if problem:
        return False, problem + "."
    text, _ = _answer(first.document(), chat=False)
    word = _stop_word(text)
    if word is None:
        return None, f"skipped: the first answer ({text[:40]!r}) has no word to stop at."
    second = await _request(p, "/v1/completions", body | {"stop": [word]})
    problem = _reply_problem(second, f"the request with stop=[{word!r}]")
    if problem:
        return False, problem + "."
    cut, reason = _answer(second.document(), chat=False)
    if word in cut:
        return False, (
            f"with stop=[{word!r}] the output still contains {word!r}; stop strings are "
            "ignored, so clients get text past their delimiters."
        )
    if not text.startswith(cut):
        return True, (
            f"with stop=[{word!r}] the output does not contain it; the output was not "
            "reproducible at temperature 0 with a fixed seed, so the cut was not compared."
        )
    if reason != "stop" or len(cut) >= len(text):
        return False, (
            f"with stop=[{word!r}] the output kept {len(cut)} of {len(text)} characters with "
            f"finish_reason {reason!r}; it should end early with finish_reason 'stop'."
        )
    return True, (
        f"stop=[{word!r}] cut the output from {len(text)} to {len(cut)} characters with "
        "finish_reason 'stop'."
    )


async def _check_concurrent(p: _Probe) -> _Outcome:
    started = time.perf_counter()
    streams = await asyncio.gather(
        *(_stream(p, _path(True), _chat(p)) for _ in range(_NUM_CONCURRENT))
    )
    took_s = time.perf_counter() - started
    failed: list[str] = []
    for i, s in enumerate(streams, 1):
        problem = _stream_problem(s, f"stream {i}")
        if problem is None and not _streamed_text(s, chat=True):
            problem = f"stream {i} had no content"
        if problem:
            failed.append(problem)
    if failed:
        return False, (
            f"{len(failed)} of {_NUM_CONCURRENT} concurrent streams failed; first: {failed[0]}."
        )
    ids = {str(s.chunks[0].get("id")) for s in streams}
    if len(ids) != _NUM_CONCURRENT:
        return False, (
            f"{_NUM_CONCURRENT} concurrent streams carried {len(ids)} distinct ids; clients "
            "and logs that key on the id will mix answers up."
        )
    return True, (
        f"{_NUM_CONCURRENT} concurrent streams all finished with content and distinct ids "
        f"in {took_s:.2f} s."
    )


_Check = Callable[[_Probe], Awaitable[_Outcome]]
_CHECKS: tuple[tuple[str, _Check], ...] = (
    ("ready", _check_ready),
    ("chat", partial(_check_whole, chat=True)),
    ("chat.stream", partial(_check_stream, chat=True)),
    ("completions", partial(_check_whole, chat=False)),
    ("completions.stream", partial(_check_stream, chat=False)),
    ("stream.usage", _check_stream_usage),
    *(
        (f"special.{key}", partial(_check_special, label=label, text=text))
        for key, (label, text) in _SPECIALS.items()
    ),
    ("special.lone_surrogate", _check_lone_surrogate),
    ("length.near_limit", _check_near_limit),
    ("length.over_limit", _check_over_limit),
    ("max_tokens_1", _check_max_tokens_1),
    ("stop", _check_stop),
    ("concurrent", _check_concurrent),
)


# ---------------------------------------------------------------------- driver


async def _open(
    session: aiohttp.ClientSession, root: str, model: str | None, max_model_len: int | None
) -> _Probe:
    """Ask /v1/models and /health; a server that cannot be reached is a `UserError`."""
    p = _Probe(session, root, model, max_model_len, "as given", (), "", "")
    models = await _request(p, "/v1/models")
    if models.status is None:
        raise UserError(f"could not reach the server at {root}: {models.error}.")
    health = await _request(p, "/health")
    p.health = f"answered HTTP {health.status}" if health.status else f"failed ({health.error})"
    listing = read_model_list(models.document())
    cards = [card for card in listing.cards if card.get("id")]
    if models.status != 200 or not listing.is_list:
        p.models_problem = f"HTTP {models.status}: {_snippet(models.body)}"
        cards = []
    p.listed = tuple(str(card["id"]) for card in cards)
    p.model = model or (p.listed[0] if p.listed else None)
    if p.max_model_len is None:
        found = await find_context_limit(
            session, root, model=p.model, models_document={"data": cards}
        )
        if found is not None:
            p.max_model_len, p.limit_source = found.max_model_len, f"from {found.source}"
    return p


async def _run(name: str, check: _Check, p: _Probe, redact: Redactor) -> CheckResult:
    started = time.perf_counter()
    if p.model is None and name != "ready":
        outcome: _Outcome = (None, "skipped: there is no model to ask for (see `ready`).")
    else:
        try:
            outcome = await check(p)
        except Exception as err:  # a probe must report, never end the checklist
            outcome = (False, f"the check itself failed ({_describe(err)}).")
    # A server that echoes the key in an error must not have it written into the detail.
    return CheckResult(name, outcome[0], redact(outcome[1]), time.perf_counter() - started)


async def functional_checks_async(
    base_url: str,
    model: str | None = None,
    *,
    api_key: str | None = None,
    headers: Sequence[tuple[str, str]] = (),
    max_model_len: int | None = None,
    timeout_s: float = 60.0,
) -> list[CheckResult]:
    """Run every check against `base_url` (with or without /v1), one after another."""
    root = root_url(base_url)
    # A fresh connection for every probe: llama-server closes a kept-alive connection after
    # each streamed answer, and a probe must test the server, not connection reuse.
    async with open_session(
        timeout_s=timeout_s,
        connect_timeout_s=min(timeout_s, _CONNECT_TIMEOUT_S),
        headers=auth_headers(api_key, headers),
        fresh_connections=True,
    ) as session:
        probe = await _open(session, root, model, max_model_len)
        redact = redactor_of(api_key, headers)
        return [await _run(name, check, probe, redact) for name, check in _CHECKS]


def functional_checks(
    base_url: str,
    model: str | None = None,
    *,
    api_key: str | None = None,
    headers: Sequence[tuple[str, str]] = (),
    max_model_len: int | None = None,
    timeout_s: float = 60.0,
) -> list[CheckResult]:
    """`functional_checks_async` on a fresh event loop."""
    return asyncio.run(
        functional_checks_async(
            base_url,
            model,
            api_key=api_key,
            headers=headers,
            max_model_len=max_model_len,
            timeout_s=timeout_s,
        )
    )
