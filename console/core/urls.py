from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from console.core import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    # Browsers ask for /favicon.ico on pages that name no icon (JSON, Swagger's own assets).
    path("favicon.ico", views.favicon),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
]
