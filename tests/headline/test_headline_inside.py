"""perf.headline.inside: a slow first token split by the gateway's trace, and perf.headline.tail
reading the trace a round's folder holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.bench.headline.procs import gateway_trace_path
from loadgen.types import RequestSample, RunResult
from perf.headline import inside, tail

T0 = 1_800_000_000.0


def _sample(i: int, sent: float, ttft: float, rid: str | None) -> RequestSample:
    return RequestSample(
        index=i, send_time=T0 + sent, tier="online", ttft=ttft, e2e=ttft + 0.3,
        response_id=rid, status=200,
    )  # fmt: skip


def _line(rid: str, at: float, wait: float, head: float, first: float) -> dict[str, object]:
    return {"id": rid, "tier": "online", "at": T0 + at, "wait": wait, "head": head,
            "first": first, "end": first + 300, "outcome": "ok"}  # fmt: skip


def test_gateway_id_is_found_in_the_engines_response_id() -> None:
    assert inside.gateway_id("chatcmpl-tg1f2e-17") == "tg1f2e-17"
    assert inside.gateway_id("cmpl-tg9-3-0") == "tg9-3"
    assert inside.gateway_id("chatcmpl-5f0c") is None
    assert inside.gateway_id(None) is None


def test_split_adds_up_to_the_clients_ttft() -> None:
    # Sent at 10.000 s, at the gateway 2 ms later, queued 300 ms, the engine's head 5 ms on,
    # its first delta 400 ms after that; the client had it 1 s after sending.
    parts = inside.split(_sample(1, 10.0, 1.0, "x"), _line("x", 10.002, 300, 305, 705))
    assert parts == {
        "ttft": 1000.0, "to_gateway": 2.0, "wait": 300.0, "to_head": 5.0, "to_first": 400.0,
        "to_client": 293.0,
    }  # fmt: skip
    assert sum(v for k, v in parts.items() if k != "ttft") == pytest.approx(parts["ttft"])


def test_split_is_none_without_a_first_token_on_either_side() -> None:
    line = _line("x", 0.0, 1, 2, 3)
    assert inside.split(_sample(1, 0.0, 0.1, "x"), {**line, "first": None}) is None
    assert inside.split(RequestSample(index=1, send_time=T0), line) is None


def test_stalls_count_only_the_part_inside_the_request() -> None:
    # A 0.5 s stall ending at 10.3 s overlaps a request sent at 10.0 s with TTFT 1 s by 0.3 s;
    # one ending at 9.0 s does not overlap it.
    lags = [{"lag": 0.5, "at": T0 + 10.3}, {"lag": 0.2, "at": T0 + 9.0}]
    assert inside.stalls_during(lags, T0 + 10.0, T0 + 11.0) == [(T0 + 9.8, T0 + 10.3)]
    rows = inside.inside(
        [_sample(4, 10.0, 1.0, "chatcmpl-tg1-4")], [_line("tg1-4", 10.0, 0, 1, 900)], lags
    )
    assert rows[0]["stalled"] == pytest.approx(300.0)
    assert rows[0]["index"] == 4 and rows[0]["id"] == "tg1-4"


def test_requests_the_trace_lacks_are_left_out_and_the_summary_is_their_mean() -> None:
    tail_ = [_sample(1, 0.0, 0.5, "chatcmpl-tg1-1"), _sample(2, 0.0, 0.3, "chatcmpl-tg1-2"),
             _sample(3, 0.0, 0.9, "chatcmpl-tg1-99")]  # fmt: skip
    lines = [_line("tg1-1", 0.0, 100, 101, 400), _line("tg1-2", 0.0, 0, 1, 250)]
    rows = inside.inside(tail_, lines, [])
    assert [r["index"] for r in rows] == [1, 2]
    mean = inside.summary(rows)
    assert mean["ttft"] == pytest.approx(400.0) and mean["wait"] == pytest.approx(50.0)
    assert inside.summary([]) == {}


def test_tail_splits_a_gateway_arms_tail_from_the_folders_trace(tmp_path: Path, capsys) -> None:
    # 200 online requests at 20 ms, three at 600 ms of which the gateway held each 500 ms.
    samples = []
    for i in range(200):
        slow = i in (100, 101, 102)
        samples.append(_sample(i, i * 0.1, 0.6 if slow else 0.02, f"chatcmpl-tgab-{i}"))
    run = RunResult(
        spec={}, started_at=T0, finished_at=T0 + 25.0, window=(T0, T0 + 20.0),
        samples=samples, summary={}, timeseries=[], validity={},
    )  # fmt: skip
    (tmp_path / "arm-d.json").write_text(json.dumps(run.to_json_dict()), encoding="utf-8")
    doc = {"arms": [{"key": "d", "name": "gateway-seed-priority"}]}
    (tmp_path / "headline.json").write_text(json.dumps(doc), encoding="utf-8")
    lines = [
        _line(f"tgab-{i}", i * 0.1 + 0.001, 500 if i in (100, 101, 102) else 0, 0, 0)
        for i in range(200)
    ]
    for line in lines:
        line["head"] = float(line["wait"]) + 1  # type: ignore[arg-type]
        line["first"] = float(line["wait"]) + 90  # type: ignore[arg-type]
    trace = gateway_trace_path(tmp_path, "gateway-seed-priority")
    trace.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"lag": 0.03, "at": 1}\n')
    arms = tail.describe_round(tmp_path, "online", "b")
    mean = arms["d"]["inside"]["mean_ms"]
    assert mean["wait"] == pytest.approx(500.0)
    assert mean["to_first"] == pytest.approx(89.0)
    assert len(arms["d"]["inside"]["requests"]) == 3
    assert "queued 500" in "\n".join(tail.render("r", arms, "b"))
