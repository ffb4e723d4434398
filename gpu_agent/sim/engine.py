"""The step model of the simulated engine: continuous batching over a paged KV cache (sans-I/O).

`Engine.step()` schedules one batch the way vLLM V1's scheduler does, advances the model clock
`Engine.now` by the modelled duration and returns what the step produced. No sleeping and no
I/O: the server (server.py) sleeps the duration and delivers the tokens; tests drive it with
the model clock alone.

One step:
1. Running requests first, in admission order: each asks for its remaining tokens (1 when
   decoding; a chunk of the prompt when chunked prefill is on), within the step's token budget
   (max_num_batched_tokens). When the KV cache has no block left for one, a victim is preempted
   by recompute (its blocks freed, back to the waiting queue): under fcfs the last admitted
   running request, under priority the running one with the largest (priority, arrival).
2. If nobody was preempted, waiting requests are admitted in queue order (FCFS, or lowest
   (priority, arrival) first) while seqs, budget and blocks allow; a prompt's cached prefix
   blocks are reused. Without chunked prefill a prompt that does not fit the budget waits.
3. Modelled duration: forward = base + prefill_s x prefill tokens + decode_s x decoding seqs
   + attention_s x context tokens of the batch; step = forward + CPU gap, or max(forward, CPU
   gap) with async scheduling, which prepares the next step while the GPU runs this one.
4. Every request whose tokens are all computed samples one token; it finishes on max_tokens,
   at max_model_len, or at its EOS position (drawn from the seed unless ignore_eos).
"""

from __future__ import annotations

import enum
import heapq
import itertools
import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpu_agent.sim.config import SimConfig
from gpu_agent.sim.kvcache import KVCache, chain_block_hashes
from gpu_agent.sim.tokens import OUTPUT_ID_BASE, VOCABULARY


class Status(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class FinishReason(enum.StrEnum):
    STOP = "stop"
    LENGTH = "length"
    ABORT = "abort"


@dataclass(eq=False)
class SimRequest:
    request_id: str
    prompt_token_ids: list[int]
    max_tokens: int
    priority: int = 0
    ignore_eos: bool = False
    # Set by the engine.
    arrival_time: float = 0.0
    output_token_ids: list[int] = field(default_factory=list)
    status: Status = Status.WAITING
    num_computed_tokens: int = 0
    block_ids: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)
    num_registered_blocks: int = 0
    num_cached_prompt_tokens: int = 0
    num_preemptions: int = 0
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    finish_time: float | None = None
    finish_reason: FinishReason | None = None
    eos_length: int | None = None
    rng: random.Random = field(default_factory=random.Random)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    def token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids


@dataclass(frozen=True)
class StepResult:
    """What one step did. Times are model seconds."""

    start: float
    duration: float
    forward: float
    num_prefill_tokens: int
    num_decode_seqs: int
    num_context_tokens: int
    # (request, new token ids) for every request that produced tokens, in batch order.
    outputs: list[tuple[SimRequest, list[int]]]
    finished: list[SimRequest]
    preempted: list[SimRequest]


class WaitingQueue:
    """FCFS deque, or a heap on (priority, arrival, sequence) under the priority policy."""

    def __init__(self, by_priority: bool) -> None:
        self.by_priority = by_priority
        self._fifo: deque[SimRequest] = deque()
        self._heap: list[tuple[int, float, int, SimRequest]] = []
        self._seq = itertools.count()
        self._removed: set[int] = set()  # ids of heap requests removed lazily

    def __len__(self) -> int:
        return len(self._fifo) if not self.by_priority else len(self._heap) - len(self._removed)

    def __iter__(self) -> Iterator[SimRequest]:
        if not self.by_priority:
            return iter(self._fifo)
        return (entry[3] for entry in sorted(self._heap) if id(entry[3]) not in self._removed)

    def push(self, request: SimRequest, front: bool = False) -> None:
        if not self.by_priority:
            if front:
                self._fifo.appendleft(request)
            else:
                self._fifo.append(request)
            return
        entry = (request.priority, request.arrival_time, next(self._seq), request)
        heapq.heappush(self._heap, entry)

    def peek(self) -> SimRequest | None:
        if not self.by_priority:
            return self._fifo[0] if self._fifo else None
        while self._heap and id(self._heap[0][3]) in self._removed:
            self._removed.discard(id(heapq.heappop(self._heap)[3]))
        return self._heap[0][3] if self._heap else None

    def pop(self) -> SimRequest:
        if not self.by_priority:
            return self._fifo.popleft()
        self.peek()
        return heapq.heappop(self._heap)[3]

    def remove(self, request: SimRequest) -> None:
        if not self.by_priority:
            self._fifo.remove(request)
        else:
            self._removed.add(id(request))


class Engine:
    def __init__(self, config: SimConfig, now: float = 0.0) -> None:
        self.config = config
        self.hardware = config.hardware
        self.kv = KVCache(config.num_gpu_blocks, config.block_size, config.enable_prefix_caching)
        self.by_priority = config.scheduling_policy == "priority"
        self.waiting = WaitingQueue(self.by_priority)
        self.running: list[SimRequest] = []
        self.now = now
        self.num_preemptions = 0
        self.num_steps = 0
        self.busy_time = 0.0  # model seconds spent in forward passes

    # -- requests -------------------------------------------------------------------------

    def add_request(self, request: SimRequest) -> None:
        """Queue a request arriving at `self.now`; the caller checked the lengths."""
        request.arrival_time = self.now
        if not self.by_priority:
            request.priority = 0  # vLLM V1 ignores priority under fcfs
        seed = hash(
            (
                self.config.sim_seed,
                len(request.prompt_token_ids),
                tuple(request.prompt_token_ids[-64:]),
            )
        )
        request.rng = random.Random(seed)
        if not request.ignore_eos:
            mean = self.config.eos_mean_tokens
            request.eos_length = 1 + int(request.rng.expovariate(1.0 / mean))
        chain_block_hashes(request.prompt_token_ids, self.kv.block_size, request.block_hashes)
        self.waiting.push(request)

    def abort(self, request: SimRequest) -> None:
        """Drop a request wherever it is (client gone); its blocks are freed."""
        if request.status is Status.WAITING:
            self.waiting.remove(request)
        elif request.status is Status.RUNNING:
            self.running.remove(request)
            self.kv.release(request.block_ids)
            request.block_ids = []
        else:
            return
        self._finish(request, FinishReason.ABORT, self.now)

    def has_work(self) -> bool:
        return bool(self.running) or len(self.waiting) > 0

    # -- scheduling -----------------------------------------------------------------------

    def _grow(self, request: SimRequest, num_tokens: int, hits: list[int]) -> bool:
        """Give `request` blocks for `num_tokens` tokens (reusing `hits`), if they fit."""
        needed = -(-num_tokens // self.kv.block_size) - len(request.block_ids) - len(hits)
        needed = max(needed, 0)
        if not self.kv.can_take(needed, hits):
            return False
        request.block_ids.extend(self.kv.take(needed, hits))
        return True

    def _pick_victim(self) -> SimRequest:
        if self.by_priority:
            return max(self.running, key=lambda r: (r.priority, r.arrival_time))
        return self.running[-1]

    def _preempt(self, victim: SimRequest) -> None:
        self.running.remove(victim)
        self.kv.release(victim.block_ids)
        victim.block_ids = []
        victim.num_computed_tokens = 0
        victim.num_registered_blocks = 0
        victim.status = Status.WAITING
        victim.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.push(victim, front=True)

    def _schedule(self) -> tuple[list[tuple[SimRequest, int]], list[SimRequest]]:
        budget = self.config.max_num_batched_tokens
        chunked = self.config.enable_chunked_prefill
        scheduled: dict[SimRequest, int] = {}
        preempted: list[SimRequest] = []

        index = 0
        while index < len(self.running) and budget > 0:
            request = self.running[index]
            wanted = min(request.num_tokens - request.num_computed_tokens, budget)
            while not self._grow(request, request.num_computed_tokens + wanted, []):
                victim = self._pick_victim()
                if victim in scheduled:
                    budget += scheduled.pop(victim)
                if self.running.index(victim) < index:
                    index -= 1
                self._preempt(victim)
                preempted.append(victim)
                if victim is request:
                    break
            else:
                scheduled[request] = wanted
                budget -= wanted
                index += 1

        if not preempted:
            self._admit(scheduled, budget, chunked)
        return list(scheduled.items()), preempted

    def _admit(self, scheduled: dict[SimRequest, int], budget: int, chunked: bool) -> None:
        block_size = self.kv.block_size
        while budget > 0 and len(self.running) < self.config.max_num_seqs:
            request = self.waiting.peek()
            if request is None:
                break
            total = request.num_tokens
            if request.output_token_ids:  # a preempted request: its output is hashed too
                chain_block_hashes(request.token_ids(), block_size, request.block_hashes)
            # At least one token must be computed to sample from, as in vLLM.
            hits = self.kv.cached_prefix(request.block_hashes, (total - 1) // block_size)
            num_cached = len(hits) * block_size
            wanted = total - num_cached
            if not chunked and wanted > budget:
                break
            wanted = min(wanted, budget)
            if not self._grow(request, num_cached + wanted, hits):
                break
            self.waiting.pop()
            self.kv.record_lookup(total, num_cached)
            if request.first_scheduled_time is None:
                request.first_scheduled_time = self.now
                request.num_cached_prompt_tokens = num_cached
            request.num_computed_tokens = num_cached
            request.num_registered_blocks = len(hits)
            request.status = Status.RUNNING
            self.running.append(request)
            scheduled[request] = wanted
            budget -= wanted

    # -- one step -------------------------------------------------------------------------

    def step(self) -> StepResult | None:
        """Run one step from `self.now`; None when there is nothing to run."""
        scheduled, preempted = self._schedule()
        if not scheduled:
            return None
        hw = self.hardware
        prefill_tokens = decode_seqs = context_tokens = 0
        for request, count in scheduled:
            if (
                count == 1
                and request.output_token_ids
                and (request.num_computed_tokens == request.num_tokens - 1)
            ):
                decode_seqs += 1
            else:
                prefill_tokens += count
            context_tokens += request.num_computed_tokens + count
        forward = (
            hw.base_step_s
            + hw.prefill_s_per_token * prefill_tokens
            + hw.decode_s_per_seq * decode_seqs
            + hw.attention_s_per_context_token * context_tokens
        )
        if self.config.async_scheduling:
            duration = max(forward, hw.cpu_gap_s)
        else:
            duration = forward + hw.cpu_gap_s
        start = self.now
        end = start + duration
        outputs, finished = self._apply(scheduled, end)
        self.now = end
        self.num_steps += 1
        self.busy_time += forward
        return StepResult(
            start,
            duration,
            forward,
            prefill_tokens,
            decode_seqs,
            context_tokens,
            outputs,
            finished,
            preempted,
        )

    def _apply(
        self, scheduled: list[tuple[SimRequest, int]], end: float
    ) -> tuple[list[tuple[SimRequest, list[int]]], list[SimRequest]]:
        block_size = self.kv.block_size
        outputs: list[tuple[SimRequest, list[int]]] = []
        finished: list[SimRequest] = []
        max_model_len = self.config.max_model_len
        for request, count in scheduled:
            request.num_computed_tokens += count
            full_blocks = request.num_computed_tokens // block_size
            if full_blocks > request.num_registered_blocks:
                if len(request.block_hashes) < full_blocks:
                    chain_block_hashes(request.token_ids(), block_size, request.block_hashes)
                for index in range(request.num_registered_blocks, full_blocks):
                    self.kv.register(request.block_ids[index], request.block_hashes[index])
                request.num_registered_blocks = full_blocks
            if request.num_computed_tokens < request.num_tokens:
                continue  # a prefill chunk: nothing to sample yet
            token_id = OUTPUT_ID_BASE + request.rng.randrange(len(VOCABULARY))
            request.output_token_ids.append(token_id)
            if request.first_token_time is None:
                request.first_token_time = end
            outputs.append((request, [token_id]))
            num_output = len(request.output_token_ids)
            reason: FinishReason | None = None
            if request.eos_length is not None and num_output >= request.eos_length:
                reason = FinishReason.STOP
            elif num_output >= request.max_tokens or request.num_tokens >= max_model_len:
                reason = FinishReason.LENGTH
            if reason is not None:
                self.running.remove(request)
                self.kv.release(request.block_ids)
                request.block_ids = []
                self._finish(request, reason, end)
                finished.append(request)
        return outputs, finished

    @staticmethod
    def _finish(request: SimRequest, reason: FinishReason, when: float) -> None:
        request.status = Status.FINISHED
        request.finish_reason = reason
        request.finish_time = when
