"""workload, level 1: fit a workload to the server's context before the load (pure).

Takes request specs, the server's `ContextLimit` and a `PromptModel` (how
that server counts a request's prompt, learnt from its `/tokenize` or a local
tokenizer, or assumed); gives the specs fitted and a `FitReport` saying what
changed. A prompt as the server counts it is its text, times the server's
tokens per token of the text (`ratio`), plus the chat template's tokens; the
model keeps upper bounds for both, so the prediction errs long. A tokenizer that
splits our words into a varying number of tokens (a small vocabulary: 2.7 a word
in `make test-engines`' tiny Llama) counts each text differently: the bound for
a synthetic turn of `w` words is also at least `w·ratio + Z·σ·√w`, σ the per-word
spread the sample measured (`SPREAD_Z` deviations; with none measured, none added),
and literal text's likewise per token of the text counter's estimate. Fitting:

1. **Rescale.** When the server counts the synthetic text as more (or fewer)
   tokens than intended (by more than `RESCALE_TOLERANCE`), the text is
   regenerated at `n / ratio` words, so the server sees the intended lengths.
2. **Trim.** A prompt that leaves too little room for its output — less than
   an eighth of the context (`OUTPUT_FLOOR_SHARE`, at least `MIN_FIT_OUTPUT`
   tokens) or what it asked, whichever is less — or that passes TGI's input
   limit is cut, its longest non-system turn first, so a shared system prefix
   stays shared: a chat client drops history before it starves the answer.
3. **Cap.** `max_tokens` is lowered to what the context leaves after the
   prompt and a safety margin (`MARGIN_TOKENS` plus `MARGIN_SHARE` of the
   prompt). The client sends `min_tokens = max_tokens`, so it follows.

Every fitted request satisfies prompt (as predicted, margin included) +
`max_tokens` ≤ `max_model_len`. Fitted specs carry a `fit` label (`capped`, `trimmed` or
`trimmed,capped`) that their records keep.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from infertriage.workload.spec import RequestSpec, Schedule, SynthText, Turn
from infertriage.workload.text import estimate_tokens

__all__ = [
    "ESTIMATED_OVERHEAD",
    "ESTIMATED_SYNTH_RATIO",
    "ESTIMATED_TEXT_RATIO",
    "MIN_FIT_OUTPUT",
    "OUTPUT_FLOOR_SHARE",
    "ContextLimit",
    "CountedPrompt",
    "FitReport",
    "PromptModel",
    "fit_schedule",
    "fit_specs",
    "learn_prompt_model_from",
    "margin_tokens",
]

# A prompt keeps room for this share of the context as output (at least MIN_FIT_OUTPUT
# tokens, at most what it asked); a longer one is trimmed.
OUTPUT_FLOOR_SHARE = 1 / 8
MIN_FIT_OUTPUT = 16
# The safety margin on top of the predicted prompt: a few tokens for the text's merge at
# message boundaries, and a share for prompts whose sampled ratio ran below the bound.
MARGIN_TOKENS = 8
MARGIN_SHARE = 0.01
RESCALE_TOLERANCE = 0.02
# A synthetic turn's bound: its mean count plus this many of its standard deviations (4:
# about 1 turn in 30,000 over, were per-word counts normal).
SPREAD_Z = 4.0
# Ratios of turns shorter than this are noise (one split word is 3 % of 32); the margin
# covers them.
MIN_RATIO_TOKENS = 32
# With neither the server's /tokenize nor a local tokenizer: our words are one token each in
# the common BPE vocabularies, so 15 % covers a tokenizer that splits some; a chars/4
# estimate of literal text is given half again; and templates stay under 32 tokens a
# request plus 8 a message (Llama 3's default system preamble is about 25).
ESTIMATED_SYNTH_RATIO = 1.15
ESTIMATED_TEXT_RATIO = 1.5
ESTIMATED_OVERHEAD = (32, 8)
_TRIM_ORDER = {"system": 1}  # trimmed last: a shared prefix stays shared


@dataclass(frozen=True, slots=True)
class ContextLimit:
    """The server's context length in tokens and where it was learnt."""

    max_model_len: int
    source: str  # "--max-model-len", "/v1/models max_model_len", "/props n_ctx", …, "assumed"
    max_prompt_tokens: int | None = None  # a separate input limit (TGI's max_input_tokens)

    @property
    def discovered(self) -> bool:
        return self.source != "assumed"


@dataclass(frozen=True, slots=True)
class PromptModel:
    """How the server counts a request's prompt (see the module docstring).

    `synth_ratio` is the server's tokens per rendered synthetic token (central, for
    rescaling); `synth_ratio_max` and `text_ratio_max` (per estimated token of literal
    text) are upper bounds for the fit; `synth_spread` is the standard deviation of the
    server's count per √word of synthetic text (0: every text counted alike). `overhead`
    maps a message count to the most template tokens measured with it;
    `overhead_per_message` bounds counts not measured.
    `exact` holds prompts the server counted, template included.
    """

    source: str  # how it was learnt: "/tokenize", "--tokenizer", "assumed", or a mix
    estimated: bool
    synth_ratio: float = 1.0
    synth_ratio_max: float = 1.0
    text_ratio_max: float = 1.0
    synth_spread: float = 0.0
    text_ratio: float = 1.0  # central, per estimated token of literal text
    text_spread: float = 0.0
    overhead: Mapping[int, int] = field(default_factory=dict)
    overhead_base: int = 0
    overhead_per_message: float = 0.0
    exact: Mapping[tuple[Turn, ...], int] = field(default_factory=dict)
    num_counted: int = 0  # /tokenize requests made

    @classmethod
    def assumed(cls, *, exact_text: bool) -> PromptModel:
        """No /tokenize: bounds only. `exact_text`: a local tokenizer makes the text exact."""
        base, per_message = ESTIMATED_OVERHEAD
        return cls(
            source="--tokenizer, template assumed" if exact_text else "assumed",
            estimated=True,
            synth_ratio_max=1.0 if exact_text else ESTIMATED_SYNTH_RATIO,
            text_ratio_max=1.0 if exact_text else ESTIMATED_TEXT_RATIO,
            overhead_base=base,
            overhead_per_message=per_message,
        )

    def template_tokens(self, num_messages: int) -> int:
        measured = self.overhead.get(num_messages)
        if measured is not None:
            return measured
        return math.ceil(self.overhead_base + self.overhead_per_message * num_messages)

    def synth_tokens(self, words: int) -> int:
        """A synthetic text of `words` words as the server counts it, at most (see the
        module docstring)."""
        return _bound(words, self.synth_ratio, self.synth_ratio_max, self.synth_spread)

    def text_tokens(self, estimated: int) -> int:
        """Literal text of `estimated` tokens (the text counter's) as the server counts it,
        at most: the same bound, over the literal turns sampled."""
        return _bound(estimated, self.text_ratio, self.text_ratio_max, self.text_spread)

    @property
    def rescale(self) -> float | None:
        """The ratio to regenerate synthetic text by, or None when it is close enough to 1."""
        off = abs(self.synth_ratio - 1.0) > RESCALE_TOLERANCE
        return self.synth_ratio if off and self.synth_ratio > 0 else None


def _bound(n: int, central: float, ratio_max: float, spread: float) -> int:
    """n tokens as the server counts them, at most: the highest ratio sampled, and at least
    `SPREAD_Z` standard deviations above the central count."""
    return math.ceil(max(n * ratio_max, n * central + SPREAD_Z * spread * math.sqrt(n)))


@dataclass(frozen=True, slots=True)
class CountedPrompt:
    """One prompt the server counted: each turn's (intended, counted, synthetic) and the whole.

    A synthetic turn's intended tokens are its `SynthText.num_tokens`; literal text's are
    what the fit's text counter says. `whole` is the request as the endpoint builds it
    (template included), None where the server could not count that.
    """

    turns: tuple[Turn, ...]
    parts: tuple[tuple[int, int, bool], ...]
    whole: int | None


def _ratio_max(pairs: Sequence[tuple[int, int]], central: float) -> float:
    long_enough = [c / i for i, c in pairs if i >= MIN_RATIO_TOKENS]
    return max([central, *long_enough])


def _spread(pairs: Sequence[tuple[int, int]], central: float) -> float:
    """The count's standard deviation per √word, over turns long enough that a split word
    at their ends is noise: a count c of i words has variance σ²·i about central·i, so
    Σ(c − central·i)² has expectation σ²·(Σi − Σi²/Σi) (central is fitted on the same
    turns; with one turn the spread is unknown, 0)."""
    long_enough = [(i, c) for i, c in pairs if i >= MIN_RATIO_TOKENS]
    words = sum(i for i, _ in long_enough)
    freedom = words - sum(i * i for i, _ in long_enough) / words if words else 0.0
    if freedom < 1.0:
        return 0.0
    return math.sqrt(sum((c - central * i) ** 2 for i, c in long_enough) / freedom)


def _overhead(counted: Sequence[CountedPrompt]) -> tuple[dict[int, int], float]:
    """Template tokens per message count (the most seen) and a per-message bound."""
    overhead: dict[int, int] = {}
    per_message = 0.0
    for prompt in counted:
        if prompt.whole is None:
            continue
        tokens = max(0, prompt.whole - sum(c for _, c, _ in prompt.parts))
        overhead[len(prompt.turns)] = max(overhead.get(len(prompt.turns), 0), tokens)
        per_message = max(per_message, tokens / len(prompt.turns))
    return overhead, per_message


def learn_prompt_model_from(
    counted: Sequence[CountedPrompt],
    *,
    form: str,
    exact_text: bool,
    num_counted: int,
    why_assumed: str = "",
) -> PromptModel:
    """The model a server's counts support; what they cannot say stays assumed.

    `why_assumed` says why nothing was counted where that is not "no /tokenize" (it did
    not answer in time); the model's source carries it, and the fit's warning says it.
    """
    assumed = PromptModel.assumed(exact_text=exact_text)
    if not counted:
        if why_assumed:
            return replace(assumed, source=f"{assumed.source} ({why_assumed})")
        return assumed
    synth = [(i, c) for p in counted for i, c, s in p.parts if s and i > 0]
    text = [(i, c) for p in counted for i, c, s in p.parts if not s and i > 0]
    central = sum(c for _, c in synth) / sum(i for i, _ in synth) if synth else 1.0
    text_central = sum(c for _, c in text) / sum(i for i, _ in text) if text else 0.0
    overhead, per_message = _overhead(counted)
    whole = bool(overhead)
    label = "/tokenize" if form == "vllm" else f"/tokenize ({form})"
    return PromptModel(
        source=label if whole else f"{label}, template assumed",
        estimated=not whole,
        synth_ratio=central,
        synth_ratio_max=_ratio_max(synth, central) if synth else assumed.synth_ratio_max,
        text_ratio_max=_ratio_max(text, text_central) if text else assumed.text_ratio_max,
        synth_spread=_spread(synth, central),
        text_ratio=text_central if text else assumed.text_ratio,
        text_spread=_spread(text, text_central) if text else 0.0,
        overhead=overhead,
        overhead_base=0 if whole else ESTIMATED_OVERHEAD[0],
        overhead_per_message=per_message if whole else ESTIMATED_OVERHEAD[1],
        exact={p.turns: p.whole for p in counted if p.whole is not None},
        num_counted=num_counted,
    )


def margin_tokens(prompt_tokens: int) -> int:
    return MARGIN_TOKENS + math.ceil(MARGIN_SHARE * prompt_tokens)


@dataclass(frozen=True, slots=True)
class FitReport:
    """What fitting did to one run's requests; `warnings()` says it in words."""

    max_model_len: int
    limit_source: str
    count_source: str
    estimated: bool
    num_requests: int = 0
    num_capped: int = 0
    capped_min: int | None = None  # the lowest max_tokens a capped request was given
    num_trimmed: int = 0
    rescale: float | None = None
    max_template_tokens: int = 0
    max_total_tokens: int = 0  # the largest predicted prompt (margin included) + max_tokens

    def merge(self, other: FitReport) -> FitReport:
        caps = [c for c in (self.capped_min, other.capped_min) if c is not None]
        return replace(
            other,
            num_requests=self.num_requests + other.num_requests,
            num_capped=self.num_capped + other.num_capped,
            capped_min=min(caps) if caps else None,
            num_trimmed=self.num_trimmed + other.num_trimmed,
            max_template_tokens=max(self.max_template_tokens, other.max_template_tokens),
            max_total_tokens=max(self.max_total_tokens, other.max_total_tokens),
        )

    def of_sent(self, sent: Sequence[tuple[str | None, int]]) -> FitReport:
        """The report over the requests actually sent: each one's `fit` label and max_tokens.

        A closed loop bounded by time plans far more requests than it sends.
        """
        capped = [tokens for label, tokens in sent if label and "capped" in label]
        return replace(
            self,
            num_requests=len(sent),
            num_capped=len(capped),
            capped_min=min(capped, default=None),
            num_trimmed=sum(1 for label, _ in sent if label and "trimmed" in label),
        )

    def to_json(self) -> dict[str, object]:
        return {
            "max_model_len": self.max_model_len,
            "limit_source": self.limit_source,
            "count_source": self.count_source,
            "estimated": self.estimated,
            "num_requests": self.num_requests,
            "num_capped": self.num_capped,
            "capped_min_tokens": self.capped_min,
            "num_trimmed": self.num_trimmed,
            "rescale": self.rescale,
            "max_template_tokens": self.max_template_tokens,
            "max_total_tokens": self.max_total_tokens,
        }

    def warnings(self) -> list[str]:
        context = f"the {self.max_model_len:,}-token context ({self.limit_source})"
        out = []
        if not self.limit_source or self.limit_source == "assumed":
            out.append(
                f"the server did not say its context length: {self.max_model_len:,} tokens "
                "was assumed; give --max-model-len if it is shorter."
            )
        if self.num_capped:
            out.append(
                f"{self.num_capped:,} of {self.num_requests:,} requests had max_tokens capped "
                f"(down to {self.capped_min:,}) to fit {context}: their outputs are shorter "
                "than the workload's."
            )
        if self.num_trimmed:
            out.append(
                f"{self.num_trimmed:,} prompts were longer than {context} allows and were trimmed."
            )
        if self.estimated and (self.num_capped or self.num_trimmed):
            out.append(_estimated_sentence(self.count_source))
        return out


def _estimated_sentence(count_source: str) -> str:
    if count_source.startswith("assumed"):
        why = count_source.removeprefix("assumed").strip(" ()") or "the server has no /tokenize"
        return (
            f"{why} and no --tokenizer was given: prompt lengths were estimated with room to "
            "spare for common tokenizers, so the fit errs long; give --tokenizer for exact ones."
        )
    return f"the chat template's tokens were assumed ({count_source}): the fit errs long."


TextCounter = Callable[[str], int]


class _Fitter:
    """Fits specs one by one against a limit and a model, counting what it changed."""

    def __init__(
        self, limit: ContextLimit, model: PromptModel, count_text: TextCounter | None
    ) -> None:
        self.limit = limit
        self.model = model
        self.count_text = count_text or estimate_tokens
        self._text_counts: dict[str, int] = {}
        self.num_capped = self.num_trimmed = self.max_template = self.max_total = 0
        self.capped_min: int | None = None

    def turn_tokens(self, content: str | SynthText) -> int:
        """The turn's text as the server counts it, at most."""
        if isinstance(content, SynthText):
            return self.model.synth_tokens(content.num_tokens)
        counted = self._text_counts.get(content)
        if counted is None:
            counted = self.count_text(content)
            if len(self._text_counts) < 100_000:
                self._text_counts[content] = counted
        return self.model.text_tokens(counted)

    def prompt_tokens(self, turns: tuple[Turn, ...]) -> int:
        """The request's prompt as the server counts it, template included, at most."""
        exact = self.model.exact.get(turns)
        if exact is not None:
            return exact
        template = self.model.template_tokens(len(turns))
        self.max_template = max(self.max_template, template)
        return template + sum(self.turn_tokens(t.content) for t in turns)

    def rescaled(self, turns: tuple[Turn, ...]) -> tuple[Turn, ...]:
        ratio = self.model.rescale
        if ratio is None:
            return turns
        return tuple(
            Turn(t.role, SynthText(max(1, round(t.content.num_tokens / ratio)), t.content.key))
            if isinstance(t.content, SynthText)
            else t
            for t in turns
        )

    def fit(self, spec: RequestSpec) -> RequestSpec:
        turns = self.rescaled(spec.turns)
        prompt = self.prompt_tokens(turns)
        budget = self._prompt_budget(spec.max_tokens)
        trimmed = prompt + margin_tokens(prompt) > budget
        if trimmed:
            turns = self._trim(turns, budget)
            prompt = self.prompt_tokens(turns)
            self.num_trimmed += 1
        room = self.limit.max_model_len - prompt - margin_tokens(prompt)
        max_tokens = max(1, min(spec.max_tokens, room))
        capped = max_tokens < spec.max_tokens
        if capped:
            self.num_capped += 1
            self.capped_min = min(self.capped_min or max_tokens, max_tokens)
        self.max_total = max(self.max_total, prompt + margin_tokens(prompt) + max_tokens)
        if turns == spec.turns and not capped:
            return spec
        labels = spec.labels
        if trimmed or capped:
            tag = ",".join(t for t, on in (("trimmed", trimmed), ("capped", capped)) if on)
            labels = (*labels, ("fit", tag))
        intended = spec.prompt_tokens if not trimmed else self._intended(turns)
        return replace(
            spec, turns=turns, prompt_tokens=intended, max_tokens=max_tokens, labels=labels
        )

    def _prompt_budget(self, max_tokens: int) -> int:
        """The most a prompt (margin included) may be before it must be trimmed."""
        limit = self.limit.max_model_len
        floor = max(MIN_FIT_OUTPUT, math.floor(limit * OUTPUT_FLOOR_SHARE))
        budget = limit - min(max_tokens, floor)
        if self.limit.max_prompt_tokens is not None:
            budget = min(budget, self.limit.max_prompt_tokens)
        return budget

    def _intended(self, turns: tuple[Turn, ...]) -> int:
        ratio = self.model.rescale or 1.0
        return sum(
            round(t.content.num_tokens * ratio)
            if isinstance(t.content, SynthText)
            else self.count_text(t.content)
            for t in turns
        )

    def _trim(self, turns: tuple[Turn, ...], budget: int) -> tuple[Turn, ...]:
        """Cut turns, longest non-system first, until the prompt and its margin fit."""
        out = list(turns)
        order = sorted(
            range(len(out)),
            key=lambda i: (_TRIM_ORDER.get(out[i].role, 0), -self.turn_tokens(out[i].content)),
        )
        for index in order:
            prompt = self.prompt_tokens(tuple(out))
            excess = prompt + margin_tokens(prompt) - budget
            if excess <= 0:
                break
            out[index] = self._cut(out[index], excess)
        return tuple(out)

    def _cut(self, turn: Turn, excess: int) -> Turn:
        """The turn shortened by at least `excess` server tokens (never below one)."""
        content = turn.content
        if isinstance(content, SynthText):
            fewer = math.ceil(excess / max(self.model.synth_ratio_max, 1e-9)) + 1
            return Turn(turn.role, replace(content, num_tokens=max(1, content.num_tokens - fewer)))
        have = self.turn_tokens(content)
        keep = max(0.0, 1.0 - (excess + 1) / max(have, 1))
        cut = content[: math.floor(len(content) * keep)]
        while cut and self.turn_tokens(cut) > max(1, have - excess):
            cut = cut[: max(0, len(cut) - max(1, len(cut) // 20))]
        return Turn(turn.role, cut.rsplit(" ", 1)[0] if " " in cut else cut)


def fit_specs(
    specs: Sequence[RequestSpec],
    limit: ContextLimit,
    model: PromptModel,
    *,
    count_text: TextCounter | None = None,
) -> tuple[tuple[RequestSpec, ...], FitReport]:
    """Every spec fitted to `limit` under `model`; `count_text` counts literal text."""
    fitter = _Fitter(limit, model, count_text)
    fitted = tuple(fitter.fit(spec) for spec in specs)
    report = FitReport(
        max_model_len=limit.max_model_len,
        limit_source=limit.source,
        count_source=model.source,
        estimated=model.estimated,
        num_requests=len(fitted),
        num_capped=fitter.num_capped,
        capped_min=fitter.capped_min,
        num_trimmed=fitter.num_trimmed,
        rescale=model.rescale,
        max_template_tokens=fitter.max_template,
        max_total_tokens=fitter.max_total,
    )
    return fitted, report


def fit_schedule(
    schedule: Schedule,
    limit: ContextLimit,
    model: PromptModel,
    *,
    count_text: TextCounter | None = None,
) -> tuple[Schedule, FitReport]:
    """`fit_specs` over a schedule; its deadlines and sessions are kept."""
    specs, report = fit_specs(schedule.specs, limit, model, count_text=count_text)
    return Schedule(specs, schedule.offsets_s, schedule.sessions), report
