"""The load generator's TTFT and ITL against a packet capture, with the client starved of CPU.

Real processes: the simulator on one core; tcpdump on loopback; the load generator's CLI on
the other core beside two busy loops. The client runs at `nice 5`, so the loops take about 86%
of the core and the client is descheduled for milliseconds to tens of milliseconds at a time.
At equal niceness the kernel's short slices (EEVDF, 6.x kernels) kept the client's longest
stall near 5 ms on some machines; niced it is 10-15 ms. The capture's kernel times are the truth.

What is asserted, and why it is the right bar (docs/performance.md, "Load generator
accuracy"): every figure the client presents as a wire time agrees with the
capture within 1 ms at p99; the chunks it reports with one kernel time (a zero ITL gap) are
ones the kernel had merged into one buffer while the socket went unread (the capture shows the
client's ACK before the later segment), not ones the client collapsed by reading several
segments at once; and the run names the figures those merges make untrustworthy, in its
validity and in the CLI summary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_agent.sim.testing import run_sim_process
from loadgen import capture
from loadgen.cli import UNTRUSTED_MARK
from loadgen.types import RequestSample

ROOT = Path(__file__).resolve().parents[2]
CORES = sorted(os.sched_getaffinity(0))
SERVER_CORES = {CORES[0]}
CLIENT_CORES = {CORES[-1]}  # the same core as the server on a one-core machine


@pytest.fixture
def hogs() -> Iterator[None]:
    """Two busy loops on the client's core."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while 1: pass"], stdin=subprocess.DEVNULL)
        for _ in range(2)
    ]
    for proc in procs:
        os.sched_setaffinity(proc.pid, CLIENT_CORES)
    yield
    for proc in procs:
        proc.kill()
        proc.wait()


def run_loadgen(base: str, out: Path) -> subprocess.CompletedProcess[str]:
    command = [
        *("nice", "-n", "5"),  # the client's share of its core: a seventh beside the two loops
        *("taskset", "-c", ",".join(map(str, CLIENT_CORES))),
        *(sys.executable, "-m", "loadgen", "--base-url", f"{base}/v1", "--model", "m"),
        *("--concurrency", "4", "--duration", "5", "--max-tokens", "32"),
        *("--prompt-tokens", "64", "--keep-itl", "--quiet", "--json", str(out)),
    ]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_timing_agrees_with_a_packet_capture_when_the_client_is_starved(
    tmp_path: Path, hogs: None
) -> None:
    pcap, out = tmp_path / "run.pcap", tmp_path / "run.json"
    # The default preset: a decode step every ~6 ms, so a stall of tens of ms queues chunks.
    with run_sim_process("m", [], preset=None, cpus=SERVER_CORES) as base:
        port = int(base.rsplit(":", 1)[1])
        with capture.tcpdump(pcap, port, cpus=SERVER_CORES):
            run = run_loadgen(base, out)
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    samples = [RequestSample.from_dict(s) for s in result["samples"]]
    wire = capture.exchanges(capture.read_pcap(pcap), port)
    cmp = capture.compare(samples, wire)

    assert cmp.matched >= 40 and cmp.unmatched == 0 and cmp.chunk_count_mismatch == 0
    # The client was starved: its loop lagged far beyond an inter-token gap.
    assert result["validity"]["loop_lag_max_s"] > 0.005

    # What the client presents as wire times is within 1 ms of the capture at p99...
    ttft, itl = capture.error_ms(cmp.ttft_errors_trusted), capture.error_ms(cmp.itl_errors_trusted)
    assert ttft["p99"] is not None and ttft["p99"] <= 1.0, (ttft, cmp.ttft_errors)
    assert itl["p99"] is not None and itl["p99"] <= 1.0, itl
    # ...and is most of what it measured (reading whole queues at once, it was a sixth).
    assert len(cmp.ttft_errors_trusted) >= 0.8 * cmp.matched
    assert len(cmp.itl_errors_trusted) >= 0.4 * len(cmp.itl_errors)

    # Chunks it reports with one time were merged by the kernel, not by its reads (reading
    # all that was queued at once made 80-90% of them its own). The capture's model of when
    # the kernel merges is approximate: in a full run on kernel 6.18 it judged 9 of 62 (15%)
    # the client's own, with every timing check above within bounds.
    assert cmp.merged_not_by_kernel <= max(3, 0.25 * cmp.merged_gaps), cmp

    # The run says so: the share of such gaps, and ITL/TTFT marked where it passes the bound.
    validity = result["validity"]
    gaps = sum(s.itl.count for s in samples if s.ok)
    assert validity["itl_merged_share"] == pytest.approx(cmp.merged_gaps / gaps)
    bound = validity["bounds"]["itl_merged_share"]
    marked = f"{UNTRUSTED_MARK} ITL is not a wire time" in run.stdout
    assert ("itl_s" in validity["untrusted"]) == marked == (cmp.merged_gaps / gaps > bound)
    if marked:
        itl_row = next(line for line in run.stdout.splitlines() if line.startswith("overall"))
        assert UNTRUSTED_MARK in itl_row


def test_merged_chunks_mark_the_figures_in_validity_and_the_cli_summary() -> None:
    from loadgen.cli import format_summary
    from loadgen.stats import itl_stats, summarize, untrusted, validity
    from loadgen.types import RunResult

    samples = []
    for i in range(10):
        s = RequestSample(index=i, send_time=100.0 + i, ttft=0.05, e2e=0.2, output_tokens=11)
        s.itl_raw = [0.015] * 8 + [0.0, 0.03] if i < 2 else [0.015] * 10
        s.itl, s.content_chunks = itl_stats(s.itl_raw), 11
        s.merged_gaps = 1 if i < 2 else 0
        s.first_token_merged = i == 0
        samples.append(s)
    checks = validity(samples, loop_lags=[0.001], cpu_s=1.0, wall_s=10.0)
    assert checks["itl_merged_share"] == pytest.approx(2 / 100)
    assert checks["ttft_merged_share"] == pytest.approx(1 / 10)
    checks["receive_times"] = "kernel"
    checks["untrusted"] = untrusted(checks)
    assert set(checks["untrusted"]) == {"itl_s", "ttft_s"}
    assert checks["untrusted"]["itl_s"].startswith("2.0% of ITL gaps")
    result = RunResult(
        spec={},
        started_at=100.0,
        finished_at=110.0,
        window=(100.0, 110.0),
        samples=samples,
        summary=summarize(samples, (100.0, 110.0)),
        timeseries=[],
        validity=checks,
    )
    text = format_summary(result)
    overall = next(line for line in text.splitlines() if line.startswith("overall"))
    ttft_cell, tpot_cell, itl_cell, e2e_cell = overall.split()[3:7]
    assert ttft_cell.endswith(UNTRUSTED_MARK) and itl_cell.endswith(UNTRUSTED_MARK)
    assert not tpot_cell.endswith(UNTRUSTED_MARK) and not e2e_cell.endswith(UNTRUSTED_MARK)
    assert f"{UNTRUSTED_MARK} ITL is not a wire time: 2.0% of ITL gaps" in text
    # Under the bounds nothing is marked.
    quiet = validity(samples[2:], loop_lags=[0.001], cpu_s=1.0, wall_s=10.0)
    quiet["receive_times"] = "kernel"
    assert untrusted(quiet) == {}
