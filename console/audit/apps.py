from __future__ import annotations

from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "console.audit"
    label = "audit"
    verbose_name = "Audit"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in, user_login_failed

        from console.audit.signals import failed_login, login

        user_logged_in.connect(login, dispatch_uid="tiergate-audit-login")
        user_login_failed.connect(failed_login, dispatch_uid="tiergate-audit-login-failed")
