"""Every PromQL query docker/ ships, read from the files themselves (nothing restated here):
Grafana panels and variables, recording and alert rules, prometheus-adapter rules, and the
HPA metrics they must serve."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DASHBOARDS = sorted((DOCKER / "grafana" / "dashboards").glob("*.json"))
RULE_FILES = sorted((DOCKER / "prometheus" / "rules").glob("*.yml"))
ADAPTER = DOCKER / "k8s" / "base" / "prometheus-adapter.yaml"
ENGINE = DOCKER / "k8s" / "base" / "engine.yaml"

# Grafana's own macros, as Grafana would expand them for a short time range.
MACROS = {"$__rate_interval": "30s", "$__interval": "5s", "$__range": "5m"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
GROUPING = r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"


@dataclass(frozen=True)
class Query:
    origin: str  # "file: what" for messages
    expr: str
    # Alerts (and comparisons in general) may rightly return nothing; their selectors may not.
    must_return_data: bool = True


def selectors(expr: str) -> list[str]:
    """The vector selectors of `expr` (``name{matchers}``), without ranges or functions."""
    strings: list[str] = []

    def stash(match: re.Match[str]) -> str:
        strings.append(match.group(0))
        return f"\x00s{len(strings) - 1}\x00"  # a letter first: no number to strip

    text = re.sub(r'"(?:[^"\\]|\\.)*"', stash, expr)  # label values hold anything
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range and subquery durations
    text = re.sub(r"\boffset\s+\S+", " ", text)
    text = re.sub(r"(?<![A-Za-z0-9_:])\d[\w.]*", " ", text)  # numbers: 14.4, 1e3, 0x1f
    text = re.sub(GROUPING, " ", text)
    found = []
    for match in re.finditer(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*(\{[^}]*\})?(\s*\()?", text):
        name, matchers, call = match.groups()
        if call or name.lower() in KEYWORDS:
            continue
        restored = re.sub("\x00s(\\d+)\x00", lambda m: strings[int(m.group(1))], matchers or "")
        found.append(name + restored)
    return found


def _dashboard_variables(dashboard: dict[str, Any]) -> dict[str, str]:
    """Each variable at its "All" value: a regex matching everything."""
    return {v["name"]: ".*" for v in dashboard["templating"]["list"] if v["type"] == "query"}


def expand_grafana(expr: str, variables: dict[str, str]) -> str:
    for macro, value in MACROS.items():
        expr = expr.replace(macro, value)
    for name, value in variables.items():
        expr = expr.replace("${" + name + "}", value).replace("$" + name, value)
    assert "$" not in expr, f"unexpanded variable in {expr}"
    return expr


def dashboard_queries() -> list[Query]:
    queries = []
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        variables = _dashboard_variables(dashboard)
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                expr = expand_grafana(target["expr"], variables)
                queries.append(Query(f"{path.name}: {panel['title']}", expr))
        for variable in dashboard["templating"]["list"]:
            if variable["type"] != "query":
                continue
            match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", variable["query"]["query"])
            assert match, f"{path.name}: variable {variable['name']}: not label_values(...)"
            metric, label = match.groups()
            queries.append(
                Query(f"{path.name}: ${variable['name']}", f"count by ({label}) ({metric})")
            )
    return queries


def rules() -> list[dict[str, Any]]:
    found = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            found += [{**rule, "file": path.name} for rule in group["rules"]]
    return found


def rule_queries() -> list[Query]:
    return [
        Query(
            f"{r['file']}: {r.get('record') or r['alert']}",
            r["expr"],
            must_return_data="record" in r,
        )
        for r in rules()
    ]


def adapter_rules() -> list[dict[str, Any]]:
    config_map = yaml.safe_load(ADAPTER.read_text())
    return yaml.safe_load(config_map["data"]["config.yaml"])["rules"]  # type: ignore[no-any-return]


def adapter_metric_name(rule: dict[str, Any]) -> tuple[str, str]:
    """(the series the rule selects, the metric name it exposes to the HPA)."""
    series = selectors(rule["seriesQuery"])[0].split("{")[0]
    pattern = rule["name"]["matches"]
    exposed = re.sub(pattern, rule["name"]["as"].replace("${1}", r"\1"), series)
    return series, exposed


def hpa_metrics() -> list[dict[str, Any]]:
    """The engine HPA's Pods metrics: {"name", "selector"}."""
    docs = list(yaml.safe_load_all(ENGINE.read_text()))
    hpa = next(d for d in docs if d["kind"] == "HorizontalPodAutoscaler")
    return [m["pods"]["metric"] for m in hpa["spec"]["metrics"]]


def adapter_queries(namespace: str, pod: str) -> list[Query]:
    """Each adapter rule's metricsQuery as the adapter sends it for one HPA metric of the
    engine: series and matchers filled in, grouped by pod."""
    by_name = {adapter_metric_name(r)[1]: r for r in adapter_rules()}
    queries = []
    for metric in hpa_metrics():
        rule = by_name[metric["name"]]
        series, _ = adapter_metric_name(rule)
        labels = {"namespace": namespace, "pod": pod, **metric["selector"]["matchLabels"]}
        matchers = ",".join(f'{k}="{v}"' for k, v in labels.items())
        expr = (
            rule["metricsQuery"]
            .replace("<<.Series>>", series)
            .replace("<<.LabelMatchers>>", matchers)
            .replace("<<.GroupBy>>", "pod")
        )
        queries.append(Query(f"prometheus-adapter: {metric['name']}", expr))
        queries.append(Query(f"prometheus-adapter: {metric['name']} series", rule["seriesQuery"]))
    return queries
