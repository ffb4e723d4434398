"""The connection doctor against a real local server that fails in each of seed 000's ways."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from console.fleet import doctor, probes
from console.fleet.doctor import Reply, Step
from tests.fleet.fake_upstream import GOOD_KEY, free_port, serve


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    yield from serve()


def by_name(steps: list[Step]) -> dict[str, Step]:
    return {s.name: s for s in steps}


def test_a_healthy_endpoint_passes_every_step(upstream: str) -> None:
    steps = probes.run_doctor(f"{upstream}/good/v1", GOOD_KEY, "demo-8b")
    assert [s.ok for s in steps] == [True] * 5, steps
    assert [s.name for s in steps] == [
        "API key",
        "Base URL",
        "Models",
        "Chat completion (not streamed)",
        "Chat completion (streamed)",
    ]
    assert "[DONE]" in steps[-1].detail


def test_a_wrong_key_is_a_401_naming_the_bearer_prefix_and_duplicate_headers(upstream: str) -> None:
    steps = probes.run_doctor(f"{upstream}/good/v1", "sk-wrong-0000000000", "demo-8b")
    base = by_name(steps)["Base URL"]
    assert not base.ok and "401" in base.detail
    assert "Bearer" in base.fix and "second Authorization header" in base.fix
    assert len(steps) == 2  # nothing else can work without the key


def test_a_key_stored_with_its_bearer_prefix_is_caught_before_any_request(upstream: str) -> None:
    steps = probes.run_doctor(f"{upstream}/good/v1", f"Bearer {GOOD_KEY}", "demo-8b")
    assert not steps[0].ok and "Bearer" in steps[0].detail


def test_a_base_url_without_v1_finds_and_suggests_the_working_form(upstream: str) -> None:
    steps = probes.run_doctor(f"{upstream}/good", GOOD_KEY, "demo-8b")
    base = by_name(steps)["Base URL"]
    assert not base.ok
    assert f"{upstream}/good/v1" in base.fix
    # The rest of the checks ran on the working form.
    assert by_name(steps)["Chat completion (streamed)"].ok


def test_a_full_chat_completions_url_is_cut_back_to_its_base(upstream: str) -> None:
    steps = probes.run_doctor(f"{upstream}/good/v1/chat/completions", GOOD_KEY, "demo-8b")
    assert by_name(steps)["Base URL"].ok


def test_a_path_that_exists_in_neither_form_is_a_404(upstream: str) -> None:
    steps = probes.run_doctor(f"{upstream}/good/api", GOOD_KEY, "demo-8b")
    base = by_name(steps)["Base URL"]
    assert not base.ok and "404" in base.detail and "chat/completions" in base.fix


def test_an_unknown_model_is_a_404_listing_the_served_ones(upstream: str) -> None:
    steps = probes.run_doctor(f"{upstream}/good/v1", GOOD_KEY, "gpt-nonexistent")
    assert not by_name(steps)["Models"].ok
    chat = by_name(steps)["Chat completion (not streamed)"]
    assert not chat.ok and "gpt-nonexistent" in chat.detail and "demo-8b" in chat.fix


def test_a_refused_port_says_nothing_listens(db: None) -> None:
    steps = probes.run_doctor(f"http://127.0.0.1:{free_port()}/v1", GOOD_KEY, "demo-8b")
    base = by_name(steps)["Base URL"]
    assert not base.ok and "refused" in base.detail and "proxy" in base.fix


def test_a_slow_server_times_out(upstream: str) -> None:
    steps = probes.run_doctor(f"{upstream}/slow/v1", GOOD_KEY, "demo-8b", timeout_s=0.5)
    base = by_name(steps)["Base URL"]
    assert not base.ok and "in time" in base.detail


def test_sse_for_a_non_stream_call_is_reported_as_mixed_modes(upstream: str) -> None:
    steps = by_name(probes.run_doctor(f"{upstream}/sse-always/v1", GOOD_KEY, "demo-8b"))
    plain = steps["Chat completion (not streamed)"]
    assert not plain.ok and "SSE" in plain.detail and "mixed" in plain.fix
    streamed = steps["Chat completion (streamed)"]
    assert not streamed.ok and "no `choices`" in streamed.detail


def test_json_for_a_stream_call_is_reported_as_mixed_modes(upstream: str) -> None:
    steps = by_name(probes.run_doctor(f"{upstream}/json-stream/v1", GOOD_KEY, "demo-8b"))
    assert steps["Chat completion (not streamed)"].ok
    streamed = steps["Chat completion (streamed)"]
    assert not streamed.ok and "single JSON answer" in streamed.detail


def test_fetch_models_returns_the_working_base_and_ids(upstream: str) -> None:
    base, ids = probes.fetch_models(f"{upstream}/good", GOOD_KEY)
    assert base == f"{upstream}/good/v1" and ids == ["demo-8b", "demo-70b"]
    with pytest.raises(probes.FetchError) as info:
        probes.fetch_models(f"{upstream}/good/v1", "sk-nope-000000000")
    assert "401" in info.value.step.detail


def test_an_echoed_key_is_masked_in_what_the_doctor_keeps() -> None:
    key = "sk-secret-ECHOED-99999"

    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": f"bad key {key}"}})

    steps = probes.run_doctor(
        "http://upstream.test/v1", key, "m", transport=httpx.MockTransport(echo)
    )
    text = repr(steps)
    assert key not in text and "sk-...9999" in text


# --- the pure core ------------------------------------------------------------------------


def test_base_url_candidates_try_with_and_without_v1() -> None:
    assert doctor.base_url_candidates("https://taotoken.net/api") == [
        "https://taotoken.net/api",
        "https://taotoken.net/api/v1",
    ]
    assert doctor.base_url_candidates("http://h:8000/v1/") == ["http://h:8000/v1", "http://h:8000"]
    assert doctor.base_url_candidates("https://x/api/v1/chat/completions") == [
        "https://x/api/v1",
        "https://x/api",
    ]


def test_a_dns_failure_is_classified_from_the_exception_chain() -> None:
    try:
        try:
            raise socket.gaierror(-2, "Name or service not known")
        except socket.gaierror as exc:
            raise httpx.ConnectError("[Errno -2] Name or service not known") from exc
    except httpx.ConnectError as exc:
        kind, _ = probes._transport_error(exc)
    assert kind == doctor.DNS
    step = doctor.transport_step(
        "Base URL", Reply(url="http://nowhere.invalid/v1/models", error=kind)
    )
    assert "does not resolve" in step.detail


def test_key_hygiene_catches_whitespace_and_quotes() -> None:
    assert not doctor.key_hygiene("sk-abc\n").ok
    assert not doctor.key_hygiene('"sk-abcdef"').ok
    assert not doctor.key_hygiene("").ok
    assert doctor.key_hygiene("sk-abcdef").ok


def test_a_usage_only_final_chunk_is_not_a_missing_choices_error() -> None:
    body = (
        'data: {"choices":[{"delta":{"content":"O"}}]}\n\n'
        'data: {"choices":[],"usage":{"completion_tokens":1}}\n\ndata: [DONE]\n\n'
    )
    step = doctor.chat_step(
        Reply(url="u", status=200, content_type="text/event-stream", body=body), True, "m", []
    )
    assert step.ok, step
