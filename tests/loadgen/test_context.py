"""The server's context length, from each engine's own endpoint, against a real loopback server.

The documents are what the engines answer: llama.cpp's from `tests/data/llama_cpp`
(a real llama-server's `/v1/models` and `/props`), SGLang's `/get_server_info` and
TGI's `/info` fields as their servers name them.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from infertriage.loadgen.context import find_context_limit, limit_from_models
from infertriage.workload import ContextLimit

DATA = Path(__file__).parents[1] / "data" / "llama_cpp"
LLAMA_MODELS = json.loads((DATA / "models.json").read_text())
LLAMA_PROPS = json.loads((DATA / "props.json").read_text())


def _ask(documents: Mapping[str, Any], *, model: str | None, override: int | None = None) -> Any:
    """Serve `documents` (path → JSON; POST /tokenize too) on 127.0.0.1 and ask for the limit."""

    async def answer(request: web.Request) -> web.StreamResponse:
        document = documents.get(request.path)
        if document is None:
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response(document)

    async def main() -> ContextLimit | None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", answer)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        root = f"http://127.0.0.1:{runner.addresses[0][1]}"
        try:
            async with aiohttp.ClientSession() as session:
                return await find_context_limit(session, root, model=model, override=override)
        finally:
            await runner.cleanup()

    return asyncio.run(main())


def test_vllm_and_an_override() -> None:
    models = {"data": [{"id": "a", "max_model_len": 4096}, {"id": "b", "max_model_len": 2048}]}
    assert _ask({"/v1/models": models}, model="b") == ContextLimit(2048, "/v1/models max_model_len")
    assert _ask({"/v1/models": models}, model=None).max_model_len == 4096
    assert _ask({"/v1/models": models}, model="b", override=1000) == ContextLimit(
        1000, "--max-model-len"
    )


def test_llama_cpp_from_models_then_props_never_the_trained_length() -> None:
    assert LLAMA_MODELS["data"][0]["meta"]["n_ctx_train"] == 4096
    found = _ask({"/v1/models": LLAMA_MODELS}, model="tiny-llama-v1")
    assert found == ContextLimit(512, "/v1/models meta.n_ctx")
    older = copy.deepcopy(LLAMA_MODELS)
    del older["data"][0]["meta"]["n_ctx"]  # llama-server before meta.n_ctx: only /props says
    found = _ask({"/v1/models": older, "/props": LLAMA_PROPS}, model="tiny-llama-v1")
    assert found == ContextLimit(512, "/props n_ctx")


def test_sglang_and_tgi_with_their_prompt_limits() -> None:
    sglang = {"context_length": 32768, "max_req_input_len": 32762, "version": "0.4.6"}
    found = _ask({"/v1/models": {"data": [{"id": "m"}]}, "/get_server_info": sglang}, model="m")
    assert found == ContextLimit(32768, "/get_server_info context_length", 32762)
    tgi = {"model_id": "m", "max_total_tokens": 4096, "max_input_tokens": 4095}
    found = _ask({"/v1/models": {"data": [{"id": "m"}]}, "/info": tgi}, model="m")
    assert found == ContextLimit(4096, "/info max_total_tokens", 4095)
    tgi_1 = {"model_id": "m", "max_total_tokens": 2048, "max_input_length": 1024}
    assert _ask({"/info": tgi_1}, model="m") == ContextLimit(2048, "/info max_total_tokens", 1024)


def test_tokenize_last_and_nothing_at_all() -> None:
    tokenize = {"count": 1, "max_model_len": 8192, "tokens": [1]}
    found = _ask({"/v1/models": {"data": [{"id": "m"}]}, "/tokenize": tokenize}, model="m")
    assert found == ContextLimit(8192, "/tokenize max_model_len")
    assert _ask({"/v1/models": {"data": [{"id": "m"}]}}, model="m") is None


@pytest.mark.parametrize(
    "entries",
    [[], [{"id": "m", "max_model_len": 0}], [{"id": "m", "max_model_len": True}], ["junk"]],
)
def test_cards_that_say_nothing(entries: list[Any]) -> None:
    assert limit_from_models(entries, "m") is None
