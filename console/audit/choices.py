from __future__ import annotations

from django.db import models


class Action(models.TextChoices):
    CREATE = "create", "Create"
    UPDATE = "update", "Update"
    DELETE = "delete", "Delete"
    ROLLOUT = "rollout", "Rollout"
    ROLLBACK = "rollback", "Rollback"
    ABORT = "abort", "Abort"
    RUN = "run", "Run"
    CANCEL = "cancel", "Cancel"
    LOGIN = "login", "Login"
