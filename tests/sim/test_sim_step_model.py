"""The step model behaves like continuous batching over a paged KV cache (model clock only)."""

from __future__ import annotations

import math

from gpu_agent.sim.engine import Engine, FinishReason, SimRequest
from tests.sim.sim_helpers import config, request, run_until_done, ttft, words


def throughput(max_num_seqs: int, count: int, prompt: int, output: int) -> tuple[float, int]:
    """Output tokens per model second, and the most requests ever running together."""
    engine = Engine(config("--max-num-seqs", str(max_num_seqs)))
    for index in range(count):
        engine.add_request(request(f"r{index}", prompt, output))
    most_running = 0
    while engine.has_work():
        engine.step()
        most_running = max(most_running, len(engine.running))
    return count * output / engine.now, most_running


def test_throughput_rises_with_max_num_seqs() -> None:
    figures = [throughput(seqs, 64, 32, 64)[0] for seqs in (1, 4, 16, 64)]
    assert figures == sorted(figures)
    assert figures[2] > 4 * figures[0]


def test_kv_cache_bounds_the_batch_and_the_throughput() -> None:
    # 1,100 tokens per request at the end; tiny-test holds 8,656 tokens: at most ~8 fit.
    small, small_running = throughput(8, 32, 600, 500)
    large, large_running = throughput(64, 32, 600, 500)
    assert small_running == 8
    assert large_running <= 15
    assert large < 1.5 * small


def test_compute_bounds_throughput_once_steps_grow() -> None:
    # Attention cost per context token grows with the batch, so doubling the batch stops
    # doubling the throughput.
    base = throughput(8, 64, 16, 32)[0]
    double = throughput(16, 64, 16, 32)[0]
    assert 1.0 < double / base < 2.0


def test_ttft_grows_with_the_waiting_queue() -> None:
    engine = Engine(config("--max-num-seqs", "4"))
    requests = [request(f"q{index}", 64, 32) for index in range(16)]
    for req in requests:
        engine.add_request(req)
    run_until_done(engine)
    ttfts = [ttft(req) for req in requests]
    assert ttfts == sorted(ttfts)
    assert ttfts[-1] > 3 * ttfts[3]


def shared_prefix_ttft(caching: bool) -> tuple[float, Engine]:
    flag = "--enable-prefix-caching" if caching else "--no-enable-prefix-caching"
    engine = Engine(config(flag))
    system_prompt = words(2048)
    first = SimRequest("first", [*system_prompt, *words(16, "a")], 4, ignore_eos=True)
    engine.add_request(first)
    run_until_done(engine)
    second = SimRequest("second", [*system_prompt, *words(16, "b")], 4, ignore_eos=True)
    engine.add_request(second)
    run_until_done(engine)
    return ttft(second) / ttft(first), engine


def test_prefix_caching_cuts_ttft_of_a_shared_prompt_and_counts_hits() -> None:
    cached_ratio, engine = shared_prefix_ttft(caching=True)
    uncached_ratio, plain = shared_prefix_ttft(caching=False)
    assert cached_ratio < 0.5
    assert uncached_ratio > 0.9
    assert engine.kv.hits == 2048  # 128 full blocks of the shared prompt
    assert engine.kv.queries == 2 * (2048 + 16)
    assert plain.kv.hits == plain.kv.queries == 0


def test_cached_blocks_are_evicted_least_recently_used_first() -> None:
    engine = Engine(config())
    old = SimRequest("old", words(4096, "old"), 1, ignore_eos=True)
    recent = SimRequest("recent", words(4096, "recent"), 1, ignore_eos=True)
    for req in (old, recent):
        engine.add_request(req)
        run_until_done(engine)
    # A third prompt needs about half the cache: it must evict "old", not "recent".
    engine.add_request(SimRequest("third", words(4096, "third"), 1, ignore_eos=True))
    run_until_done(engine)
    again_recent = SimRequest("again", words(4096, "recent"), 1, ignore_eos=True)
    again_old = SimRequest("again-old", words(4096, "old"), 1, ignore_eos=True)
    engine.add_request(again_recent)
    run_until_done(engine)
    assert again_recent.num_cached_prompt_tokens == 4080  # all full blocks but the last token
    engine.add_request(again_old)
    run_until_done(engine)
    # Most of "old" was evicted; blocks are freed tail first, so what survives is its head.
    assert 0 < again_old.num_cached_prompt_tokens < 1024


def priority_scenario(policy: str) -> tuple[SimRequest, list[SimRequest], Engine]:
    """Four low-priority long requests fill the cache; an urgent one arrives after them."""
    engine = Engine(config("--scheduling-policy", policy, "--max-num-seqs", "8"))
    low = [request(f"low{index}", 1000, 1500, priority=5) for index in range(4)]
    for req in low:
        engine.add_request(req)
    for _ in range(3):
        engine.step()
    urgent = request("urgent", 1000, 1500, priority=0)
    engine.add_request(urgent)
    run_until_done(engine)
    return urgent, low, engine


def test_priority_policy_preempts_low_priority_requests_under_kv_pressure() -> None:
    urgent, low, engine = priority_scenario("priority")
    assert engine.num_preemptions > 0
    assert urgent.num_preemptions == 0
    assert sum(req.num_preemptions for req in low) == engine.num_preemptions
    assert urgent.finish_time is not None
    assert all(req.finish_time is not None and urgent.finish_time < req.finish_time for req in low)


def test_fcfs_preempts_the_last_admitted_whatever_its_priority() -> None:
    urgent, low, _engine = priority_scenario("fcfs")
    assert urgent.priority == 0 and all(req.priority == 0 for req in low)  # ignored
    assert urgent.num_preemptions > 0
    assert low[0].num_preemptions == 0
    assert all(req.finish_reason is FinishReason.LENGTH for req in [urgent, *low])


def test_priority_policy_serves_urgent_requests_first() -> None:
    def order(policy: str) -> list[str]:
        engine = Engine(config("--scheduling-policy", policy, "--max-num-seqs", "1"))
        reqs = [request(f"batch{index}", 64, 8, priority=10) for index in range(3)]
        reqs.append(request("urgent", 64, 8, priority=-1))
        engine.add_request(reqs[0])
        engine.step()  # batch0 is running; the rest queue up behind it
        for req in reqs[1:]:
            engine.add_request(req)
            engine.now += 0.001  # arrivals in list order
        run_until_done(engine)
        return [req.request_id for req in sorted(reqs, key=ttft)]

    # batch0 is admitted at once; the urgent one then jumps the queue.
    assert order("priority") == ["batch0", "urgent", "batch1", "batch2"]
    assert order("fcfs") == ["batch0", "batch1", "batch2", "urgent"]


def test_kv_gauge_tracks_admitted_context() -> None:
    engine = Engine(config())
    blocks = engine.kv.num_blocks

    def used() -> int:
        return round(engine.kv.usage * blocks)

    first = request("first", 100, 40)
    engine.add_request(first)
    assert engine.kv.usage == 0.0
    engine.step()  # the whole prompt is prefilled in one step
    assert used() == math.ceil(100 / 16)
    second = request("second", 300, 40)
    engine.add_request(second)
    for _ in range(20):
        engine.step()
        held = sum(math.ceil(r.num_computed_tokens / 16) for r in engine.running)
        # Blocks cover the computed context, plus at most one slot for the token in flight.
        assert held <= used() <= held + len(engine.running)
    run_until_done(engine)
    assert engine.kv.usage == 0.0


def itl_of_decoder(*flags: str) -> tuple[float, int]:
    """Largest gap between tokens of a decoding request while a long prompt arrives."""
    engine = Engine(config(*flags))
    decoder = request("decoder", 16, 200)
    engine.add_request(decoder)
    for _ in range(5):
        engine.step()
    engine.add_request(request("long", 6000, 4))
    last = engine.now
    gaps: list[float] = []
    steps_with_token = 0
    while decoder.finish_time is None:
        result = engine.step()
        assert result is not None
        if any(req is decoder for req, _ in result.outputs):
            gaps.append(engine.now - last)
            last = engine.now
            steps_with_token += 1
    return max(gaps), steps_with_token


def test_chunked_prefill_keeps_decode_going_during_a_long_prefill() -> None:
    chunked_gap, _ = itl_of_decoder("--enable-chunked-prefill", "--max-num-batched-tokens", "512")
    whole_gap, _ = itl_of_decoder("--no-enable-chunked-prefill")
    # 512-token chunks cost ~5 ms; the 6,000-token prompt in one step costs ~60 ms.
    assert chunked_gap < 0.01
    assert whole_gap > 0.05


def test_async_scheduling_hides_the_cpu_gap() -> None:
    def one_step(flag: str) -> float:
        engine = Engine(config(flag))
        engine.add_request(request("r", 16, 1))
        result = engine.step()
        assert result is not None
        return result.duration

    gap = config().hardware.cpu_gap_s
    assert math.isclose(one_step("--no-async-scheduling") - one_step("--async-scheduling"), gap)


def test_eos_is_deterministic_from_the_seed_and_max_tokens_caps_output() -> None:
    def outputs(seed: str) -> list[tuple[list[int], str]]:
        engine = Engine(config("--seed", seed))
        reqs = [SimRequest(f"e{index}", words(20, f"e{index}"), 300) for index in range(8)]
        for req in reqs:
            engine.add_request(req)
        run_until_done(engine)
        return [(req.output_token_ids, str(req.finish_reason)) for req in reqs]

    first = outputs("1")
    assert first == outputs("1")
    assert first != outputs("2")
    assert {reason for _, reason in first} <= {"stop", "length"}
    assert "stop" in {reason for _, reason in first}
    assert all(len(ids) <= 300 for ids, _ in first)


def test_abort_frees_the_blocks_of_a_running_request() -> None:
    engine = Engine(config())
    req = request("gone", 500, 100)
    engine.add_request(req)
    engine.step()
    assert engine.kv.usage > 0
    engine.abort(req)
    assert engine.kv.usage == 0.0
    assert req.finish_reason is FinishReason.ABORT
    assert not engine.has_work()
