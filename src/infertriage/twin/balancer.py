"""twin, level 2: which data-parallel rank (or P/D instance) takes a request.

Takes each rank's load (`RankLoad`: requests running and waiting there, the
router's own count, so a burst routed between two engine steps is seen at
once) and the request's prompt token ids; gives the rank's index. Policies:

- `least_loaded`: vLLM's own DP front end (`DPLBAsyncMPClient`): the rank with
  the least `waiting × 4 + running`, the lowest index on a tie;
- `round_robin`: each rank in turn, blind to load and to prefixes (an external
  L4 balancer);
- `prefix_aware`: the rank that already holds the longest run of the prompt's
  leading KV blocks (chained block hashes, as the engines' prefix caches key
  them), as cache-aware routers do (SGLang's router, llm-d's prefix scorer);
  least loaded when no rank holds the first block (of equal loads, the rank that
  remembers the fewest blocks, as SGLang's router picks the smallest tree), or
  when the holder's load is more than `balance_slack` requests above the least
  loaded rank's.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from infertriage.twin.blocks import NONE_HASH, hash_block_tokens

__all__ = [
    "Balancer",
    "LeastLoaded",
    "PrefixAware",
    "RankLoad",
    "RoundRobin",
    "make_balancer",
]

_MAX_PREFIX_BLOCKS = 64  # leading blocks a prefix-aware router hashes per prompt
_MAX_REMEMBERED = 200_000  # block hashes remembered per rank (least recently routed go)


@dataclass(frozen=True, slots=True)
class RankLoad:
    running: int
    waiting: int

    @property
    def score(self) -> int:
        """vLLM's DP load score: `waiting × 4 + running`."""
        return self.waiting * 4 + self.running


class Balancer(Protocol):
    def pick(self, prompt_token_ids: Sequence[int], loads: Sequence[RankLoad]) -> int:
        """The index of the rank that takes this request."""
        ...


def _least_loaded(loads: Sequence[RankLoad]) -> int:
    return min(range(len(loads)), key=lambda i: (loads[i].score, i))


class LeastLoaded:
    def pick(self, prompt_token_ids: Sequence[int], loads: Sequence[RankLoad]) -> int:
        return _least_loaded(loads)


class RoundRobin:
    def __init__(self) -> None:
        self._next = 0

    def pick(self, prompt_token_ids: Sequence[int], loads: Sequence[RankLoad]) -> int:
        rank = self._next % len(loads)
        self._next = rank + 1
        return rank


class PrefixAware:
    """Route to the rank that cached the prompt's prefix; least loaded otherwise."""

    def __init__(self, num_ranks: int, block_size: int, balance_slack: int = 8) -> None:
        self.block_size = block_size
        self.balance_slack = balance_slack
        self._seen: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(num_ranks)]

    def _hashes(self, prompt_token_ids: Sequence[int]) -> list[int]:
        size = self.block_size
        hashes: list[int] = []
        parent = NONE_HASH
        for index in range(min(len(prompt_token_ids) // size, _MAX_PREFIX_BLOCKS)):
            parent = hash_block_tokens(parent, prompt_token_ids[index * size : (index + 1) * size])
            hashes.append(parent)
        return hashes

    def _matched(self, rank: int, hashes: Sequence[int]) -> int:
        seen = self._seen[rank]
        count = 0
        for block_hash in hashes:
            if block_hash not in seen:
                break
            count += 1
        return count

    def pick(self, prompt_token_ids: Sequence[int], loads: Sequence[RankLoad]) -> int:
        hashes = self._hashes(prompt_token_ids)
        least = _least_loaded(loads)
        ranks = range(len(loads))
        matched = [self._matched(rank, hashes) for rank in ranks]
        best = max(ranks, key=lambda r: (matched[r], -loads[r].score, -r))
        load_of = [loads[r].running + loads[r].waiting for r in ranks]
        if matched[best] == 0:  # a new prefix: least loaded, then the rank caching least
            best = min(ranks, key=lambda r: (loads[r].score, len(self._seen[r]), r))
        elif load_of[best] - load_of[least] > self.balance_slack:
            best = least
        seen = self._seen[best]
        for block_hash in hashes:
            seen[block_hash] = None
            seen.move_to_end(block_hash)
        while len(seen) > _MAX_REMEMBERED:
            seen.popitem(last=False)
        return best


def make_balancer(
    policy: Literal["least_loaded", "round_robin", "prefix_aware"],
    num_ranks: int,
    block_size: int,
) -> Balancer:
    if policy == "round_robin":
        return RoundRobin()
    if policy == "prefix_aware":
        return PrefixAware(num_ranks, block_size)
    return LeastLoaded()
