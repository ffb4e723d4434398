"""Pages under /accounts/ (sign-in and sign-out are console.core's)."""

from __future__ import annotations

from django.urls import path

from console.accounts import views

app_name = "accounts"
urlpatterns = [
    path("tokens/", views.token_list, name="token-list"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token-revoke"),
]
