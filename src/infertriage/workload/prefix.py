"""workload, level 1: what a prompt's prefix is, as marks a prefix-reuse count can compare.

Takes a request's messages (`Turn`s) and, optionally, a counter of literal text; gives
one mark per message: a digest of every message up to and including it, and the
prompt's token count so far. Two prompts share their first k messages exactly when
their k-th digests are equal, so the longest prefix a request shares with any earlier
one is found by looking its digests up in the set of those already sent. Token counts
are exact for synthetic text (the generator built it from pieces of known length);
literal text (datasets) is counted with the local tokenizer when one is given, else
estimated at four characters a token (`text.estimate_tokens`). A chat template's few
framing tokens per message are not counted. Digests are BLAKE2b (8 bytes), stable
across processes, unlike Python's `hash`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from infertriage.workload.spec import SynthText, Turn
from infertriage.workload.text import estimate_tokens

__all__ = ["PrefixMark", "prefix_marks"]

PrefixMark = tuple[str, int]  # (digest of the messages so far, prompt tokens so far)


def prefix_marks(
    turns: tuple[Turn, ...], count_text: Callable[[str], int] | None = None
) -> tuple[PrefixMark, ...]:
    """One mark per message: the chained digest of the messages so far, and their tokens."""
    chain = hashlib.blake2b(digest_size=8)
    marks: list[PrefixMark] = []
    total = 0
    for turn in turns:
        content = turn.content
        if isinstance(content, SynthText):
            piece, num = f"s{content.num_tokens}:{content.key}", content.num_tokens
        else:
            piece = "t" + content
            num = count_text(content) if count_text is not None else estimate_tokens(content)
        data = f"{turn.role}\0{piece}".encode()
        chain.update(len(data).to_bytes(8, "little") + data)
        total += num
        marks.append((chain.hexdigest(), total))
    return tuple(marks)
