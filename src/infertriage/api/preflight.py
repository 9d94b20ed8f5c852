"""api, level 5: what `bench` learns of the server before any load, and the workload fitted.

Takes the base URL (`…/v1`), the headers, the model (or none), a
`--max-model-len` override and the local tokenizer; orchestrates, with no event loop
of its own (the HTTP, each call blocking, is `loadgen.preflight`); gives `preflight`'s
`ServerInfo` (`/v1/models`: a wrong URL or key fails here, in one sentence;
the model names it quotes pass through the run's `Redactor`),
the chosen model, the server's `ContextLimit` (`loadgen.context`; assumed,
and said so, when the server does not tell) and a `WorkloadFit` that learns,
once, how the server counts prompts (`loadgen.promptcount`, on the first
schedule it sees) and fits every level's schedule to the limit
(`workload.fit`), keeping one `FitReport` for the run.
"""

from __future__ import annotations

from collections.abc import Sequence

from infertriage.loadgen.client import Endpoint
from infertriage.loadgen.preflight import ServerInfo, ask_models, find_limit, learn_prompts
from infertriage.net import redactor_of
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


def preflight(
    base: str, headers: dict[str, str], *, need_model: bool, limit_s: float | None = None
) -> ServerInfo:
    """Ask /v1/models (`loadgen.preflight`): a wrong URL fails here, in one sentence.
    `limit_s` (the run's request or stall time-out) bounds this and every later probe."""
    return ask_models(base, headers, need_model=need_model, limit_s=limit_s)


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


def context_limit(info: ServerInfo, model: str, override: int | None) -> ContextLimit:
    """The server's context length: the override, what it says, else the assumed default."""
    return find_limit(info, model, override) or ContextLimit(DEFAULT_MAX_MODEL_LEN, "assumed")


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
        self.limit_s = info.limit_s
        self.tokenizer = tokenizer
        self.prompt_model: PromptModel | None = None
        self.report: FitReport | None = None

    def count_text(self, text: str) -> int:
        return self.tokenizer.count(text) if self.tokenizer is not None else estimate_tokens(text)

    def learn(self, schedule: Schedule) -> PromptModel:
        """Count a sample of the schedule's prompts with the server's /tokenize (bounded)."""
        return learn_prompts(
            base_url=self.base_url,
            model=self.model,
            endpoint=self.endpoint,
            specs=schedule.specs,
            renderer=TextRenderer(self.tokenizer),
            count_text=self.count_text,
            headers=self.headers,
            have_tokenizer=self.tokenizer is not None,
            limit_s=self.limit_s,
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
