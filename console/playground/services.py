"""Playground workflows, called by the views.

create(form_data, user, request) -> Comparison          # both sides pending
claim(side) -> bool            # pending -> running, once (a conditional UPDATE)
finish(side, outcome)          # running -> done | failed, with what came back
rerun(comparison, user, request) -> Comparison          # the same prompt, new sides
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from console.audit.choices import Action
from console.audit.services import record
from console.playground.models import Comparison, Side, SideStatus
from console.playground.streams import Outcome


def _title(messages: list[dict[str, str]]) -> str:
    text = " ".join(messages[-1]["content"].split())
    return text[:117] + "..." if len(text) > 120 else text


def create(data: dict[str, Any], user: Any, request: Any = None) -> Comparison:
    with transaction.atomic():
        comparison = Comparison.objects.create(
            created_by=user,
            title=_title(data["conversation"]),
            messages=data["conversation"],
            max_tokens=data["max_tokens"],
            temperature=data["temperature"],
        )
        for name in ("a", "b"):
            endpoint = data[f"endpoint_{name}"]
            Side.objects.create(
                comparison=comparison,
                name=name,
                endpoint=endpoint,
                endpoint_name=endpoint.name,
                model=data[f"model_{name}"],
                tier=data.get(f"tier_{name}", ""),
            )
        # Audited: the playground sends prompts to endpoints with their stored keys.
        record(
            action=Action.RUN,
            obj=comparison,
            after={"sides": [f"{data[f'endpoint_{n}'].name}/{data[f'model_{n}']}" for n in "ab"]},
            user=user,
            request=request,
        )
    return comparison


def rerun(comparison: Comparison, user: Any, request: Any = None) -> Comparison:
    sides = {s.name: s for s in comparison.sides.select_related("endpoint")}
    data: dict[str, Any] = {
        "conversation": comparison.messages,
        "max_tokens": comparison.max_tokens,
        "temperature": comparison.temperature,
    }
    for name, side in sides.items():
        if side.endpoint is None:
            raise ValueError(f"endpoint_{name}: the endpoint {side.endpoint_name} was deleted")
        data.update(
            {
                f"endpoint_{name}": side.endpoint,
                f"model_{name}": side.model,
                f"tier_{name}": side.tier,
            }
        )
    return create(data, user, request)


def claim(side: Side) -> bool:
    claimed = Side.objects.filter(pk=side.pk, status=SideStatus.PENDING).update(
        status=SideStatus.RUNNING, started_at=timezone.now()
    )
    return claimed == 1


def finish(side: Side, outcome: Outcome) -> Side:
    side.status = SideStatus.FAILED if outcome.error and not outcome.text else SideStatus.DONE
    for name in (
        "text",
        "reasoning",
        "error",
        "ttft_ms",
        "tpot_ms",
        "e2e_ms",
        "prompt_tokens",
        "completion_tokens",
    ):
        setattr(side, name, getattr(outcome, name))
    side.served_tier = outcome.tier
    side.finished_at = timezone.now()
    side.save()
    return side
