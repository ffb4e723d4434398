"""Ids in query strings: ASCII digits in range, or a 400 naming the parameter (pages and API)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from console.core.ids import MAX_ID, IdError, optional_id, parse_id

BAD = ["9223372036854775808", "%C2%B2", "%D9%A3", "0", "-1", "1.0", "+1", "1e3", "%20 1", "x"]


@pytest.mark.parametrize("raw", ["1", "42", "007", str(MAX_ID), "0" * 5000 + "5"])
def test_it_takes_ascii_digits_in_range(raw: str) -> None:
    assert parse_id(raw) == int(raw.lstrip("0"))  # int() refuses 5,001 digits itself


@pytest.mark.parametrize(
    "raw", ["", "²", "٣", "\uff13", "0", "-1", " 1", "1 ", "1_000", str(MAX_ID + 1), "9" * 100_000]
)
def test_it_refuses_anything_else_naming_the_field(raw: str) -> None:
    with pytest.raises(IdError) as caught:
        parse_id(raw, "endpoint")
    assert caught.value.field == "endpoint" and str(caught.value).startswith("endpoint: ")


def test_optional_id_lets_a_missing_parameter_through() -> None:
    assert optional_id(None) is None and optional_id("") is None and optional_id("3") == 3


@pytest.fixture
def api(operator: Any) -> Client:
    client = Client()
    client.force_login(operator)
    return client


@pytest.mark.parametrize("raw", BAD)
def test_benchmark_list_filter_refuses_bad_ids(api: Client, raw: str) -> None:
    r = api.get(f"/api/v1/benchmarks/?endpoint={raw}")
    assert r.status_code == 400 and "endpoint" in r.json(), r.content


@pytest.mark.parametrize("raw", BAD)
def test_benchmark_compare_refuses_bad_ids(api: Client, raw: str) -> None:
    r = api.get(f"/api/v1/benchmarks/compare/?a={raw}&b=1")
    assert r.status_code == 400 and "a" in r.json(), r.content
    page = api.get(f"/benchmarks/compare/?a=1&b={raw}")
    assert page.status_code == 400 and b"b: must be an id" in page.content


@pytest.mark.parametrize("raw", BAD)
def test_benchmark_list_page_refuses_bad_ids(api: Client, raw: str) -> None:
    page = api.get(f"/benchmarks/?endpoint={raw}")
    assert page.status_code == 400 and b"endpoint: must be an id" in page.content


@pytest.mark.parametrize("path", ["/api/v1/nodes/%D9%A3/", "/api/v1/rollouts/%C2%B2/"])
def test_detail_routes_match_ascii_ids_only(api: Client, path: str) -> None:
    assert api.get(path).status_code == 404


def test_a_huge_detail_id_is_a_404(api: Client) -> None:
    assert api.get(f"/api/v1/benchmarks/{MAX_ID + 1}/").status_code == 404


def test_version_pages_refuse_bad_against_and_from(api: Client) -> None:
    from console.tuning.services import create_tier_config
    from tests.rollouts.rollout_helpers import tier_config

    v1 = create_tier_config(name="ids", config=tier_config(), message="v1")
    assert api.get(f"/api/v1/tier-configs/{v1.pk}/diff/?against=%D9%A3").status_code == 400
    assert api.get(f"/tuning/tier-configs/{v1.pk}/?against=%D9%A3").status_code == 400
    assert api.get("/tuning/tier-configs/new/?from=99999999999999999999").status_code == 400
