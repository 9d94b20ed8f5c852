"""loadgen, level 2: the server's `/tokenize` against the workload and against `usage`.

Takes the base URL (`…/v1`), the model, the endpoint, a few sent `RequestSpec`s
with the `usage.prompt_tokens` each got (None where none came), the renderer
that made their text and the request headers (the key included: sent, never
kept); gives a `TokenCheck`. Two comparisons over the sample's totals, each
judged against a 10 % limit:

- **workload**: the prompts' text as the server counts it (no chat template,
  no special tokens: `/tokenize` of each message) against the lengths the
  workload intended; a miss means the synthetic text is not N tokens of the
  served model's tokenizer (give `--tokenizer`).
- **usage**: the prompt as the endpoint sends it (`messages` through the chat
  template, or the completion's `prompt` with its special tokens) against the
  `usage.prompt_tokens` the server reported for the same request; a miss
  means the server's own counts disagree.

The forms are the engine adapters' (`engines.tokenize_forms()`), tried in the
registry's order until one answers: vLLM's (`{"model", "prompt"|"messages"}`
→ `count`; the twin's too), then llama.cpp's (`{"content"}` → `tokens`), which
applies no chat template, so a chat run has no usage comparison there. A
server without `/tokenize` gives `form="none"`. Errors never raise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aiohttp
import orjson

from infertriage.engines import TokenizeForm, tokenize_forms
from infertriage.loadgen.client import Endpoint, prompt_fields
from infertriage.loadgen.results import TokenCheck
from infertriage.loadgen.runner import blocking
from infertriage.net import open_session, root_url
from infertriage.workload import RequestSpec, TextRenderer

__all__ = ["TOKEN_CHECK_LIMIT", "ServerTokenizer", "check_tokens", "token_check_warnings"]

TOKEN_CHECK_LIMIT = 0.10  # the disagreement above which bench warns
_TIMEOUT_S = 5.0


class ServerTokenizer:
    """One server's `/tokenize`, in whichever form it answers; `num_requests` counts the asks.

    An ask that got no answer (a timeout, a cut connection) says nothing of the form:
    `unanswered` is set and the form stays unknown, so a slow server is not taken for one
    without `/tokenize`. `timeout` bounds each ask (the session's, unless changed).
    """

    def __init__(self, session: aiohttp.ClientSession, root: str, model: str) -> None:
        self.session = session
        self.root = root
        self.model = model
        self.forms = tokenize_forms()
        self.form = ""  # a form's name ("vllm", "llama.cpp") once known; "none": none answers
        self.num_requests = 0
        self.unanswered = False
        self.timeout: aiohttp.ClientTimeout = session.timeout

    async def _post(self, payload: Mapping[str, object], path: str) -> object:
        self.num_requests += 1
        try:
            async with self.session.post(
                self.root + path, data=orjson.dumps(payload), timeout=self.timeout
            ) as resp:
                if resp.status != 200:
                    return None
                return orjson.loads(await resp.read())
        except orjson.JSONDecodeError:
            return None
        except (aiohttp.ClientError, TimeoutError, OSError):
            self.unanswered = True
            return None

    def _known(self) -> TokenizeForm | None:
        return next((f for f in self.forms if f.name == self.form), None)

    async def _count(self, form: TokenizeForm, fields: Mapping[str, object]) -> int | None:
        body = form.body(self.model, fields)
        return None if body is None else form.count(await self._post(body, form.path))

    async def text(self, text: str) -> int | None:
        """The tokens of plain text: no template, no special tokens."""
        fields = {"prompt": text, "add_special_tokens": False}
        if self.form:
            known = self._known()
            return await self._count(known, fields) if known is not None else None
        for i, form in enumerate(self.forms):
            count = await self._count(form, fields)
            if count is not None:
                self.form = form.name
                return count
            if self.unanswered and i < len(self.forms) - 1:
                return None  # no answer is not "no /tokenize": the form stays unknown
        self.form = "none"
        return None

    async def request(self, fields: Mapping[str, object]) -> int | None:
        """The tokens of a request's prompt as the endpoint builds it (template included);
        None where the form cannot count it (llama.cpp's applies no chat template)."""
        known = self._known()
        return await self._count(known, fields) if known is not None else None

    async def templated(self, messages: object) -> int | None:
        """A form whose `/tokenize` applies no chat template (llama.cpp): the template applied
        by its own endpoint (`/apply-template`), then counted."""
        known = self._known()
        if known is None or not known.template_path or known.read_template is None:
            return None
        prompt = known.read_template(await self._post({"messages": messages}, known.template_path))
        return await self._count(known, {"prompt": prompt}) if prompt is not None else None


def _sum(counts: Sequence[int | None]) -> int | None:
    return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)


async def _check_tokens(
    *,
    base_url: str,
    model: str,
    endpoint: Endpoint,
    sample: Sequence[tuple[RequestSpec, int | None]],
    renderer: TextRenderer,
    headers: Mapping[str, str],
) -> TokenCheck:
    """Count the sample's prompts with the server's `/tokenize`; see the module docstring."""
    chat = endpoint is Endpoint.CHAT
    all_headers = {**headers, "Content-Type": "application/json"}
    intended = sum(spec.prompt_tokens for spec, _ in sample)
    text_total = request_total = usage_total = 0
    num_usage = 0
    async with open_session(
        timeout_s=_TIMEOUT_S * (1 + 2 * len(sample)),
        read_timeout_s=_TIMEOUT_S,
        headers=all_headers,
    ) as session:
        tokenize = ServerTokenizer(session, root_url(base_url), model)
        for spec, usage in sample:
            texts = [text for _, text in renderer.messages(spec.turns)]
            counted = _sum([await tokenize.text(text) for text in texts])
            if counted is None:
                form = tokenize.form or ("" if tokenize.unanswered else "none")
                return TokenCheck(form, 0, 0, None, None, None)
            text_total += counted
            whole = await tokenize.request(prompt_fields(renderer, spec, chat=chat))
            if whole is not None and usage is not None:
                request_total += whole
                usage_total += usage
                num_usage += 1
    return TokenCheck(
        form=tokenize.form,
        num_prompts=len(sample),
        intended_tokens=intended,
        server_tokens=text_total,
        usage_tokens=usage_total if num_usage == len(sample) and num_usage else None,
        request_tokens=request_total if num_usage == len(sample) and num_usage else None,
    )


# Count the sample's prompts with the server's `/tokenize` after the load, blocking.
check_tokens = blocking(_check_tokens)


def _off(measured: int, reference: int) -> float:
    return measured / reference - 1 if reference else 0.0


def token_check_warnings(check: TokenCheck, *, have_tokenizer: bool) -> list[str]:
    """One warning per comparison that disagrees by more than `TOKEN_CHECK_LIMIT`."""
    out = []
    n = f"{check.num_prompts} sampled prompt{'s' if check.num_prompts != 1 else ''}"
    if (
        check.server_tokens is not None
        and abs(_off(check.server_tokens, check.intended_tokens)) > TOKEN_CHECK_LIMIT
    ):
        hint = (
            "is the tokenizer file the served model's?"
            if have_tokenizer
            else "give --tokenizer the served model's tokenizer.json for exact lengths."
        )
        out.append(
            f"the server's /tokenize counts {check.server_tokens:,} prompt tokens in {n} where "
            f"the workload intended {check.intended_tokens:,} "
            f"({_off(check.server_tokens, check.intended_tokens):+.0%}): {hint}"
        )
    if (
        check.usage_tokens is not None
        and check.request_tokens is not None
        and abs(_off(check.usage_tokens, check.request_tokens)) > TOKEN_CHECK_LIMIT
    ):
        out.append(
            f"the server's usage.prompt_tokens add up to {check.usage_tokens:,} for {n} where "
            f"its own /tokenize counts {check.request_tokens:,} "
            f"({_off(check.usage_tokens, check.request_tokens):+.0%}): its token counts disagree."
        )
    return out
