"""loadgen, level 2: what one request to an OpenAI-compatible server is, before it is sent.

Takes a `ClientConfig` (base URL, model, endpoint, key, headers, timeouts), a
`TextRenderer` and a `RequestSpec`; gives the request's JSON body and headers,
the same for every client that sends it (`client`'s asyncio one, the Locust
users of `loadgen.locust`). The API key goes in the `Authorization` header and
in no repr.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import orjson

from infertriage.net import auth_headers
from infertriage.workload import RequestSpec, TextRenderer

__all__ = ["ClientConfig", "Endpoint", "prompt_fields", "request_body", "request_headers"]


class Endpoint(StrEnum):
    CHAT = "chat"
    COMPLETIONS = "completions"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    base_url: str  # ends in /v1
    model: str
    endpoint: Endpoint = Endpoint.CHAT
    api_key: str | None = field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    timeout_s: float = 600.0  # the whole request
    stall_timeout_s: float = 60.0  # no byte for this long
    connect_timeout_s: float = 10.0
    continuous_usage: bool = True  # ask for usage in every chunk (vLLM, SGLang)
    # send `ignore_eos` and `min_tokens` when a spec asks for exact lengths
    send_ignore_eos: bool = True
    keep_text: bool = False  # keep the output text, to count it with a local tokenizer

    @property
    def url(self) -> str:
        path = "/chat/completions" if self.endpoint is Endpoint.CHAT else "/completions"
        return self.base_url + path


def prompt_fields(renderer: TextRenderer, spec: RequestSpec, *, chat: bool) -> dict[str, object]:
    """The prompt part of a request body: `messages` for chat, else one `prompt` string."""
    messages = renderer.messages(spec.turns)
    if chat:
        return {"messages": [{"role": role, "content": text} for role, text in messages]}
    return {"prompt": "\n\n".join(text for _, text in messages)}


def request_body(cfg: ClientConfig, renderer: TextRenderer, spec: RequestSpec) -> bytes:
    """The JSON body of one streamed request (any client of the load: asyncio or Locust)."""
    stream_options: dict[str, bool] = {"include_usage": True}
    if cfg.continuous_usage:
        stream_options["continuous_usage_stats"] = True
    payload: dict[str, object] = {
        "model": cfg.model,
        "max_tokens": spec.max_tokens,
        "stream": True,
        "stream_options": stream_options,
    }
    payload.update(prompt_fields(renderer, spec, chat=cfg.endpoint is Endpoint.CHAT))
    if spec.ignore_eos and cfg.send_ignore_eos:
        # Exact output lengths: vLLM, SGLang and TensorRT-LLM honour both; `min_tokens`
        # also holds where `ignore_eos` is unknown, and servers ignore fields they lack.
        payload["ignore_eos"] = True
        payload["min_tokens"] = spec.max_tokens
    return orjson.dumps(payload)


def request_headers(config: ClientConfig) -> dict[str, str]:
    """The headers every request carries: JSON in, an event stream asked, the key if any.

    The stream is asked for uncompressed: a compressing proxy holds events back to fill
    its blocks, which would move every stamp (one compressed anyway is decoded).
    """
    return {
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
        "Accept-Encoding": "identity",
        **auth_headers(config.api_key, config.headers),
    }
