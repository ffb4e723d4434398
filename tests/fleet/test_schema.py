from __future__ import annotations

from io import StringIO

import pytest
import yaml
from django.core.management import call_command


@pytest.mark.django_db
def test_the_fleet_api_is_in_a_valid_openapi_schema_without_warnings() -> None:
    out = StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    schema = yaml.safe_load(out.getvalue())
    paths = schema["paths"]
    for path in [
        "/api/v1/endpoints/",
        "/api/v1/endpoints/{id}/doctor/",
        "/api/v1/endpoints/{id}/fetch-models/",
        "/api/v1/endpoints/{id}/env/",
        "/api/v1/endpoints/import-env/",
        "/api/v1/nodes/",
        "/api/v1/nodes/{id}/rotate-token/",
        "/api/v1/gateway-keys/",
        "/api/v1/gateway-keys/{id}/revoke/",
        "/api/v1/agent/heartbeat",
    ]:
        assert path in paths, path
    components = schema["components"]["schemas"]
    # The key is write-only: in the request shape, never in the response shape.
    assert "api_key" in components["EndpointRequest"]["properties"]
    assert "api_key" not in components["Endpoint"]["properties"]
    assert "api_key_masked" in components["Endpoint"]["properties"]
    assert paths["/api/v1/agent/heartbeat"]["post"]["security"] == [{"nodeToken": []}]
    assert components["SampleIn"]["properties"]["gpu_source"]["allOf"] == [
        {"$ref": "#/components/schemas/GpuSourceEnum"}
    ]
    assert components["GpuSourceEnum"]["enum"] == ["nvml", "simulated", "none"]
