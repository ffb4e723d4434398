"""docker/check.py finds what it is meant to find in the compose stack, and the query
extraction the live Prometheus test relies on finds every selector."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.production.shipped import selectors

DOCKER = Path(__file__).resolve().parents[2] / "docker"
sys.path.insert(0, str(DOCKER))
import check  # noqa: E402  (docker/check.py is a script, not a package)


def compose() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())  # type: ignore[no-any-return]


def problems_of(stack: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    check.check_compose(problems, stack)
    return problems


def test_the_shipped_stack_has_no_problem() -> None:
    assert problems_of(compose()) == []


def test_broken_links_unpinned_images_and_missing_services_are_found() -> None:
    stack = copy.deepcopy(compose())
    services = stack["services"]
    services["agent-a"]["command"][-1] = services["agent-a"]["command"][-1].replace(
        "http://engine-a:8001", "http://engine-z:8001"
    )
    services["grafana"]["image"] = "grafana/grafana:latest"
    services["prometheus"]["volumes"][0] = "./prometheus/nowhere.yml:/etc/prometheus/p.yml:ro"
    del services["flower"]
    services["agent-b"]["secrets"] = ["node_token_c"]
    assert sorted(problems_of(stack)) == sorted(
        [
            "compose: service grafana: image grafana/grafana:latest is not pinned to a tag other"
            " than latest",
            "compose: service prometheus mounts missing ./prometheus/nowhere.yml",
            "compose: service agent-b uses undefined secret node_token_c",
            "compose: service agent-a names unknown service engine-z",
            "compose: no flower service",
        ]
    )


def test_prometheus_targets_must_be_compose_services() -> None:
    stack = copy.deepcopy(compose())
    del stack["services"]["agent-b"]
    assert "docker/prometheus/prometheus.yml: names agent-b, which is not a compose service" in (
        problems_of(stack)
    )


def test_selectors_are_found_in_every_position() -> None:
    assert selectors("time() - tiergate_heartbeat_last_success_timestamp_seconds > 30") == [
        "tiergate_heartbeat_last_success_timestamp_seconds"
    ]
    assert selectors(
        'histogram_quantile(0.99, sum by (le, tier) (rate(a_bucket{tier="online", le="1.0"}[5m])))'
    ) == ['a_bucket{tier="online", le="1.0"}']
    assert selectors("x:y:rate5m > (14.4 * 0.01) and on (instance) z unless w offset 5m") == [
        "x:y:rate5m",
        "z",
        "w",
    ]
    assert selectors('up{job="a}b 5"} == 0 or vector(1e3)') == ['up{job="a}b 5"}']
