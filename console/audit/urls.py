from __future__ import annotations

from django.urls import path

from console.audit import views

app_name = "audit"
urlpatterns = [path("", views.event_list, name="event-list")]
