"""workload, level 1: what to send and when, as pure, seed-deterministic functions.

Takes a workload spec (`chat-mix`, `synthetic:…`, `prefix:…`, `multiturn:…`, `agentic:…`,
`sharegpt:FILE`, `jsonl:FILE`, `trace:FILE`) and an arrival process; gives a
`Schedule` of `RequestSpec`s on absolute deadlines, the deterministic text
their prompts are rendered from, and the specs fitted to a server's context
(`fit`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infertriage.schemas.lazy import lazy_exports

if TYPE_CHECKING:
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
    from infertriage.workload.spec import (
        RequestSpec,
        Schedule,
        Session,
        SessionStep,
        SynthText,
        Turn,
    )
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

__getattr__ = lazy_exports(
    __name__,
    {
        "ArrivalKind": "infertriage.workload.arrivals",
        "Arrivals": "infertriage.workload.arrivals",
        "make_offsets": "infertriage.workload.arrivals",
        "parse_arrivals": "infertriage.workload.arrivals",
        "CHAT_MIX_OUTPUT": "infertriage.workload.build",
        "CHAT_MIX_PROMPT": "infertriage.workload.build",
        "DEFAULT_MAX_MODEL_LEN": "infertriage.workload.build",
        "DEFAULT_WORKLOAD": "infertriage.workload.build",
        "WorkloadKind": "infertriage.workload.build",
        "WorkloadSpec": "infertriage.workload.build",
        "closed_loop_count": "infertriage.workload.build",
        "make_schedule": "infertriage.workload.build",
        "make_specs": "infertriage.workload.build",
        "parse_workload": "infertriage.workload.build",
        "ContextLimit": "infertriage.workload.fit",
        "CountedPrompt": "infertriage.workload.fit",
        "FitReport": "infertriage.workload.fit",
        "PromptModel": "infertriage.workload.fit",
        "fit_schedule": "infertriage.workload.fit",
        "fit_specs": "infertriage.workload.fit",
        "learn_prompt_model_from": "infertriage.workload.fit",
        "LengthDist": "infertriage.workload.lengths",
        "LengthKind": "infertriage.workload.lengths",
        "parse_length": "infertriage.workload.lengths",
        "PrefixMark": "infertriage.workload.prefix",
        "prefix_marks": "infertriage.workload.prefix",
        "DatasetItem": "infertriage.workload.sources",
        "read_jsonl_requests": "infertriage.workload.sources",
        "read_sharegpt": "infertriage.workload.sources",
        "RequestSpec": "infertriage.workload.spec",
        "Schedule": "infertriage.workload.spec",
        "Session": "infertriage.workload.spec",
        "SessionStep": "infertriage.workload.spec",
        "SynthText": "infertriage.workload.spec",
        "Turn": "infertriage.workload.spec",
        "ONE_TOKEN_WORDS": "infertriage.workload.text",
        "LocalTokenizer": "infertriage.workload.text",
        "TextRenderer": "infertriage.workload.text",
        "TokenCounter": "infertriage.workload.text",
        "estimate_tokens": "infertriage.workload.text",
        "words_text": "infertriage.workload.text",
    },
)
