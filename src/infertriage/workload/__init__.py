"""workload, level 1: what to send and when, as pure, seed-deterministic functions.

Takes a workload spec (`chat-mix`, `synthetic:…`, `prefix:…`, `multiturn:…`, `agentic:…`,
`sharegpt:FILE`, `jsonl:FILE`, `trace:FILE`) and an arrival process; gives a
`Schedule` of `RequestSpec`s on absolute deadlines, the deterministic text
their prompts are rendered from, and the specs fitted to a server's context
(`fit`).
"""

from infertriage.workload.arrivals import ArrivalKind, Arrivals, make_offsets, parse_arrivals
from infertriage.workload.build import (
    CHAT_MIX_OUTPUT,
    CHAT_MIX_PROMPT,
    DEFAULT_MAX_MODEL_LEN,
    DEFAULT_WORKLOAD,
    WorkloadKind,
    WorkloadSpec,
    closed_loop_count,
    make_schedule,
    make_specs,
    parse_workload,
)
from infertriage.workload.fit import (
    ContextLimit,
    CountedPrompt,
    FitReport,
    PromptModel,
    fit_schedule,
    fit_specs,
    learn_prompt_model_from,
)
from infertriage.workload.lengths import LengthDist, LengthKind, parse_length
from infertriage.workload.prefix import PrefixMark, prefix_marks
from infertriage.workload.sources import DatasetItem, read_jsonl_requests, read_sharegpt
from infertriage.workload.spec import RequestSpec, Schedule, Session, SessionStep, SynthText, Turn
from infertriage.workload.text import (
    ONE_TOKEN_WORDS,
    LocalTokenizer,
    TextRenderer,
    TokenCounter,
    estimate_tokens,
    words_text,
)

__all__ = [
    "CHAT_MIX_OUTPUT",
    "CHAT_MIX_PROMPT",
    "DEFAULT_MAX_MODEL_LEN",
    "DEFAULT_WORKLOAD",
    "ONE_TOKEN_WORDS",
    "ArrivalKind",
    "Arrivals",
    "ContextLimit",
    "CountedPrompt",
    "DatasetItem",
    "FitReport",
    "LengthDist",
    "LengthKind",
    "LocalTokenizer",
    "PrefixMark",
    "PromptModel",
    "RequestSpec",
    "Schedule",
    "Session",
    "SessionStep",
    "SynthText",
    "TextRenderer",
    "TokenCounter",
    "Turn",
    "WorkloadKind",
    "WorkloadSpec",
    "closed_loop_count",
    "estimate_tokens",
    "fit_schedule",
    "fit_specs",
    "learn_prompt_model_from",
    "make_offsets",
    "make_schedule",
    "make_specs",
    "parse_arrivals",
    "parse_length",
    "parse_workload",
    "prefix_marks",
    "read_jsonl_requests",
    "read_sharegpt",
    "words_text",
]
