"""OpenAPI schema post-processing: the one id rule (console/core/ids.py) written into the
schema, so clients and fuzzers know that ids are integers from 1 to MAX_ID.

Path ids match ASCII digits only (console/core/routers.py), which drf-spectacular renders as a
string pattern; integer query parameters are ids too, except the paginator's own."""

from __future__ import annotations

from typing import Any

from console.core.ids import MAX_ID

ID_SCHEMA = {"type": "integer", "minimum": 1, "maximum": MAX_ID}
NOT_IDS = ("page", "page_size")


def _is_id(parameter: dict[str, Any]) -> bool:
    schema = parameter.get("schema") or {}
    if parameter.get("in") == "path":
        return parameter.get("name") == "id"
    return (
        parameter.get("in") == "query"
        and schema.get("type") == "integer"
        and parameter.get("name") not in NOT_IDS
    )


def bound_ids(result: dict[str, Any], **_: Any) -> dict[str, Any]:
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                if _is_id(parameter):
                    parameter["schema"] = dict(ID_SCHEMA)
    return result
