"""Playground: one prompt (or a short conversation) sent to two endpoints side by side,
streamed as it arrives, each with its TTFT, TPOT, tokens and tier; saved to reopen later.

    models.py    Comparison (the prompt and parameters) and its two Sides (what came back)
    streams.py   the upstream call: an OpenAI-compatible stream read delta by delta, timed
    services.py  create, claim and finish a side (audited where it matters)
    views.py     the page, the per-side SSE relay, rerun
"""
