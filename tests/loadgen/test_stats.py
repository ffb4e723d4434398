"""Summaries against hand-computed figures."""

from __future__ import annotations

import pytest

from loadgen import RequestSample, summarize, timeseries
from loadgen.stats import itl_stats, stage_summaries, validity


def sample(
    index: int,
    send: float,
    ttft: float,
    e2e: float,
    tokens: int,
    *,
    tier: str | None = "online",
    gaps: list[float] | None = None,
    error: str | None = None,
    warmup: bool = False,
) -> RequestSample:
    s = RequestSample(index=index, send_time=send, tier=tier, warmup=warmup, error=error)
    if error is None:
        s.ttft, s.e2e, s.output_tokens, s.content_chunks = ttft, e2e, tokens, tokens
        s.tpot = (e2e - ttft) / (tokens - 1)
        s.itl_raw = gaps if gaps is not None else []
        s.itl = itl_stats(s.itl_raw)
    return s


# Four online requests in the window (100, 104), one batch, one error, one warmup.
SAMPLES = [
    sample(0, 100.0, 0.1, 1.1, 11, gaps=[0.1] * 10),
    sample(1, 100.5, 0.2, 1.2, 11, gaps=[0.1] * 10),
    sample(2, 101.0, 0.3, 2.3, 11, gaps=[0.2] * 10),
    sample(3, 102.0, 0.4, 1.4, 6, gaps=[0.2] * 5),
    sample(4, 102.5, 0.5, 1.5, 3, tier="batch", gaps=[0.5, 0.5]),
    sample(5, 103.0, 0.0, 0.0, 0, tier="batch", error="HTTP 503: busy"),
    sample(6, 99.0, 9.0, 9.5, 2, gaps=[0.5], warmup=True),
]


def test_percentiles_are_nearest_rank_over_completed_requests() -> None:
    online = summarize(SAMPLES, (100.0, 104.0))["online"]
    ttft = online["ttft_s"]
    assert ttft["count"] == 4
    assert ttft["mean"] == pytest.approx(0.25)
    assert ttft["p50"] == pytest.approx(0.2)  # rank ceil(0.5 * 4) = 2
    assert ttft["p90"] == pytest.approx(0.4)  # rank ceil(3.6) = 4
    assert ttft["p99"] == pytest.approx(0.4)
    assert ttft["max"] == pytest.approx(0.4)
    # TPOT per request: 0.1, 0.1, 0.2, 0.2
    assert online["tpot_s"]["p50"] == pytest.approx(0.1)
    assert online["e2e_s"]["mean"] == pytest.approx((1.1 + 1.2 + 2.3 + 1.4) / 4)


def test_itl_pools_every_gap_of_every_request() -> None:
    online = summarize(SAMPLES, (100.0, 104.0))["online"]
    # 20 gaps of 0.1 and 15 of 0.2: the median gap is 0.1, the mean 5/35.
    assert online["itl_s"]["count"] == 35
    assert online["itl_s"]["p50"] == pytest.approx(0.1)
    assert online["itl_s"]["mean"] == pytest.approx((20 * 0.1 + 15 * 0.2) / 35)
    assert online["itl_source"] == "raw"


def test_throughput_is_completed_requests_over_the_window() -> None:
    summary = summarize(SAMPLES, (100.0, 104.0))
    overall = summary["overall"]
    assert overall["count"] == 6  # the warmup request is excluded
    assert overall["completed"] == 5
    assert overall["errors"] == 1
    assert overall["error_rate"] == pytest.approx(1 / 6)
    assert overall["request_throughput_rps"] == pytest.approx(5 / 4)
    assert overall["output_throughput_tps"] == pytest.approx((11 + 11 + 11 + 6 + 3) / 4)
    assert summary["batch"]["errors"] == 1
    assert summary["batch"]["request_throughput_rps"] == pytest.approx(1 / 4)


def test_goodput_counts_requests_meeting_both_slos() -> None:
    overall = summarize(SAMPLES, (100.0, 104.0), slo_ttft_ms=350, slo_tpot_ms=150)["overall"]
    # ttft <= 0.35 and tpot <= 0.15: requests 0 and 1 (request 2 has TPOT 0.2)
    assert overall["good_requests"] == 2
    assert overall["goodput_rps"] == pytest.approx(0.5)
    assert summarize(SAMPLES, (100.0, 104.0))["overall"]["goodput_rps"] is None


def test_without_raw_gaps_each_requests_mean_gap_stands_in() -> None:
    stripped = []
    for s in SAMPLES:
        copy = RequestSample.from_dict(s.to_dict(with_itl_raw=False))
        stripped.append(copy)
    online = summarize(stripped, (100.0, 104.0))["online"]
    assert online["itl_source"] == "per_request_mean"
    assert online["itl_s"]["mean"] == pytest.approx((20 * 0.1 + 15 * 0.2) / 35)


def test_timeseries_buckets_by_completion_second() -> None:
    rows = timeseries(SAMPLES, (100.0, 104.0))
    assert [r["second"] for r in rows] == [0, 1, 2, 3]
    # ends: 101.1, 101.7, 103.3, 103.4, 104.0 (last edge goes to the last second), err 103.0
    assert [r["completed"] for r in rows] == [0, 2, 0, 3]
    assert [r["errors"] for r in rows] == [0, 0, 0, 1]
    assert rows[1]["output_tokens"] == 22
    assert rows[1]["ttft_p50_s"] == pytest.approx(0.1)  # of 0.1 and 0.2: rank 1
    assert rows[0]["ttft_p99_s"] is None


def test_validity_flags_name_the_bound_passed() -> None:
    v = validity(SAMPLES, loop_lags=[0.001, 0.2], cpu_s=0.95, wall_s=1.0)
    names = " ".join(v["flags"])
    assert "loop_lag_max_s" in names
    assert "client_cpu_ratio" in names
    assert "error_rate" in names  # 1 error in 6
    assert not v["valid"]
    clean = validity(SAMPLES[:4], loop_lags=[0.001] * 10, cpu_s=0.1, wall_s=1.0)
    assert clean["flags"] == [] and clean["valid"]


def test_itl_stats_of_one_request() -> None:
    stats = itl_stats([0.01, 0.02, 0.03, 0.04, 0.10])
    assert stats.count == 5
    assert stats.mean == pytest.approx(0.04)
    assert stats.p50 == pytest.approx(0.03)
    assert stats.p99 == pytest.approx(0.10)  # rank ceil(4.95) = 5
    assert stats.max == pytest.approx(0.10)
    assert itl_stats([]).count == 0


def test_stage_summaries_cover_each_step_of_the_ladder() -> None:
    laddered = [sample(0, 100.0, 0.1, 1.0, 2), sample(1, 101.0, 0.1, 1.0, 2)]
    laddered[1].stage = 1
    rows = stage_summaries(laddered, [(1, 1.0), (4, 2.0)], 99.5, (100.0, 103.0))
    assert [r["stage"] for r in rows] == [0, 1]
    assert rows[0]["window"] == [100.0, 100.5]  # clipped by the warmup
    assert rows[0]["summary"]["overall"]["request_throughput_rps"] == pytest.approx(2.0)
    assert rows[1]["summary"]["overall"]["request_throughput_rps"] == pytest.approx(0.5)
    assert stage_summaries(laddered, [(1, 0.5), (4, 2.0)], 99.5, (100.0, 103.0))[0]["stage"] == 1
