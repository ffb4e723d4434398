"""Pure-asyncio load generator for OpenAI-compatible streaming endpoints (no Django).

Shell: ``python -m loadgen --base-url http://host:port/v1 --model M
[--concurrency N | --rate R [--poisson|--constant] | --stages "32:60,128:180"]
[--requests N | --duration S] [--warmup S] [--prompt-tokens N] [--max-tokens N]
[--tier-mix online=0.7,batch=0.2,offline=0.1] [--json FILE] ...`` (``--help`` lists all).

Library (what the console's Celery task calls)::

    from loadgen import WorkloadSpec, run_workload, summarize

    spec = WorkloadSpec.from_dict({...})            # or from_seed003_settings(settings_json)
    result = asyncio.run(run_workload(spec, on_progress=cb, cancel_event=None))
    result.samples      # list[RequestSample], one per completed request (warmup included,
                        # flagged `warmup=True`); requests cut off by a cancel are dropped
    result.summary      # {"<tier>": {...}, ..., "overall": {...}}: count, completed, errors,
                        # error_rate, shed, shed_rate (the gateway's refusals for overload,
                        # apart from errors: stats.is_shed),
                        # ttft_s/tpot_s/itl_s/e2e_s {count, mean, p50, p90, p99,
                        # max}, request_throughput_rps, output_throughput_tps, goodput_rps
    result.timeseries   # per second of the measured window: completed, errors, shed,
                        # output_tokens, ttft_p50_s, ttft_p99_s
    result.validity     # dispatch/loop lag, client CPU, usage_missing, flags: list[str],
                        # itl/ttft_merged_share, untrusted: {"itl_s": why, ...} (figures
                        # that are not wire times: shown marked, docs/benchmarks.md)
    result.to_json_dict()

- ``WorkloadSpec(base_url, model, ...)``: dataclass; ``to_dict()`` never includes the API key;
  ``from_dict(d)`` rejects unknown fields; invalid values raise ``SpecError`` naming the field.
- ``from_seed003_settings(d, *, base_url=None, model=None) -> WorkloadSpec``.
- ``async run_workload(spec, *, on_progress=None, cancel_event=None) -> RunResult``.
  ``on_progress(Progress)`` is called about every 0.5 s from a worker thread (never
  concurrently with itself, so a slow database write cannot stall the event loop) and once
  more with ``percent=100`` on the caller's thread at the end. Setting ``cancel_event`` stops
  dispatching, abandons requests in flight and returns what completed (``cancelled=True``).
  ``cancel_event`` may be an ``asyncio.Event`` or a ``threading.Event`` (polled every 50 ms),
  so sync code (a Celery task) can run ``asyncio.run(run_workload(spec, ...))`` and cancel
  from another thread, or from ``on_progress`` itself, by setting a ``threading.Event``.
- ``summarize(samples, window=None, *, slo_ttft_ms=None, slo_tpot_ms=None) -> dict``: the
  same summary, pure, over stored samples; ``window`` is the measured (start, end) in unix
  seconds. Pooled ITL percentiles need each sample's raw gaps (``keep_itl_raw``); without
  them each request's mean gap stands in (``itl_source: "per_request_mean"``).

- ``percentile(values, q)`` / ``percentiles(values, qs)`` (q in per cent): the nearest-rank
  percentile every figure of Tiergate uses (``percentiles.py``, docs/metrics.md).

- ``WorkloadSpec.processes`` (``--processes N``) splits the streams over N client processes,
  one event loop each (``shards.py``), merged into one ``RunResult``; use it past ~64 streams
  on a machine with spare cores (docs/performance.md, "Load generator accuracy").
- ``loadgen.capture``: a loopback packet capture (tcpdump) read into wire times, to check the
  client's TTFT and ITL against (tests/loadgen/test_capture.py, ``lab/bench_loadgen.py
  capture``).
- ``python -m loadgen.refserver``: a deterministic streaming server with
  per-request ground truth, for tests and ``lab/bench_loadgen.py``.

Semantics (docs/architecture.md#benchmarks): TTFT = send -> first non-empty content delta; ITL =
every gap between content chunks; TPOT = (e2e - ttft) / (output_tokens - 1); token counts from
``usage`` (``stream_options.include_usage`` is always requested), falling back to the content chunk
count with ``usage_missing=True``. Request throughput = completed requests / measured window.
Synthetic prompts approximate one token per word (short common English words that BPE vocabularies
hold as single tokens); the chat template adds a few, and the server's ``usage.prompt_tokens`` is
what is recorded. The measured window starts when the warmup ends and ends at the later of the
duration's end and the last measured completion.

Limits: one event loop handles chunks one at a time, so hundreds of streams stepping together
delay the last chunks of a burst by milliseconds (``validity`` flags the run); ``processes``
splits the load over cores. With ``--prompts-file`` every shard starts at the file's first line.
"""

from __future__ import annotations

from loadgen.percentiles import percentile, percentiles
from loadgen.runner import run_workload
from loadgen.spec import (
    SpecError,
    Stage,
    WorkloadSpec,
    from_seed003_settings,
    parse_stages,
    parse_tier_mix,
)
from loadgen.stats import summarize, timeseries
from loadgen.types import ItlStats, Progress, RequestSample, RunResult

__all__ = [
    "ItlStats",
    "Progress",
    "RequestSample",
    "RunResult",
    "SpecError",
    "Stage",
    "WorkloadSpec",
    "from_seed003_settings",
    "parse_stages",
    "parse_tier_mix",
    "percentile",
    "percentiles",
    "run_workload",
    "summarize",
    "timeseries",
]
