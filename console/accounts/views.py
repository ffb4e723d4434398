"""The API tokens page: create (shown once), see last use, revoke; admins see everyone's."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from console.accounts import services
from console.accounts.models import ApiToken
from console.core.roles import ADMIN, VIEWER, has_role, require_role


def visible_tokens(user: User | AnonymousUser) -> QuerySet[ApiToken]:
    tokens = ApiToken.objects.select_related("user", "revoked_by")
    if has_role(user, ADMIN):
        return tokens
    return tokens.filter(user=user) if isinstance(user, User) else tokens.none()


@require_http_methods(["GET", "POST"])
@login_required
@never_cache
def token_list(request: HttpRequest) -> HttpResponse:
    require_role(request, VIEWER)
    created: tuple[ApiToken, str] | None = None
    error = ""
    name = ""
    if request.method == "POST":
        name = request.POST.get("name", "").strip()
        try:
            created = services.create_token(request.user, name, request=request)
            name = ""
        except services.TokenError as exc:
            error = exc.message
    context = {
        "tokens": visible_tokens(request.user),
        "created": created,
        "error": error,
        "name": name,
        "is_admin": has_role(request.user, ADMIN),
        "api_base": request.build_absolute_uri("/api/v1/"),
    }
    return render(request, "accounts/token_list.html", context, status=400 if error else 200)


@require_POST
@login_required
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    require_role(request, VIEWER)
    token = get_object_or_404(ApiToken, pk=pk)
    if not services.can_revoke(token, request.user):
        raise PermissionDenied("Only the token's owner or an admin can revoke it.")
    services.revoke_token(token, request.user, request)
    messages.success(request, f"Token {token.name} revoked; it stops working at once.")
    return redirect("accounts:token-list")
