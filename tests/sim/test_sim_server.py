"""The simulator process speaks vLLM's OpenAI API: official client, raw SSE, errors, metrics."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpu_agent.sim.testing import run_sim_process

MODEL = "sim-model"


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with run_sim_process(MODEL, ["--max-num-seqs", "16"]) as url:
        yield url


@pytest.fixture
def client(base_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=base_url + "/v1", api_key="none", max_retries=0) as c:
        yield c


def metric_values(base_url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(base_url + "/metrics").text
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return values


def labelled(name: str, **extra: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted({"model_name": MODEL, "engine": "0", **extra}.items()))


def records(base_url: str, since: float = 0.0) -> list[dict[str, object]]:
    body = httpx.get(base_url + "/sim/v1/requests", params={"since": since}).json()
    assert body["simulated"] is True
    return list(body["data"])


def test_streamed_chat_gives_one_chunk_per_token_and_usage(
    client: openai.OpenAI, base_url: str
) -> None:
    before = time.time()
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hello " * 50}],
            max_tokens=12,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
    )
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    usage = chunks[-1].usage
    assert usage is not None and chunks[-1].choices == []
    assert usage.completion_tokens == len(texts) == 12
    assert usage.prompt_tokens == 102  # "<|user|>" and each "hello" cost 2 (4 chars a token)
    assert [c.choices[0].finish_reason for c in chunks[:-1]][-1] == "length"
    assert {c.id for c in chunks} == {chunks[0].id}
    assert all(c.object == "chat.completion.chunk" and c.model == MODEL for c in chunks)
    record = next(r for r in records(base_url, before) if r["id"] == chunks[0].id)
    assert record["output_tokens"] == 12 and record["prompt_tokens"] == 102
    assert record["arrival_time"] <= record["first_token_time"] <= record["finish_time"]


def test_non_streamed_chat_and_completion(client: openai.OpenAI) -> None:
    chat = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=8, temperature=0
    )
    assert chat.object == "chat.completion" and chat.choices[0].message.role == "assistant"
    assert chat.choices[0].message.content
    assert chat.usage is not None and chat.usage.completion_tokens <= 8
    completion = client.completions.create(
        model=MODEL, prompt="once upon a time", max_tokens=5, extra_body={"ignore_eos": True}
    )
    assert completion.object == "text_completion"
    assert len(completion.choices[0].text.split()) == 5
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None and completion.usage.prompt_tokens == 4


def test_raw_sse_stream_of_completions(base_url: str) -> None:
    body = {
        "model": MODEL,
        "prompt": "count these words",
        "max_tokens": 4,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream(
        "POST", base_url + "/v1/completions", json=body, headers={"x-request-id": "raw-1"}
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-request-id"] == "raw-1"
        events = [line for line in response.iter_lines() if line]
    assert events[-1] == "data: [DONE]"
    payloads = [json.loads(line.removeprefix("data: ")) for line in events[:-1]]
    assert all(line.startswith("data: ") for line in events)
    tokens = [p for p in payloads if p["choices"]]
    assert len(tokens) == 4
    assert all(p["id"] == "cmpl-raw-1" and p["object"] == "text_completion" for p in payloads)
    assert all(isinstance(p["created"], int) and p["model"] == MODEL for p in payloads)
    assert [p["choices"][0]["finish_reason"] for p in tokens] == [None, None, None, "length"]
    assert payloads[-1]["usage"] == {"prompt_tokens": 6, "completion_tokens": 4, "total_tokens": 10}


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "nope", "messages": [{"role": "user", "content": "x"}]}, 404, "model"),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
            400,
            "max_tokens",
        ),
        ({"model": MODEL, "messages": "hello"}, 400, "messages"),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "temperature": -1},
            400,
            "temperature",
        ),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 9000},
            400,
            "max_tokens",
        ),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "priority": "hi"},
            400,
            "priority",
        ),
    ],
)
def test_bad_requests_get_openai_errors_naming_the_field(
    base_url: str, body: dict[str, object], status: int, param: str
) -> None:
    response = httpx.post(base_url + "/v1/chat/completions", json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["param"] == param and error["code"] == status
    assert error["message"] and error["type"]


def test_invalid_json_is_a_400(base_url: str) -> None:
    response = httpx.post(
        base_url + "/v1/completions",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]["message"]


def test_models_and_health(client: openai.OpenAI, base_url: str) -> None:
    assert [m.id for m in client.models.list()] == [MODEL]
    assert httpx.get(base_url + "/health").status_code == 200


def test_metrics_use_vllm_names_and_move(client: openai.OpenAI, base_url: str) -> None:
    before = metric_values(base_url)
    client.completions.create(
        model=MODEL, prompt="a b c d", max_tokens=3, extra_body={"ignore_eos": True}
    )
    after = metric_values(base_url)
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:num_preemptions_total",
        "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:request_queue_time_seconds_count",
    ):
        assert labelled(name) in after, name
    generated = labelled("vllm:generation_tokens_total")
    assert after[generated] - before.get(generated, 0) == 3
    prompt = labelled("vllm:prompt_tokens_total")
    assert after[prompt] - before.get(prompt, 0) == 4
    # As vLLM's: per step, the tokens computed (prefill and generated); a step an observation.
    computed = labelled("vllm:iteration_tokens_total_sum")
    assert after[computed] - before.get(computed, 0) == 4 + 3
    steps = labelled("vllm:iteration_tokens_total_count")
    assert after[steps] - before.get(steps, 0) == 3
    success = labelled("vllm:request_success_total", finished_reason="length")
    assert after[success] - before.get(success, 0) == 1


def test_client_disconnect_aborts_the_request_and_frees_its_blocks(base_url: str) -> None:
    body = {
        "model": MODEL,
        "prompt": "long " * 400,
        "max_tokens": 4000,
        "stream": True,
        "ignore_eos": True,
    }
    aborted = labelled("vllm:request_success_total", finished_reason="abort")
    before = metric_values(base_url).get(aborted, 0)
    with httpx.stream("POST", base_url + "/v1/completions", json=body) as response:
        lines = response.iter_lines()  # kept referenced: closing it would disconnect
        for _ in range(5):
            next(lines)
        gpu = httpx.get(base_url + "/sim/v1/gpu").json()
        assert gpu["kv_cache_usage"] > 0 and gpu["num_requests_running"] == 1
    deadline = time.monotonic() + 5
    while metric_values(base_url).get(aborted, 0) == before:
        assert time.monotonic() < deadline, "the disconnect did not abort the request"
        time.sleep(0.02)
    values = metric_values(base_url)
    assert values[labelled("vllm:kv_cache_usage_perc")] == 0.0
    assert values[labelled("vllm:num_requests_running")] == 0.0


def test_simulated_gpu_figures(client: openai.OpenAI, base_url: str) -> None:
    client.completions.create(
        model=MODEL, prompt="warm " * 100, max_tokens=50, extra_body={"ignore_eos": True}
    )
    gpu = httpx.get(base_url + "/sim/v1/gpu").json()
    assert gpu["simulated"] is True and gpu["name"] == "simulated tiny-test"
    assert 0 < gpu["util"] <= 1  # it has just been busy
    assert gpu["mem_total_bytes"] == 1024**3
    assert gpu["mem_used_bytes"] >= 957_500_000
    steps = gpu["steps"]
    assert steps["total"] >= 50 and steps["timed"] > 0
    # Wall time between deliveries follows the model (loosely: CI machines are noisy).
    assert 0.7 < steps["measured_s"] / steps["modelled_s"] < 1.5


def test_run_sim_process_reports_a_simulator_that_cannot_start() -> None:
    with pytest.raises(RuntimeError, match=r"(?s)exited with 2.*unrecognized arguments"):  # noqa: SIM117
        with run_sim_process(MODEL, ["--scheduler-policy", "priority"]):
            pass


def test_reset_prefix_cache_makes_a_repeated_prompt_miss_again(
    client: openai.OpenAI, base_url: str
) -> None:
    hits = labelled("vllm:prefix_cache_hits_total")
    prompt = "reset check " * 120  # several full blocks

    def hits_of_one_request() -> float:
        before = metric_values(base_url).get(hits, 0.0)
        client.completions.create(model=MODEL, prompt=prompt, max_tokens=2)
        return metric_values(base_url)[hits] - before

    hits_of_one_request()
    assert hits_of_one_request() > 100  # the second send finds the prompt cached
    assert httpx.post(base_url + "/reset_prefix_cache").status_code == 200
    assert hits_of_one_request() == 0
    assert hits_of_one_request() > 100
