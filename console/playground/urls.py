"""Pages under /playground/."""

from __future__ import annotations

from django.urls import path

from console.playground import views

app_name = "playground"
urlpatterns = [
    path("", views.index, name="index"),
    path("<int:pk>/", views.detail, name="detail"),
    path("<int:pk>/rerun/", views.rerun, name="rerun"),
    path("<int:pk>/stream/<str:name>/", views.stream, name="stream"),
]
