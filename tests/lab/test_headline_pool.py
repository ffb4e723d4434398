"""`python -m lab.headline.pool` (lab/headline/pool.py): the paired rounds of several runs
judged as one.

Committed round sets (lab/data/rounds/, measured once and never rewritten) pool to the figures
they gave when they were measured, so a change to the statistics shows; a set exported from a
rounds record keeps each round's ratio and steadiness; bad sets are refused by name; drawn A/A
rounds are called no change and non-inferior."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lab.headline.pool import main, pool, rounds_to_resolve
from lab.headline.round_sets import SetError, as_set, from_record
from loadgen import RequestSample, RunResult

ROOT = Path(__file__).resolve().parents[2]
SETS = ROOT / "lab" / "data" / "rounds"


def _load(*names: str, arm: str = "d") -> list[dict[str, Any]]:
    return [
        as_set(json.loads((SETS / f"{n}.json").read_text(encoding="utf-8")), arm, "b", n)
        for n in names
    ]


def _close(pooled: dict[str, Any], centre: float, low: float, high: float) -> None:
    assert pooled["p99_ratio"] == pytest.approx(centre, abs=0.0015)
    assert pooled["p99_ratio_interval"][0] == pytest.approx(low, abs=0.0015)
    assert pooled["p99_ratio_interval"][1] == pytest.approx(high, abs=0.0015)


def test_committed_sets_pool_to_the_figures_they_gave() -> None:
    own = pool(_load("P", "Q", "R"))
    assert own["rounds"] == 28 and own["p99_verdict"] == "no clear change"
    _close(own, 0.992, 0.860, 1.145)
    assert own["non_inferior"]  # upper end x1.145 <= x1.15
    _close(pool(_load("Q", "R")), 0.935, 0.802, 1.091)
    shared = pool(_load("N", "O"), steady_only=True)
    assert shared["rounds"] == 19 and shared["left_out"] == 5
    _close(shared, 0.949, 0.794, 1.135)
    _close(pool(_load("Q-r", arm="r")), 0.903, 0.675, 1.207)


def _record(ratios: list[float], stalls: list[float | None]) -> dict[str, Any]:
    """A rounds record whose (d) has exactly `ratios` x (b)'s online P99 per round."""
    rng = np.random.default_rng(3)
    records = []
    for ratio, stall in zip(ratios, stalls, strict=True):
        base = list(rng.lognormal(-1.5, 0.5, 300))
        records.append(
            {
                "b": {"ttft_s": base, "throughput_rps": 10.0, "client_stall_s": 0.01},
                "d": {"ttft_s": [t * ratio for t in base], "throughput_rps": 9.8,
                      "client_stall_s": stall},
            }
        )  # fmt: skip
    return {"records": records, "rate_rps": 12.5}


def test_a_set_from_a_record_keeps_ratios_and_steadiness() -> None:
    s = from_record(_record([0.8, 1.25, 1.0], [0.02, 0.3, None]), "d", "b", "X", layout="own")
    assert s["layout"] == "own" and s["name"] == "X"
    assert [r["p99_ratio"] for r in s["rounds"]] == pytest.approx([0.8, 1.25, 1.0])
    assert [r["steady"] for r in s["rounds"]] == [True, False, None]
    assert s["rounds"][0]["throughput_ratio"] == pytest.approx(0.98)
    steady = pool([s], steady_only=True)
    assert steady["rounds"] == 2 and steady["left_out"] == 1  # the unknown one stays
    assert pool([s])["rounds"] == 3
    with pytest.raises(SetError, match="lack --arm r"):
        from_record(_record([1.0], [0.0]), "r", "b", "X")


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"records": []}, "lack --arm"),
        ({"kind": "something"}, "kind"),
        ({"kind": "headline round set", "arm": "r", "reference": "b"}, "arm: holds"),
        ({"kind": "headline round set", "arm": "d", "reference": "b", "rounds": []}, "rounds:"),
        ({"kind": "headline round set", "arm": "d", "reference": "b", "rounds": [3]},
         r"rounds\[1\]: an object"),
        ({"kind": "headline round set", "arm": "d", "reference": "b",
          "rounds": [{"p99_ratio": -1}]}, r"rounds\[1\].p99_ratio"),
        ({"kind": "headline round set", "arm": "d", "reference": "b",
          "rounds": [{"p99_ratio": 1.0, "steady": "yes"}]}, r"rounds\[1\].steady"),
        ({"kind": "headline round set", "arm": "d", "reference": "b",
          "rounds": [{"p99_ratio": 1.0, "done_ratio": 0}]}, r"rounds\[1\].done_ratio"),
        ({"kind": "headline round set", "arm": "d", "reference": "b",
          "rounds": [{"p99_ratio": 1.0, "reference_waiting": -2}]},
         r"rounds\[1\].reference_waiting"),
        ({"kind": "headline round set", "arm": "d", "reference": "b",
          "rounds": [{"p99_ratio": 1.0, "throughput_ratio": "fast"}]},
         r"rounds\[1\].throughput_ratio"),
        ({"kind": "headline round set", "arm": "d", "reference": "b",
          "rounds": [{"p99_ratio": 1.0, "offline_p99_ratio": 0}]},
         r"rounds\[1\].offline_p99_ratio"),
    ],
)  # fmt: skip
def test_a_bad_set_is_refused_by_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(SetError, match=field):
        as_set(doc, "d", "b", "bad")


def _docs(done: list[tuple[float, float]], waiting: list[float | None]) -> list[dict[str, Any]]:
    """Each round's experiment document, as lab.headline keeps it in the record's `docs`:
    (b)'s and (d)'s requests done in the window, and (b)'s engine's mean waiting count."""
    return [
        {"arms": [
            {"key": "b", "tiers": {"overall": {"done_in_window_rps": b,
                                                "tokens_in_window_tps": 100 * b}},
             "engine": {"engine_waiting": {"mean": w, "max": None}}},
            {"key": "d", "tiers": {"overall": {"done_in_window_rps": d,
                                                "tokens_in_window_tps": 90 * d}},
             "engine": {"engine_waiting": {"mean": 0.5, "max": 2}}},
        ]}
        for (b, d), w in zip(done, waiting, strict=True)
    ]  # fmt: skip


def test_a_set_keeps_the_window_and_the_regime_and_pools_by_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = _record([0.5, 0.6, 1.4, 1.3], [0.01] * 4)
    record["docs"] = _docs([(10, 9.7), (10, 9.9), (8, 8.0), (8, 7.6)], [6.0, 3.5, 0.2, None])
    s = from_record(record, "d", "b", "R")
    assert [r["done_ratio"] for r in s["rounds"]] == pytest.approx([0.97, 0.99, 1.0, 0.95])
    assert [r["reference_waiting"] for r in s["rounds"]] == [6.0, 3.5, 0.2, None]
    every = pool([s])
    assert every["rounds"] == 4 and every["done_rounds"] == 4
    assert every["done_ratio"] == pytest.approx((0.97 * 0.99 * 1.0 * 0.95) ** 0.25)
    low, high = every["done_ratio_interval"]
    assert low < every["done_ratio"] < high
    assert [r["tokens_ratio"] for r in s["rounds"]] == pytest.approx(
        [0.9 * r["done_ratio"] for r in s["rounds"]]
    )
    assert every["tokens_ratio"] == pytest.approx(0.9 * every["done_ratio"])
    assert every["throughput_ratio"] == pytest.approx(0.98)  # each round 9.8 / 10
    assert every["throughput_ratio_interval"] == pytest.approx((0.98, 0.98))
    # Past the knee only: the two rounds whose (b) queued at least 1; the unread one goes too.
    busy = pool([s], saturated=1.0)
    assert busy["rounds"] == 2 and busy["left_out"] == 2
    assert busy["p99_ratio"] == pytest.approx((0.5 * 0.6) ** 0.5, rel=1e-3)
    assert busy["done_ratio"] == pytest.approx((0.97 * 0.99) ** 0.5)
    path = tmp_path / "R.json"
    path.write_text(json.dumps(record))
    assert main([str(path), "--saturated", "1"]) == 0
    out = capsys.readouterr().out
    assert "whose (b) engine queued at least 1 on average (2 unsteady or unsaturated" in out
    assert "requests done in the window: x0.980 (paired 95% interval" in out
    assert "output tokens streamed in the window: x0.882 (paired 95% interval" in out
    # A record without documents (older runs) still exports, without the window's figures.
    assert from_record(_record([1.0], [0.0]), "d", "b", "O")["rounds"][0]["done_ratio"] is None


def test_a_set_keeps_the_lower_tiers_p99_and_pools_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the online figure costs the lower tiers: each round's batch and offline TTFT P99
    over the reference's, pooled with their own paired interval; absent where not recorded."""
    record = _record([0.9, 1.0, 0.95], [0.01] * 3)
    offline = [(5000.0, 3300.0), (4000.0, 2800.0), (6000.0, 3900.0)]
    record["docs"] = [
        {"arms": [{"key": k, "tiers": {"offline": {"ttft_p99_ms": pair[i]},
                                       "batch": {"ttft_p99_ms": 1000.0}}}
                  for i, k in enumerate(("b", "d"))]}
        for pair in offline
    ]  # fmt: skip
    s = from_record(record, "d", "b", "T")
    assert [r["offline_p99_ratio"] for r in s["rounds"]] == pytest.approx([0.66, 0.7, 0.65])
    assert [r["batch_p99_ratio"] for r in s["rounds"]] == [1.0, 1.0, 1.0]
    pooled = pool([as_set(json.loads(json.dumps(s)), "d", "b", "T")])
    assert pooled["offline_p99_rounds"] == 3
    assert pooled["offline_p99_ratio"] == pytest.approx((0.66 * 0.7 * 0.65) ** (1 / 3))
    low, high = pooled["offline_p99_ratio_interval"]
    assert 0.6 < low < pooled["offline_p99_ratio"] < high < 0.75
    assert pooled["batch_p99_ratio_interval"] == pytest.approx((1.0, 1.0))
    path = tmp_path / "T.json"
    path.write_text(json.dumps(record))
    assert main([str(path)]) == 0
    printed = capsys.readouterr().out
    assert "offline TTFT P99: x0.670 (paired 95% interval x0.608 to x0.738;" in printed
    bare = pool([from_record(_record([1.0, 1.1], [0.0, 0.0]), "d", "b", "O")])
    assert bare["offline_p99_rounds"] == 0 and bare["offline_p99_ratio"] is None


def _with_options(record: dict[str, Any], seed: int, rate: float = 14.5) -> dict[str, Any]:
    """`record` as lab.headline writes it: round i's document names workload seed + i."""
    options = {"rate": rate, "duration_s": 40.0, "warmup_s": 5.0, "time_scale": 2.0,
               "engine": "sim"}  # fmt: skip
    record["docs"] = [
        {"options": {**options, "seed": seed + i}} for i in range(len(record["records"]))
    ]
    return record


def test_rounds_that_replay_one_workload_are_also_counted_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs with the same seed and rate send the same requests round by round: the pool
    keeps every round in its paired figure and also counts each workload once."""
    first = from_record(_with_options(_record([0.8, 0.9, 1.0], [0.0] * 3), 11), "d", "b", "A")
    again = from_record(_with_options(_record([0.9, 1.1], [0.0] * 2), 11), "d", "b", "B")
    other = from_record(_with_options(_record([0.7], [0.0]), 11, rate=20.0), "d", "b", "C")
    assert first["rounds"][1]["workload"] == "seed 12 at 14.5 req/s, 5+40 s, sim at time scale 2"
    assert again["rounds"][1]["workload"] == first["rounds"][1]["workload"]
    assert other["rounds"][0]["workload"] != first["rounds"][0]["workload"]  # another rate
    # seeds past six digits stay apart (":g" would have written both as 1.23457e+06)
    big = [from_record(_with_options(_record([0.9], [0.0]), seed), "d", "b", "L")
           for seed in (1234567, 1234568)]  # fmt: skip
    assert big[0]["rounds"][0]["workload"].startswith("seed 1234567 at 14.5 req/s")
    assert big[0]["rounds"][0]["workload"] != big[1]["rounds"][0]["workload"]
    pooled = pool([as_set(json.loads(json.dumps(s)), "d", "b", s["name"])
                   for s in (first, again, other)])  # fmt: skip
    assert pooled["rounds"] == 6  # every round is still a pair of its own
    assert pooled["workloads"] == 4 and pooled["replayed_rounds"] == 4
    by_hand = [(0.8 * 0.9) ** 0.5, (0.9 * 1.1) ** 0.5, 1.0, 0.7]
    geo = float(np.exp(np.mean(np.log(by_hand))))
    assert pooled["by_workload_ratio"] == pytest.approx(geo)
    low, high = pooled["by_workload_interval"]
    assert low < geo < high and pooled["by_workload_verdict"] == "no clear change"
    for s in (first, again):
        (tmp_path / f"{s['name']}.json").write_text(json.dumps(s))
    assert main([str(tmp_path / "A.json"), str(tmp_path / "B.json"), "--arm", "d"]) == 0
    printed = capsys.readouterr().out
    assert "online TTFT P99 counted by workload: x0.945 (paired 95% interval" in printed
    assert "over 3 workloads, 4 rounds replaying one): no clear change" in printed

    # No repeat (or no workload recorded): no by-workload figure, and no line for it.
    alone = pool([first])
    assert alone["replayed_rounds"] == 0 and alone["by_workload_interval"] is None
    assert main([str(tmp_path / "A.json"), "--arm", "d"]) == 0
    assert "counted by workload" not in capsys.readouterr().out
    unrecorded = pool([from_record(_record([0.9, 1.05], [0.0, 0.0]), "d", "b", "U")] * 2)
    assert unrecorded["workloads"] == 4 and unrecorded["replayed_rounds"] == 0

    # A probed rate (--load-factor) is not in round 1's options, only in what it offered; the
    # later rounds of the run carry it over, and all of them name the same rate.
    probed = _with_options(_record([0.9, 1.0], [0.0] * 2), 4200, rate=33.6)
    probed["docs"][0]["options"]["rate"] = None
    probed["docs"][0]["workload"] = {"rate_rps": 33.6}
    names = [r["workload"] for r in from_record(probed, "d", "b", "P")["rounds"]]
    assert names == [f"seed {s} at 33.6 req/s, 5+40 s, sim at time scale 2" for s in (4200, 4201)]
    del probed["docs"][0]["workload"]
    assert from_record(probed, "d", "b", "P")["rounds"][0]["workload"] is None

    bad = json.loads(json.dumps(first))
    bad["rounds"][0]["workload"] = ""
    with pytest.raises(SetError, match=r"rounds\[1\]\.workload: a non-empty string or null"):
        as_set(bad, "d", "b", "bad")


def _run(window_start: float, samples: list[RequestSample]) -> dict[str, Any]:
    return RunResult(spec={}, started_at=window_start, finished_at=window_start + 40,
                     window=(window_start, window_start + 40), samples=samples, summary={},
                     timeseries=[], validity={}).to_json_dict()  # fmt: skip


def test_a_record_from_before_the_token_figure_takes_it_from_the_rounds_folder(
    tmp_path: Path,
) -> None:
    """Arms recorded before `tokens_in_window_tps` existed: the ratio comes from each round's
    `arm-X.json`, when the folder is still there, and is absent when it is not."""

    def sample(send: float, tokens: int) -> RequestSample:
        return RequestSample(index=0, send_time=send, ttft=0.5, e2e=2.5, output_tokens=tokens,
                             status=200)  # fmt: skip

    folder = tmp_path / "round-1"
    folder.mkdir()
    (folder / "arm-b.json").write_text(json.dumps(_run(0, [sample(1, 41), sample(3, 41)])))
    (folder / "arm-d.json").write_text(json.dumps(_run(0, [sample(1, 41), sample(3, 21)])))
    record = _record([0.8, 1.1], [0.01, 0.01])
    record["docs"] = _docs([(1, 1), (1, 1)], [2.0, 2.0])
    for doc in record["docs"]:
        doc["workload"] = {"duration_s": 10.0}
        for arm in doc["arms"]:
            del arm["tiers"]["overall"]["tokens_in_window_tps"]
    record["round_workdirs"] = [str(folder), str(tmp_path / "gone")]
    rounds = from_record(record, "d", "b", "F")["rounds"]
    assert rounds[0]["tokens_ratio"] == pytest.approx(62 / 82)
    assert rounds[1]["tokens_ratio"] is None


def test_drawn_a_a_rounds_are_no_change_and_non_inferior() -> None:
    """80 rounds whose log ratios are noise around x1 with the real engine's spread."""
    rng = np.random.default_rng(11)
    rounds = [{"p99_ratio": float(np.exp(x))} for x in rng.normal(0, 0.3, 80)]
    pooled = pool([{"name": "AA", "rounds": rounds}])
    assert pooled["p99_verdict"] == "no clear change" and pooled["non_inferior"]
    worse = pool([{"name": "W", "rounds": [{"p99_ratio": r["p99_ratio"] * 1.6} for r in rounds]}])
    assert worse["p99_verdict"] == "worse" and not worse["non_inferior"]


def test_rounds_to_resolve_grows_as_the_difference_shrinks() -> None:
    assert rounds_to_resolve(1.0, 0.3) is None and rounds_to_resolve(0.9, None) is None
    near, far = rounds_to_resolve(0.95, 0.3), rounds_to_resolve(0.8, 0.3)
    assert far < near
    assert 120 < near < 160  # (1.97 x 0.3 / ln 0.95)^2 ~ 138
    assert rounds_to_resolve(1.05, 0.3) == pytest.approx(near, rel=0.15)


def test_export_writes_a_set_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = tmp_path / "S.json"
    record.write_text(json.dumps(_record([0.9, 1.1, 0.95], [0.01, 0.01, 0.2])))
    out = tmp_path / "S-set.json"
    assert main([str(record), "--export", str(out), "--meta", "layout=shared"]) == 0
    written = json.loads(out.read_text())
    assert written["name"] == "S" and written["layout"] == "shared" and written["rate_rps"] == 12.5
    assert [r["steady"] for r in written["rounds"]] == [True, True, False]
    assert "over 3 paired rounds of S" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main([str(record), "--export", str(out)])
    assert exit_.value.code == 2 and "exists; nothing was written" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main([str(record), "--export", str(tmp_path / "no" / "x.json")])
    assert exit_.value.code == 2 and "nothing was written" in capsys.readouterr().err
    assert main([str(out), "--steady"]) == 0  # the set itself pools
    assert "(1 unsteady rounds left out)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing.json"], "No such file"),
        (["lab/data/rounds/Q.json", "--arm", "r"], "arm: holds (d)"),
        (["lab/data/rounds/Q.json", "--margin", "0.9"], "--margin 0.9"),
        (["lab/data/rounds/Q.json", "lab/data/rounds/R.json", "--export", "x.json"], "exactly one"),
        (["lab/data/rounds/Q.json", "--meta", "layout"], "--meta: KEY=VALUE"),
        (["lab/data/rounds/Q.json", "--saturated", "-1"], "--saturated -1"),
    ],
)
def test_bad_arguments_exit_2_naming_them(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err
