"""The API's router: detail routes match ASCII digits only (console/core/ids.py).

DRF's default lookup pattern takes any character but "/" and ".", and Django's integer lookup
reads Arabic-Indic digits as ASCII ones, so `/api/v1/nodes/٣/` would be node 3. With this
pattern a non-ASCII id is a plain 404; out-of-range ASCII ids find nothing (Django bounds the
primary-key lookup).
"""

from __future__ import annotations

from rest_framework.routers import DefaultRouter, SimpleRouter

ID_PATTERN = "[0-9]+"


class IdRouter(SimpleRouter):
    """SimpleRouter whose default lookup pattern is ASCII digits (a viewset may still set
    its own `lookup_value_regex`)."""

    def __init__(self, trailing_slash: bool = True) -> None:
        super().__init__(trailing_slash=trailing_slash)
        self._default_value_pattern = ID_PATTERN


class IdDefaultRouter(DefaultRouter):
    """DefaultRouter (with the API root view) under the same id rule."""

    def __init__(self, trailing_slash: bool = True) -> None:
        super().__init__(trailing_slash=trailing_slash)
        self._default_value_pattern = ID_PATTERN
