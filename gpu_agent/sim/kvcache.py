"""A paged KV cache with prefix caching, in the manner of vLLM V1's block pool.

Blocks hold `block_size` tokens. A full block of a request is registered under a chained hash
(the parent block's hash and the block's token ids), so a later request whose prompt starts with
the same tokens reuses those blocks instead of recomputing them. Freed blocks stay cached until
they are handed out again; the free list is in LRU order (freed last, reused last), and a
request's blocks are freed tail first so that shared prefixes live longest.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

ROOT_HASH = 0x5EED


def chain_block_hashes(token_ids: Sequence[int], block_size: int, parents: list[int]) -> None:
    """Extend `parents` with the hashes of the further full blocks of `token_ids`."""
    parent = parents[-1] if parents else ROOT_HASH
    for start in range(len(parents) * block_size, len(token_ids) - block_size + 1, block_size):
        # Hashes of int tuples are stable across processes, unlike those of str.
        parent = hash((parent, tuple(token_ids[start : start + block_size])))
        parents.append(parent)


class KVCache:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self._ref_count = [0] * num_blocks
        self._hash_of: list[int | None] = [None] * num_blocks
        self._by_hash: dict[int, int] = {}
        # Every block with no user, oldest first: allocation takes from the front.
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        # Counted in tokens, as vLLM's prefix_cache_queries / prefix_cache_hits are.
        self.queries = 0
        self.hits = 0

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    @property
    def usage(self) -> float:
        """Share of blocks in use (vllm:kv_cache_usage_perc, 0..1); cached free ones are free."""
        return 1.0 - len(self._free) / self.num_blocks

    def cached_prefix(self, block_hashes: Sequence[int], max_blocks: int) -> list[int]:
        """Block ids of the longest cached prefix of `block_hashes`, at most `max_blocks`."""
        if not self.enable_prefix_caching:
            return []
        found: list[int] = []
        for block_hash in block_hashes[:max_blocks]:
            block_id = self._by_hash.get(block_hash)
            if block_id is None:
                break
            found.append(block_id)
        return found

    def record_lookup(self, queried_tokens: int, hit_tokens: int) -> None:
        if self.enable_prefix_caching:
            self.queries += queried_tokens
            self.hits += hit_tokens

    def can_take(self, new_blocks: int, hit_blocks: Sequence[int]) -> bool:
        """Whether `new_blocks` fresh blocks plus the reuse of `hit_blocks` fit."""
        reclaimed = sum(1 for block_id in hit_blocks if self._ref_count[block_id] == 0)
        return new_blocks + reclaimed <= len(self._free)

    def take(self, new_blocks: int, hit_blocks: Sequence[int]) -> list[int]:
        """Pin `hit_blocks` and allocate `new_blocks`; call `can_take` first."""
        for block_id in hit_blocks:
            if self._ref_count[block_id] == 0:
                del self._free[block_id]
            self._ref_count[block_id] += 1
        fresh: list[int] = []
        for _ in range(new_blocks):
            block_id, _unused = self._free.popitem(last=False)
            old_hash = self._hash_of[block_id]
            if old_hash is not None:
                # Evicting: the cached content is overwritten.
                self._hash_of[block_id] = None
                if self._by_hash.get(old_hash) == block_id:
                    del self._by_hash[old_hash]
            self._ref_count[block_id] = 1
            fresh.append(block_id)
        return [*hit_blocks, *fresh]

    def release(self, block_ids: Sequence[int]) -> None:
        for block_id in reversed(block_ids):
            self._ref_count[block_id] -= 1
            if self._ref_count[block_id] == 0:
                self._free[block_id] = None

    def register(self, block_id: int, block_hash: int) -> None:
        """Make a full block findable by its hash (first writer wins on duplicates)."""
        if self.enable_prefix_caching and self._hash_of[block_id] is None:
            if block_hash not in self._by_hash:
                self._by_hash[block_hash] = block_id
            self._hash_of[block_id] = block_hash

    def reset_prefix_cache(self) -> int:
        """Forget the hashes of every block no request holds (vLLM's reset_prefix_cache);
        blocks in use keep theirs, since their requests still read them. Returns how many
        cached blocks were forgotten."""
        forgotten = 0
        for block_id in self._free:
            block_hash = self._hash_of[block_id]
            if block_hash is not None:
                self._hash_of[block_id] = None
                if self._by_hash.get(block_hash) == block_id:
                    del self._by_hash[block_hash]
                forgotten += 1
        return forgotten
