"""twin, level 2: the API-server front end: tokenization rule, chat template, CPU costs.

Takes prompt text (or chat messages) and the scenario's front-end costs; gives
token ids, the text of output tokens, and real CPU work on the calling thread.

The tokenization rule (deterministic, documented so that `/tokenize`, the
`usage` object and the streamed text agree):

- A token is a run of up to 8 non-space characters together with the
  whitespace before it: `re.findall(r"\\s*\\S{1,8}", text)`. Whitespace at the
  very end of a text belongs to no token. "Hello, world" is 2 tokens; a
  20-letter word is 3.
- A token's id is the CRC-32 of its UTF-8 bytes modulo the vocabulary size,
  so equal text gives equal ids and the prefix cache can hit.
- The chat template is `<|role|>` (one token), the message's tokens and
  `<|end|>` (one token) per message, then `<|assistant|>` (one token).
- Output token id `i` becomes the text `" " + WORDS[i % len(WORDS)]`; every
  word is at most 8 letters, so re-tokenizing streamed text with the rule above
  gives back exactly the tokens that `usage.completion_tokens` counts.

CPU costs are spent by spinning on `time.perf_counter_ns()`: real CPU on the
thread that serves HTTP, as tokenization and detokenization are in a Python
API server, so a saturated front end delays every stream it serves.
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Mapping, Sequence

from infertriage.twin.scenario_model import FrontendSettings

__all__ = [
    "WORDS",
    "FrontEnd",
    "apply_chat_template",
    "spin_cpu",
    "split_tokens",
]

_TOKEN = re.compile(r"\s*\S{1,8}")
_WORD_LIST = """the of and to in is was for that on as with by at from his it an were are which
    this be or has had not first one their its new after who they have her she two been
    other when there all during into school time may years more most only over city some
    world would where later up such used many can state about national out known
    university united then made team american while part well between year being both
    under film season group three through since game series number people each around
    including south music against until north called any high work second like early
    government name history within became several area four these album family his own
    left home also where system record won did could local public long place best club
    final main based country make open five them life took back large around river
    began party town road club line old included another way member great house army
    early same end form last before main use three form band day top top good west
    east near small data model token cache batch queue graph kernel memory block"""
# one token each: at most 8 letters, no repeats
WORDS: tuple[str, ...] = tuple(dict.fromkeys(w for w in _WORD_LIST.split() if len(w) <= 8))


def split_tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def token_id(token: str, vocab_size: int) -> int:
    return zlib.crc32(token.encode("utf-8")) % vocab_size


def apply_chat_template(messages: Sequence[Mapping[str, object]]) -> list[str]:
    """The chat template as tokens (see the module docstring)."""
    tokens: list[str] = []
    for message in messages:
        tokens.append(f"<|{message.get('role', 'user')}|>")
        tokens.extend(split_tokens(_content_text(message.get("content", ""))))
        tokens.append("<|end|>")
    tokens.append("<|assistant|>")
    return tokens


def _content_text(content: object) -> str:
    """A message's text: a string, or the text parts of an OpenAI content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return " ".join(str(p) for p in parts)
    return "" if content is None else str(content)


def spin_cpu(seconds: float) -> None:
    """Burn `seconds` of CPU on this thread."""
    if seconds <= 0:
        return
    deadline = time.perf_counter_ns() + int(seconds * 1e9)
    while time.perf_counter_ns() < deadline:
        pass


class FrontEnd:
    """Tokenize, detokenize and serialize, paying the scenario's CPU cost for each.

    The cost is the whole of the work: the real Python work of tokenizing (or of
    serializing) counts toward it, and only the rest is spun, so the front end
    spends what the scenario says (as `simulate`'s `VirtualFrontend` does) unless
    the real work alone takes longer.
    """

    def __init__(self, settings: FrontendSettings, vocab_size: int) -> None:
        self.settings = settings
        self.vocab_size = vocab_size
        self.busy_s = 0.0  # CPU seconds spent on front-end work (for the scenario signature)

    def _spend(self, seconds: float, started_ns: int) -> None:
        """Spin until `seconds` after `started_ns` (when the work began)."""
        deadline = started_ns + int(seconds * 1e9)
        now = time.perf_counter_ns()
        while now < deadline:
            now = time.perf_counter_ns()
        self.busy_s += (now - started_ns) * 1e-9

    def tokenize(self, tokens: Sequence[str], started_ns: int | None = None) -> list[int]:
        """Token ids; `started_ns` (`perf_counter_ns`) is when splitting the text began."""
        start = time.perf_counter_ns() if started_ns is None else started_ns
        ids = [token_id(token, self.vocab_size) for token in tokens]
        self._spend(len(tokens) * self.settings.tokenize_us_per_token * 1e-6, start)
        return ids

    def detokenize(self, token_ids: Sequence[int]) -> str:
        start = time.perf_counter_ns()
        text = "".join(" " + WORDS[i % len(WORDS)] for i in token_ids)
        self._spend(len(token_ids) * self.settings.detokenize_us_per_token * 1e-6, start)
        return text

    def serialize_cost(self, started_ns: int | None = None) -> None:
        """One chunk's serialization; `started_ns` is when its encoding began."""
        start = time.perf_counter_ns() if started_ns is None else started_ns
        self._spend(self.settings.serialize_us_per_chunk * 1e-6, start)
