"""Playground pages: the form and saved comparisons, one comparison, and each side's stream.

A side streams once: the first GET of its stream claims it, calls the endpoint (its key never
leaves the server) and relays the deltas as server-sent events; later GETs replay what was
saved. Operators and admins only: the playground spends the endpoints' keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.core.roles import OPERATOR, require_role
from console.playground import services
from console.playground.forms import PlaygroundForm
from console.playground.models import FINISHED, Comparison, Side, SideStatus
from console.playground.streams import Delta, Outcome, stream_chat

PAGE_SIZE = 20


def _sse(event: str, data: object) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


@require_http_methods(["GET", "POST"])
@login_required
def index(request: HttpRequest) -> HttpResponse:
    require_role(request, OPERATOR)
    form = PlaygroundForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        comparison = services.create(form.cleaned_data, request.user, request)
        return redirect("playground:detail", pk=comparison.pk)
    saved = Paginator(Comparison.objects.prefetch_related("sides"), PAGE_SIZE)
    page = saved.get_page(request.GET.get("page"))
    status = 400 if request.method == "POST" else 200
    return render(request, "playground/index.html", {"form": form, "page": page}, status=status)


@require_GET
@login_required
def detail(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, OPERATOR)
    comparison = get_object_or_404(Comparison, pk=pk)
    sides = list(comparison.sides.all())
    return render(
        request,
        "playground/detail.html",
        {"comparison": comparison, "sides": sides, "finished": FINISHED},
    )


@require_POST
@login_required
def rerun(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, OPERATOR)
    comparison = get_object_or_404(Comparison, pk=pk)
    try:
        again = services.rerun(comparison, request.user, request)
    except ValueError as exc:
        messages.error(request, str(exc))
        return redirect("playground:detail", pk=pk)
    return redirect("playground:detail", pk=again.pk)


def _relay(side: Side) -> Iterator[bytes]:
    comparison = side.comparison
    endpoint = side.endpoint
    outcome: Outcome | None = None
    try:
        if endpoint is None:
            outcome = Outcome(error=f"the endpoint {side.endpoint_name} was deleted")
        else:
            body = {
                "model": side.model,
                "messages": comparison.messages,
                "max_tokens": comparison.max_tokens,
                "temperature": comparison.temperature,
            }
            for item in stream_chat(
                endpoint.base_url, endpoint.get_api_key(), body, tier=side.tier
            ):
                if isinstance(item, Delta):
                    yield _sse("delta", {"content": item.content, "reasoning": item.reasoning})
                else:
                    outcome = item
    finally:
        # A browser that goes away mid-stream still leaves a finished side behind.
        services.finish(side, outcome or Outcome(error="the page went away mid-stream"))
    yield _sse("done", side.result())


@require_GET
@login_required
@never_cache
def stream(request: HttpRequest, pk: int, name: str) -> StreamingHttpResponse:
    require_role(request, OPERATOR)
    side = get_object_or_404(
        Side.objects.select_related("comparison", "endpoint"), comparison_id=pk, name=name
    )
    if services.claim(side):
        body: Iterator[bytes] = _relay(side)
    else:
        side.refresh_from_db()
        if side.status == SideStatus.RUNNING:
            body = iter([_sse("busy", {"message": "streaming to another page; reload soon"})])
        else:
            body = iter([_sse("done", side.result())])
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["X-Accel-Buffering"] = "no"  # a proxy in front must not hold the stream back
    return response
