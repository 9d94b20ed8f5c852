"""engines, level 0½: what every OpenAI-compatible server shares — its model list.

Takes the parsed JSON of `GET /v1/models`; gives a `ModelList`: the ids
listed, the cards (the entries that are objects, in order; their fields —
vLLM's `max_model_len`, llama.cpp's `meta.n_ctx` — are read by each
engine's adapter) and, when the document is not a well-formed list, what is
wrong with it in a few words. The one reader of that document.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ModelList", "read_model_list"]


@dataclass(frozen=True, slots=True)
class ModelList:
    ids: tuple[str, ...]  # of the cards that have an id
    cards: tuple[Mapping[str, Any], ...]  # the entries that are JSON objects
    problem: str = ""  # "" for a list of cards that each have an id

    @property
    def is_list(self) -> bool:
        """The document had a `data` list (its entries may still be odd)."""
        return self.problem in {"", "an entry has no id"}


def read_model_list(document: Any) -> ModelList:
    """The model list of a `/v1/models` answer (see the module docstring)."""
    data = document.get("data") if isinstance(document, Mapping) else None
    if not isinstance(data, list):
        return ModelList((), (), "no data list")
    cards = tuple(entry for entry in data if isinstance(entry, Mapping))
    ids = tuple(str(card["id"]) for card in cards if card.get("id"))
    return ModelList(ids, cards, "" if len(ids) == len(data) else "an entry has no id")
