"""api, level 5: what `bench` learns of the server before any load, and the workload fitted.

Takes the base URL (`…/v1`), the headers, the model (or none), a
`--max-model-len` override and the local tokenizer; gives `preflight`'s
`ServerInfo` (`/v1/models`: a wrong URL or key fails here, in one sentence;
the model names it quotes pass through the run's `Redactor`),
the chosen model, the server's `ContextLimit` (`loadgen.context`; assumed,
and said so, when the server does not tell) and a `WorkloadFit` that learns,
once, how the server counts prompts (`loadgen.promptcount`, on the first
schedule it sees) and fits every level's schedule to the limit
(`workload.fit`), keeping one `FitReport` for the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from infertriage.engines import read_model_list
from infertriage.loadgen.client import Endpoint
from infertriage.loadgen.context import find_context_limit
from infertriage.loadgen.promptcount import learn_prompt_model
from infertriage.loadgen.runner import run_sync
from infertriage.net import open_session, redactor_of, root_url
from infertriage.schemas import RequestRecord, UserError
from infertriage.workload import (
    DEFAULT_MAX_MODEL_LEN,
    ContextLimit,
    FitReport,
    LocalTokenizer,
    PromptModel,
    Schedule,
    TextRenderer,
    estimate_tokens,
    fit_schedule,
)

__all__ = ["ServerInfo", "WorkloadFit", "choose_model", "context_limit", "preflight"]

_PREFLIGHT_TIMEOUT_S = 5.0
_PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What `/v1/models` answered, and where and how it was asked (for `context_limit`)."""

    models: tuple[str, ...]
    entries: tuple[Any, ...] = ()  # the model cards, for `context_limit`
    base_url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # the key is in them


async def _get_models(base: str, headers: dict[str, str]) -> tuple[int, bytes]:
    async with (
        open_session(timeout_s=_PREFLIGHT_TIMEOUT_S, connect_timeout_s=3.0) as session,
        session.get(base + "/models", headers=headers) as resp,
    ):
        return resp.status, await resp.content.read(1 << 20)


def preflight(base: str, headers: dict[str, str], *, need_model: bool) -> ServerInfo:
    """Ask /v1/models: a wrong URL fails here, in one sentence, before any load."""
    try:
        status, body = run_sync(_get_models(base, headers), use_uvloop=False)
    except aiohttp.InvalidURL as err:
        raise UserError(f"{base} is not a valid URL.") from err
    except aiohttp.ClientConnectorError as err:
        refused = isinstance(err.os_error, ConnectionRefusedError)
        reason = "connection refused" if refused else err.os_error.strerror or str(err.os_error)
        raise UserError(f"cannot connect to {base}: {reason.lower()}.") from err
    except TimeoutError as err:
        raise UserError(f"{base} did not answer within {_PREFLIGHT_TIMEOUT_S:g} s.") from err
    except aiohttp.ClientError as err:
        raise UserError(f"{base} failed before answering ({type(err).__name__}).") from err
    if status in (401, 403):
        raise UserError(f"{base} refused the request (HTTP {status}): check --api-key.")
    if status != 200:
        if not need_model:
            return ServerInfo((), base_url=base, headers=headers)
        raise UserError(
            f"{base}/models answered HTTP {status}: is this the base URL of an "
            "OpenAI-compatible server?"
        )
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise UserError(f"{base}/models did not answer with an OpenAI model list.") from err
    if isinstance(document, dict) and not document.get("data"):
        return ServerInfo((), base_url=base, headers=headers)  # a list of no models
    listing = read_model_list(document)
    if listing.problem:
        raise UserError(f"{base}/models did not answer with an OpenAI model list.")
    return ServerInfo(listing.ids, listing.cards, base_url=base, headers=headers)


def choose_model(model: str | None, info: ServerInfo, base: str) -> str:
    if model is None:
        if not info.models:
            raise UserError(f"{base}/models lists no model: name one with --model.")
        return info.models[0]
    if info.models and model not in info.models:
        # server text: a careless gateway may name its models with what it was sent
        served = redactor_of(None, info.headers)(", ".join(info.models[:5]))
        raise UserError(f"model {model!r} is not served by {base} (it serves: {served}).")
    return model


async def _find(
    base_url: str,
    headers: Mapping[str, str],
    model: str,
    entries: Sequence[Any],
    override: int | None,
) -> ContextLimit | None:
    async with open_session(timeout_s=_PROBE_TIMEOUT_S, headers=headers) as session:
        return await find_context_limit(
            session,
            root_url(base_url),
            model=model,
            models_document={"data": list(entries)},
            override=override,
        )


def context_limit(info: ServerInfo, model: str, override: int | None) -> ContextLimit:
    """The server's context length: the override, what it says, else the assumed default."""
    found = run_sync(
        _find(info.base_url, info.headers, model, info.entries, override), use_uvloop=False
    )
    return found or ContextLimit(DEFAULT_MAX_MODEL_LEN, "assumed")


class WorkloadFit:
    """One run's fitting: the limit, the prompt model (learnt on first use) and the report."""

    def __init__(
        self,
        limit: ContextLimit,
        info: ServerInfo,
        *,
        model: str,
        endpoint: Endpoint,
        tokenizer: LocalTokenizer | None,
    ) -> None:
        self.limit = limit
        self.base_url = info.base_url
        self.model = model
        self.endpoint = endpoint
        self.headers = dict(info.headers)
        self.tokenizer = tokenizer
        self.prompt_model: PromptModel | None = None
        self.report: FitReport | None = None

    def count_text(self, text: str) -> int:
        return self.tokenizer.count(text) if self.tokenizer is not None else estimate_tokens(text)

    def learn(self, schedule: Schedule) -> PromptModel:
        """Count a sample of the schedule's prompts with the server's /tokenize (bounded)."""
        return run_sync(
            learn_prompt_model(
                base_url=self.base_url,
                model=self.model,
                endpoint=self.endpoint,
                specs=schedule.specs,
                renderer=TextRenderer(self.tokenizer),
                count_text=self.count_text,
                headers=self.headers,
                have_tokenizer=self.tokenizer is not None,
            ),
            use_uvloop=False,
        )

    def fit(self, schedule: Schedule) -> Schedule:
        """The schedule fitted to the server's context; the run's report grows with it."""
        if self.prompt_model is None:
            self.prompt_model = self.learn(schedule)
        fitted, report = fit_schedule(
            schedule, self.limit, self.prompt_model, count_text=self.count_text
        )
        self.report = report if self.report is None else self.report.merge(report)
        return fitted

    def sent(self, records: Sequence[RequestRecord]) -> FitReport | None:
        """The report over the requests sent (of the planned ones, a closed loop sends few)."""
        if self.report is None:
            return None
        return self.report.of_sent(
            [(r.labels.get("fit"), r.max_tokens) for r in records if r.max_tokens is not None]
        )
