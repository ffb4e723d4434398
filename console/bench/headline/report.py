"""The experiment's outputs: the stdout table and the JSON document. Pure."""

from __future__ import annotations

from typing import Any

from console.bench.headline.workload import TIERS

COLUMNS = (
    ("TTFT P50", "ttft_p50_ms", "{:.0f}"),
    ("TTFT P99", "ttft_p99_ms", "{:.0f}"),
    ("E2E P99", "e2e_p99_ms", "{:.0f}"),
    ("req/s", "request_throughput_rps", "{:.2f}"),
    ("done/s in window", "done_in_window_rps", "{:.2f}"),
    ("out tok/s", "output_tokens_per_s", "{:.0f}"),
    ("out tok/s in window", "tokens_in_window_tps", "{:.0f}"),
    ("rejected", "rejected", "{:d}"),
)


def _cell(fmt: str, value: Any) -> str:
    return "-" if value is None else fmt.format(value)


def arm_table(arms: list[dict[str, Any]]) -> str:
    """Markdown: one row per arm and tier, then one per arm with the engine's figures."""
    head = ["arm", "tier", *(c[0] for c in COLUMNS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for arm in arms:
        for tier in (*TIERS, "overall"):
            row = arm["tiers"][tier]
            cells = [f"({arm['key']}) {arm['name']}", tier]
            cells += [_cell(fmt, row.get(key)) for _, key, fmt in COLUMNS]  # older: no key
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    head = ["arm", "KV use mean / max", "engine running mean", "engine waiting mean / max",
            "engine tok/s in window", "preemptions", "sim step pace (measured/modelled)",
            "client flags"]  # fmt: skip
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for arm in arms:
        eng = arm["engine"]
        kv, run, wait = eng["kv_cache_usage"], eng["engine_running"], eng["engine_waiting"]
        pace = eng["step_fidelity"]["measured_over_modelled"]
        cells = [
            f"({arm['key']}) {arm['name']}",
            f"{_pct(kv['mean'])} / {_pct(kv['max'])}",
            _cell("{:.1f}", run["mean"]),
            f"{_cell('{:.1f}', wait['mean'])} / {_cell('{:.0f}', wait['max'])}",
            _cell("{:.0f}", eng.get("generated_in_window_tps")),  # older records: none
            str(eng["preemptions"]),
            _cell("{:.3f}", pace),
            ", ".join(arm["client_validity"]["flags"]) or "none",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def verdict(arms: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Issue 9's targets, checked on the measured figures."""
    a = arms.get("a")
    out: dict[str, Any] = {}
    if a is None:
        return out
    a_p99 = a["tiers"]["online"]["ttft_p99_ms"]
    a_rps = a["tiers"]["overall"]["request_throughput_rps"]
    for key in ("b", "c", "d", "e"):
        arm = arms.get(key)
        if arm is None or a_p99 is None or not a_rps:
            continue
        p99 = arm["tiers"]["online"]["ttft_p99_ms"]
        rps = arm["tiers"]["overall"]["request_throughput_rps"] or 0.0
        done = arm["tiers"]["overall"].get("done_in_window_rps") or 0.0
        a_done = a["tiers"]["overall"].get("done_in_window_rps") or 0.0
        ratio = None if p99 is None else p99 / a_p99
        out[key] = {
            "online_ttft_p99_vs_a": ratio,
            "throughput_vs_a": rps / a_rps,
            "done_in_window_vs_a": done / a_done if a_done else None,
            "meets_target": ratio is not None and ratio <= 1 / 3 and rps >= 0.95 * a_rps,
        }
    return out


def verdict_lines(result: dict[str, Any]) -> list[str]:
    lines = []
    for key, v in result.items():
        ratio = v["online_ttft_p99_vs_a"]
        lines.append(
            f"arm ({key}) vs (a): online TTFT P99 x{_cell('{:.3f}', ratio)}, "
            f"throughput x{v['throughput_vs_a']:.3f} "
            f"(done in window x{_cell('{:.3f}', v.get('done_in_window_vs_a'))}): "
            + ("meets" if v["meets_target"] else "misses")
            + " the target (<= 1/3, >= 0.95)"
        )
    return lines


def render(doc: dict[str, Any]) -> str:
    lines = [
        f"# {doc['experiment']}",
        f"engine: {doc['hardware']}, time scale {doc['time_scale']:g}",
        f"flags (fcfs arms): {' '.join(doc['engine_flags']['fcfs'])}",
        f"workload: {doc['workload']['rate_rps']:.2f} req/s Poisson, "
        f"{doc['workload']['duration_s']:g} s (+{doc['workload']['warmup_s']:g} s warmup), "
        f"seed {doc['workload']['seed']}; tiers "
        + ", ".join(
            f"{t} {p['weight']:.0%} {p['prompt_tokens']}/{p['max_tokens']} tok"
            for t, p in doc["workload"]["tiers"].items()
        ),
        f"machine: {doc['machine']['start']['cpus']} CPUs, load average "
        f"{doc['machine']['start']['load_average_1m']:.2f} -> "
        f"{doc['machine']['end']['load_average_1m']:.2f}",
        "",
        arm_table(doc["arms"]),
        "",
        *verdict_lines(doc["verdict"]),
    ]
    return "\n".join(lines)
