"""loadgen, level 2: how the server counts the workload's prompts, learnt before the load.

Takes the base URL (`…/v1`), the model, the endpoint, the specs about to be
sent, the renderer that will make their text, a counter for literal text
(the local tokenizer, else the characters-per-token estimate) and the request
headers; gives a `PromptModel` for `workload.fit`. A sample of the specs —
the longest of each message count first, then the longest others — is counted
with the server's `/tokenize` (`tokencheck.ServerTokenizer`): each message's
text alone (the server's tokens per intended token) and the whole request as
the endpoint builds it (the chat template's tokens, by subtraction; on
llama.cpp through `/apply-template`). Bounded: the first `MIN_SPECS` prompts are
always counted — the fit's spread of counts needs more than one text, and a
server's first `/tokenize` may be slow (up to `FIRST_TIMEOUT_S` for the first
ask, or the caller's `limit_s` where shorter: a run's own request time-out)
— then more within `BUDGET_S` seconds, at most `MAX_REQUESTS` asks. A
server without `/tokenize`, or one that did not answer it in time, gives the
assumed model, with `estimated` set and its source saying which. Errors never
raise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence

import aiohttp

from infertriage.loadgen.client import Endpoint, prompt_fields
from infertriage.loadgen.tokencheck import ServerTokenizer
from infertriage.net import open_session, root_url
from infertriage.workload import (
    CountedPrompt,
    PromptModel,
    RequestSpec,
    SynthText,
    TextRenderer,
    Turn,
    learn_prompt_model_from,
)

__all__ = ["BUDGET_S", "FIRST_TIMEOUT_S", "MAX_REQUESTS", "learn_prompt_model", "pick_sample"]

BUDGET_S = 2.0
FIRST_TIMEOUT_S = 20.0
MAX_REQUESTS = 64
MIN_SPECS = 4
MAX_SPECS = 16
_TIMEOUT_S = 2.0


def pick_sample(specs: Sequence[RequestSpec], max_specs: int = MAX_SPECS) -> list[RequestSpec]:
    """Distinct prompts to count: the longest of each message count, then the longest others."""
    unique: dict[tuple[Turn, ...], RequestSpec] = {}
    for spec in specs:
        unique.setdefault(spec.turns, spec)
    ranked = sorted(unique.values(), key=lambda s: (-(s.prompt_tokens + s.max_tokens), s.index))
    picked: list[RequestSpec] = []
    seen_counts: set[int] = set()
    for spec in ranked:
        if len(spec.turns) not in seen_counts:
            seen_counts.add(len(spec.turns))
            picked.append(spec)
    chosen = {id(s) for s in picked}
    rest = [s for s in ranked if id(s) not in chosen]
    return (picked + rest)[:max_specs]


async def _measure(
    tokenizer: ServerTokenizer,
    spec: RequestSpec,
    renderer: TextRenderer,
    count_text: Callable[[str], int],
    cache: dict[str | SynthText, int],
    *,
    chat: bool,
) -> CountedPrompt | None:
    parts = []
    for turn in spec.turns:
        text = renderer.text(turn.content)
        counted = cache.get(turn.content)
        if counted is None:
            counted = await tokenizer.text(text)
            if counted is None:
                return None
            cache[turn.content] = counted
        synthetic = isinstance(turn.content, SynthText)
        intended = turn.content.num_tokens if isinstance(turn.content, SynthText) else None
        parts.append((intended if intended is not None else count_text(text), counted, synthetic))
    fields = prompt_fields(renderer, spec, chat=chat)
    whole = await tokenizer.request(fields)
    if whole is None and chat:
        whole = await tokenizer.templated(fields["messages"])
    return CountedPrompt(spec.turns, tuple(parts), whole)


async def _count_sample(
    tokenizer: ServerTokenizer,
    sample: Sequence[RequestSpec],
    renderer: TextRenderer,
    count_text: Callable[[str], int],
    *,
    chat: bool,
    timeout_s: float = _TIMEOUT_S,
) -> list[CountedPrompt]:
    """The first `MIN_SPECS` prompts whatever they take (the first up to `FIRST_TIMEOUT_S`,
    the rest `_TIMEOUT_S` each), then more until `BUDGET_S` is spent."""
    measured: list[CountedPrompt] = []
    cache: dict[str | SynthText, int] = {}
    deadline: float | None = None
    for spec in sample:
        if tokenizer.num_requests + len(spec.turns) + 1 > MAX_REQUESTS:
            break
        if len(measured) == MIN_SPECS and deadline is None:
            deadline = asyncio.get_running_loop().time() + BUDGET_S
        try:
            async with asyncio.timeout_at(deadline):
                found = await _measure(tokenizer, spec, renderer, count_text, cache, chat=chat)
        except TimeoutError:
            break  # what was counted in time is the sample
        if found is None:
            break
        measured.append(found)
        tokenizer.timeout = aiohttp.ClientTimeout(total=timeout_s)  # warm now
    return measured


async def learn_prompt_model(
    *,
    base_url: str,
    model: str,
    endpoint: Endpoint,
    specs: Sequence[RequestSpec],
    renderer: TextRenderer,
    count_text: Callable[[str], int],
    headers: Mapping[str, str],
    have_tokenizer: bool,
    limit_s: float | None = None,
) -> PromptModel:
    """Count a sample of `specs` with the server's `/tokenize`; see the module docstring.
    `limit_s` (the run's request or stall time-out) bounds every ask, the first one's too."""
    first_timeout_s = FIRST_TIMEOUT_S if limit_s is None else min(FIRST_TIMEOUT_S, limit_s)
    all_headers = {**headers, "Content-Type": "application/json"}
    async with open_session(timeout_s=first_timeout_s, headers=all_headers) as session:
        tokenizer = ServerTokenizer(session, root_url(base_url), model)
        measured = await _count_sample(
            tokenizer,
            pick_sample(specs),
            renderer,
            count_text,
            chat=endpoint is Endpoint.CHAT,
            timeout_s=min(_TIMEOUT_S, first_timeout_s),
        )
    unanswered = not measured and tokenizer.unanswered
    return learn_prompt_model_from(
        measured,
        form=tokenizer.form,
        exact_text=have_tokenizer,
        num_counted=tokenizer.num_requests,
        why_assumed=f"/tokenize did not answer within {first_timeout_s:g} s" if unanswered else "",
    )
