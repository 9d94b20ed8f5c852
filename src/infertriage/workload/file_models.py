"""workload, level 1: the workload files `--workload jsonl:FILE` and `trace:FILE` read, as models.

Gives `JsonlRequest`, one line of a custom JSONL workload as `workload.sources`
reads it (its JSON Schema is published as `schemas/workload-jsonl.schema.json`):
a request is `prompt` (text), `messages` (a chat: role and content each) or only
a length (`input_length`, a Mooncake-style trace line, gets synthetic text of
that length); `max_tokens` (or `output_tokens`, `output_length`) is its output
budget, `prompt_tokens` (or `input_length`, `input_tokens`) its prompt length,
`timestamp` (seconds, or `timestamp_ms`) when to send it on replay. Of the keys
naming one thing the first present is read; other keys are ignored. The reader
checks each line itself; a test checks the two agree on the lines they take.
"""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    StrictFloat,
    StrictInt,
    model_validator,
)

__all__ = ["JsonlMessage", "JsonlRequest"]

_Count = NonNegativeInt | None
_Stamp = StrictInt | StrictFloat | None
_ONE_OF = ("prompt", "messages", "prompt_tokens", "input_length", "input_tokens")


class JsonlMessage(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    role: str
    content: str


class JsonlRequest(BaseModel):
    """One line of a JSONL workload: one request."""

    model_config = ConfigDict(
        extra="allow",
        strict=True,
        json_schema_extra={"anyOf": [{"required": [key]} for key in _ONE_OF]},
    )

    prompt: str | None = None
    messages: list[JsonlMessage] | None = Field(default=None, min_length=1)
    prompt_tokens: _Count = None
    input_length: _Count = None
    input_tokens: _Count = None
    max_tokens: _Count = None
    output_tokens: _Count = None
    output_length: _Count = None
    timestamp: _Stamp = Field(default=None, description="seconds from the trace's start")
    timestamp_ms: _Stamp = Field(default=None, description="milliseconds")

    @model_validator(mode="after")
    def _a_request(self) -> JsonlRequest:
        if not any(getattr(self, key) is not None for key in _ONE_OF):
            raise ValueError("a request needs `prompt`, `messages` or `input_length`")
        return self
