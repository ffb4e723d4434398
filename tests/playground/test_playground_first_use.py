"""The playground out of the box: two endpoints preselected, each side's model box offering the
endpoint's models, and the answer showing the tier the gateway served it in (issue 58)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.conftest import sign_in


def _models(endpoint: Any, models: list[str], default: str = "") -> None:
    from console.fleet.models import Endpoint

    Endpoint.objects.filter(pk=endpoint.pk).update(models=models, default_model=default)


def test_a_model_the_endpoint_does_not_serve_is_refused_naming_those_it_does(
    operator: Any, endpoints: dict[str, Any]
) -> None:
    _models(endpoints["gateway"], ["alpha", "alpha-large"])
    client = Client()
    client.force_login(operator)
    page = client.get("/playground/").content.decode()
    # Two different endpoints preselected, and the models each one knows, for the page.
    assert f'<option value="{endpoints["gateway"].pk}" selected>' in page
    assert f'<option value="{endpoints["direct"].pk}" selected>' in page
    assert 'list="models-a"' in page and 'id="endpoint-models"' in page
    response = client.post(
        "/playground/",
        {
            "endpoint_a": endpoints["gateway"].pk,
            "model_a": "gamma",
            "endpoint_b": endpoints["direct"].pk,
            "conversation": "hi",
            "max_tokens": 4,
            "temperature": 0,
        },
    )
    assert response.status_code == 400
    assert "alpha-gw does not serve &#x27;gamma&#x27;; it serves: alpha, alpha-large" in (
        response.content.decode()
    )


@pytest.mark.browser
def test_the_model_box_offers_the_endpoints_models_and_the_answer_names_the_served_tier(
    transactional_db: None, operator: Any, endpoints: dict[str, Any], browser_page: Any
) -> None:
    _models(endpoints["gateway"], ["alpha"])  # a gateway endpoint: the model its engine serves
    _models(endpoints["direct"], ["beta"])
    page = browser_page
    sign_in(page, "otto")
    page.goto("/playground/")
    options = "(id) => Array.from(document.querySelectorAll(`#${id} option`)).map(o => o.value)"
    assert page.evaluate(options, "models-a") == ["alpha"]
    assert page.evaluate(options, "models-b") == ["beta"]
    assert page.get_attribute("#id_model_a", "placeholder") == "alpha (default)"
    page.select_option("#id_endpoint_b", label="dead")
    assert page.get_attribute("#id_model_b", "placeholder") == "x (default)"
    page.select_option("#id_endpoint_b", label="beta-direct")
    assert page.evaluate(options, "models-b") == ["beta"]
    # No model named, no tier asked: the endpoints' defaults, the key's default tier.
    page.fill("#id_conversation", "Tell me something")
    page.fill("#id_max_tokens", "8")
    page.click("text=Send to both")
    for side in ("a", "b"):
        page.wait_for_selector(f"#side-{side}[data-finished=done]")
    # The gateway answered in its key's default tier, and the page says which.
    assert page.locator("#side-a [data-field=tier]").inner_text() == "online"
    assert page.locator("#side-b [data-field=tier]").inner_text() == "none (not a gateway)"
    page.reload()
    assert page.locator("#side-a [data-field=tier]").inner_text() == "online"
