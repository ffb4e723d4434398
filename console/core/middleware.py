"""Turns a malformed id parameter (console/core/ids.py) into a 400 that names it, for pages
and the API alike, so no view has to catch IdError itself."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.utils.html import escape

from console.core.ids import IdError


class IdErrorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not isinstance(exc, IdError):
            return None
        if request.path.startswith("/api/"):
            return JsonResponse({exc.field: [exc.message]}, status=400)
        return HttpResponseBadRequest(
            f"<h1>Bad request</h1><p>{escape(exc.field)}: {escape(exc.message)}</p>"
        )
