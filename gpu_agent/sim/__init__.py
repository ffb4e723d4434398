"""A simulated vLLM engine: same flags and HTTP API as `vllm serve`, latencies from a model.

Start it with ``python -m gpu_agent.sim serve MODEL [vLLM flags] [--sim-* flags]`` (see
config.py for the flags and the hardware presets), or from tests with
``gpu_agent.sim.testing.run_sim_process``.

Modules: config (flags, presets), tokens (the token approximation), kvcache (paged KV cache with
prefix caching), engine (the pure step model), runner (the asyncio loop that plays steps against
the wall clock), protocol (OpenAI request/response shapes), metrics (vLLM's Prometheus names),
server (the Starlette app).

vLLM's routes: POST /v1/chat/completions, POST /v1/completions (stream and not, with
``stream_options.include_usage``, ``max_tokens`` / ``max_completion_tokens``, ``ignore_eos``,
``temperature`` (accepted, output is deterministic) and vLLM's ``priority``, honoured under
``--scheduling-policy priority`` and ignored under fcfs; vLLM's per-request ``stream_interval``:
a stream's first token and its end at once, the rest that many tokens a piece), GET /v1/models,
/health, /metrics, and POST /reset_prefix_cache (vLLM offers it under
``VLLM_SERVER_DEV_MODE=1``; the simulator always does): cached blocks no request holds are
forgotten, so the next run starts cold.
Thinking and tool calls (answers.py): ``--sim-reasoning-tokens N`` starts every chat answer with
N reasoning tokens (``delta.reasoning_content``, or ``reasoning`` with ``--sim-reasoning-field``;
a request's ``chat_template_kwargs.enable_thinking: false`` turns it off; usage reports
``completion_tokens_details.reasoning_tokens``); a ``tool_choice`` of ``"required"`` or a named
function makes the answer one call of it, streamed as ``delta.tool_calls`` with null content.
A request may carry an ``x-request-id`` header; the response echoes it in ``x-request-id`` and
its ``id`` is ``chatcmpl-<request id>`` (``cmpl-`` for completions). Without the header the
simulator assigns ``sim-<n>``.

Simulator-only routes (figures clearly labelled ``"simulated": true``):

GET /sim/v1/gpu -> ``{"name": "simulated <preset>", "simulated": true, "util": 0..1,
    "mem_used_bytes": int, "mem_total_bytes": int, "kv_cache_usage": 0..1,
    "num_requests_running": int, "num_requests_waiting": int,
    "steps": {"timed": int, "modelled_s": float, "measured_s": float, "total": int}}``
    ``util`` is the share of the last second of wall time spent in modelled forward passes;
    ``mem_used_bytes`` is weights plus allocated KV blocks. ``steps`` sums, over back-to-back
    steps, the modelled (time-scaled) and the measured wall durations: their ratio says how
    faithfully the process keeps the model's timing.

GET /sim/v1/requests?since=<unix seconds> -> ``{"simulated": true, "data": [record, ...]}``
    with one record per request that arrived at or after ``since`` (the last 50,000 kept),
    oldest first: ``{"id", "request_id", "arrival_time", "first_token_time", "received_time",
    "first_token_sent_time", "finish_time", "prompt_tokens", "output_tokens",
    "cached_prompt_tokens", "priority", "preemptions", "finish_reason"}``. Times are server-side
    unix seconds (``time.time()``). ``arrival_time`` and ``first_token_time`` are the engine's
    (request added, first token handed to the response). The ground truth against which a
    client's TTFT is checked is the wire's: ``received_time``, when the request's last bytes
    reached the server (the kernel's receive time when serving with ``--sim-wire-timestamps``,
    else when its handler started), to ``first_token_sent_time``, when the first content chunk
    was written to the socket (streamed requests only). Unfinished requests have nulls.
"""
