"""workload, level 1: deterministic prompt text of a given token length.

Takes a `SynthText` (a token count and a key) and gives text. Without a
tokenizer the rule is: N words drawn, seeded by the key, from a list of common
English words that are each one token (with their leading space) in the BPE
vocabularies of GPT-2, cl100k/o200k, Llama 2/3, Mistral and Qwen; so N words ≈
N tokens, and a chat template adds its few framing tokens on top. Different
keys diverge from the first word, so unrelated requests never share a prefix
block by accident. With a local `tokenizer.json` (the optional `tokenizers`
package, imported only then) the text is cut to exactly N tokens of that
tokenizer and lengths can be cross-checked.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from infertriage.schemas import UserError
from infertriage.schemas.inputs import why_missing
from infertriage.workload.spec import SynthText, Turn

__all__ = [
    "ONE_TOKEN_WORDS",
    "LocalTokenizer",
    "TextRenderer",
    "TokenCounter",
    "estimate_tokens",
    "words_text",
]

_WORDS = """the of and to in is that for it as was with be by on not he this are or his from at
    which but have an they you were her she there one all we their can has been more will if
    would who so no time about out up what said other into its some them than two only could
    new may first then these also any like when people well just after over made way many
    before must through back years where much your down should because each those year very
    good make most see work long day get used man world life part house state water place
    school city small never under last might great old still own found same high between both
    every home right go three know take while another few number system thought group end
    point give country hand fact case week company program question government"""
ONE_TOKEN_WORDS: tuple[str, ...] = tuple(_WORDS.split())
# Characters per token of English text, for estimates when no tokenizer or usage is at hand.
CHARS_PER_TOKEN = 4.0


@lru_cache(maxsize=512)
def words_text(num_tokens: int, key: int) -> str:
    """`num_tokens` one-token words, the sequence fixed by `key`."""
    if num_tokens <= 0:
        return ""
    rng = np.random.default_rng(key & 0xFFFF_FFFF_FFFF_FFFF)
    picks = rng.integers(0, len(ONE_TOKEN_WORDS), num_tokens)
    return " ".join(ONE_TOKEN_WORDS[i] for i in picks.tolist())


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...

    def fit(self, text: str, num_tokens: int) -> str: ...


class LocalTokenizer:
    """A Hugging Face `tokenizer.json` read from disk; never touches a model hub."""

    def __init__(self, path: Path) -> None:
        try:
            tokenizers = importlib.import_module(
                "tokenizers"
            )  # the optional extra, only when asked
        except ImportError:
            raise UserError(
                "--tokenizer needs the optional `tokenizers` package "
                "(pip install 'infertriage[tokenizers]')."
            ) from None
        if not path.is_file():
            said = "is not a file" if path.exists() else why_missing(path)
            raise UserError(f"tokenizer file {path} {said}.")
        try:
            self._tok: Any = tokenizers.Tokenizer.from_file(str(path))
        except Exception as err:  # the Rust side raises a bare Exception
            raise UserError(f"{path} is not a tokenizer.json this tokenizers can read.") from err
        self.path = path

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def fit(self, text: str, num_tokens: int) -> str:
        """Cut `text` to exactly `num_tokens` tokens (when it has that many)."""
        ids = self._tok.encode(text, add_special_tokens=False).ids[:num_tokens]
        out: str = self._tok.decode(ids)
        # Decoding and re-encoding can merge at the cut; trim word by word until it fits.
        while self.count(out) > num_tokens and " " in out:
            out = out.rsplit(" ", 1)[0]
        return out


class TextRenderer:
    """Turns specs' synthetic text into strings; exact to a tokenizer when one is given."""

    def __init__(self, tokenizer: TokenCounter | None = None) -> None:
        self.tokenizer = tokenizer
        self._exact: dict[tuple[int, int], str] = {}

    def text(self, content: str | SynthText) -> str:
        if isinstance(content, str):
            return content
        if self.tokenizer is None:
            return words_text(content.num_tokens, content.key)
        cache_key = (content.num_tokens, content.key)
        hit = self._exact.get(cache_key)
        if hit is None:
            # Over-generate, then cut: a few words may split into several tokens.
            draft = words_text(content.num_tokens + content.num_tokens // 4 + 8, content.key)
            hit = self.tokenizer.fit(draft, content.num_tokens)
            if len(self._exact) < 512:
                self._exact[cache_key] = hit
        return hit

    def messages(self, turns: tuple[Turn, ...]) -> list[tuple[str, str]]:
        return [(turn.role, self.text(turn.content)) for turn in turns]


def estimate_tokens(text: str) -> int:
    """A characters-per-token estimate: the last resort, with neither usage nor a tokenizer."""
    return max(1, round(len(text) / CHARS_PER_TOKEN)) if text else 0
