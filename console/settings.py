"""Settings of the Tiergate console, all from the environment with working defaults.

Embedded default (the README's demo): SQLite and a filesystem Celery broker under
TIERGATE_DATA_DIR, secrets generated once into that directory. Production
(TIERGATE_PRODUCTION=true): secrets must be given, DEBUG stays off.
See docs/configuration.md for the table of variables.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

import dj_database_url
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from console.env import EnvError, env_bool, env_int, env_list, env_secret, env_str, env_url

BASE_DIR = Path(__file__).resolve().parent.parent


class _Config(TypedDict):
    """What the environment says, read and checked once (console/env.py)."""

    production: bool
    data_dir: Path
    secret_key: str
    fernet_key: str
    debug: bool
    allowed_hosts: list[str]
    csrf_trusted: list[str]
    database_url: str
    db_conn_max_age: int
    broker_url: str
    result_backend: str
    task_time_limit: int
    telemetry_retention_hours: int
    log_level: str
    git_mirror: str
    git_mirror_push: str
    git_mirror_queue: str


def _load() -> _Config:
    try:
        return _read_environment()
    except EnvError as exc:
        raise ImproperlyConfigured(f"Tiergate configuration error: {exc}") from None


def _generated_secret(path: Path, make: Callable[[], str], production: bool, name: str) -> str:
    if production:
        raise EnvError(f"{name}: required when TIERGATE_PRODUCTION is true (or set {name}_FILE)")
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    value = make()
    path.write_text(value + "\n", encoding="utf-8")
    path.chmod(0o600)
    return value


def _read_environment() -> _Config:
    production = env_bool("TIERGATE_PRODUCTION", False)
    data_dir = Path(env_str("TIERGATE_DATA_DIR", str(BASE_DIR / "data"))).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)

    secret_key = env_secret("TIERGATE_SECRET_KEY") or _generated_secret(
        data_dir / "secret_key",
        lambda: secrets.token_urlsafe(50),
        production,
        "TIERGATE_SECRET_KEY",
    )
    fernet_key = env_secret("TIERGATE_FERNET_KEY") or _generated_secret(
        data_dir / "fernet.key",
        lambda: Fernet.generate_key().decode(),
        production,
        "TIERGATE_FERNET_KEY",
    )
    try:
        Fernet(fernet_key.encode())
    except (ValueError, TypeError):
        raise EnvError(
            "TIERGATE_FERNET_KEY: not a valid Fernet key (32 url-safe base64 bytes)"
        ) from None

    database_url = env_url(
        "DATABASE_URL",
        f"sqlite:///{data_dir / 'tiergate.sqlite3'}",
        {"sqlite", "postgres", "postgresql", "pgsql"},
    )
    # Embedded broker: kombu's filesystem transport. It needs no server and no extra package,
    # works across processes (the web process and the worker) through files with locking, and
    # pairs with Celery's file:// result backend. SQLAlchemy-on-SQLite would add a dependency
    # and serialise every poll on SQLite's single writer lock.
    broker_url = env_url(
        "CELERY_BROKER_URL", "filesystem://", {"filesystem", "redis", "rediss", "amqp"}
    )
    if broker_url.startswith("filesystem://"):
        default_backend = f"file://{data_dir / 'celery-results'}"
    elif broker_url.startswith(("redis://", "rediss://")):
        default_backend = broker_url
    else:
        default_backend = f"file://{data_dir / 'celery-results'}"
    result_backend = env_url("CELERY_RESULT_BACKEND", default_backend, {"file", "redis", "rediss"})

    return {
        "production": production,
        "data_dir": data_dir,
        "secret_key": secret_key,
        "fernet_key": fernet_key,
        "debug": env_bool("TIERGATE_DEBUG", False),
        "allowed_hosts": env_list(
            "TIERGATE_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"]
        ),
        "csrf_trusted": env_list("TIERGATE_CSRF_TRUSTED_ORIGINS", []),
        "database_url": database_url,
        "db_conn_max_age": env_int("TIERGATE_DB_CONN_MAX_AGE", 60, minimum=0),
        "broker_url": broker_url,
        "result_backend": result_backend,
        "task_time_limit": env_int("TIERGATE_TASK_TIME_LIMIT", 3600, minimum=10),
        "telemetry_retention_hours": env_int("TIERGATE_TELEMETRY_RETENTION_HOURS", 24, minimum=1),
        "log_level": env_str("TIERGATE_LOG_LEVEL", "INFO").upper(),
        # Mirror every config version to this Git repository (console/tuning/gitmirror.py).
        "git_mirror": env_str("TIERGATE_GIT_MIRROR", ""),
        "git_mirror_push": env_str("TIERGATE_GIT_MIRROR_PUSH", ""),
        # The Celery queue of the mirror task (default: the default queue); with several
        # workers, route it to the one that holds the repository.
        "git_mirror_queue": env_str("TIERGATE_GIT_MIRROR_QUEUE", ""),
    }


_cfg = _load()
DATA_DIR: Path = _cfg["data_dir"]
TIERGATE_PRODUCTION = _cfg["production"]
SECRET_KEY = _cfg["secret_key"]
TIERGATE_FERNET_KEY = _cfg["fernet_key"]
DEBUG = _cfg["debug"]
ALLOWED_HOSTS = _cfg["allowed_hosts"]
CSRF_TRUSTED_ORIGINS = _cfg["csrf_trusted"]
TIERGATE_TELEMETRY_RETENTION_HOURS = _cfg["telemetry_retention_hours"]
TIERGATE_GIT_MIRROR = _cfg["git_mirror"]
TIERGATE_GIT_MIRROR_PUSH = _cfg["git_mirror_push"]
TIERGATE_GIT_MIRROR_QUEUE = _cfg["git_mirror_queue"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "console.core",
    "console.audit",
    "console.accounts",
    "console.tuning",
    "console.fleet",
    "console.bench.apps.BenchConfig",
    "console.playground",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "console.core.middleware.IdErrorMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"
ASGI_APPLICATION = "console.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.core.context.navigation",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        _cfg["database_url"],
        conn_max_age=_cfg["db_conn_max_age"],
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory, for the test database too: Celery worker processes started by the
    # tests must see the same rows. WAL lets the worker write while the web process reads.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test.sqlite3")}
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 8},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = Path(env_str("TIERGATE_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns about a missing root
STATICFILES_DIRS = [BASE_DIR / "console" / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "console.core.staticfinders.VendorFinder",
]
# Serve straight from the finders too, so a fresh checkout needs no collectstatic.
WHITENOISE_USE_FINDERS = True

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
if TIERGATE_PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: an anonymous API call gets 401 with WWW-Authenticate, not a bare 403.
        # API tokens are hashed at rest (console.accounts), unlike DRF's own authtoken.
        "console.accounts.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["console.core.roles.RolePermission"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Tiergate API",
    "DESCRIPTION": (
        "Ops console for tuning and traffic control of LLM inference fleets.\n\n"
        "Authenticate with an API token: create one on the console's API tokens page "
        "(/accounts/tokens/, any signed-in user) or with `manage.py create_api_token USER NAME`, "
        "and send `Authorization: Bearer tgt_...`. A token acts with its owner's role: viewers "
        "read, operators run benchmarks, rollouts and rollbacks, admins manage endpoints, keys "
        "and nodes. The browser uses its session (with CSRF) instead."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "console.core.schema.bound_ids",
    ],
}
# Choice sets whose field names ("kind", "mode") other apps use too: name them once.
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"] = {
    "EndpointKindEnum": "console.fleet.choices.EndpointKind",
    "NodeModeEnum": "console.fleet.choices.NodeMode",
    "NodeStatusEnum": "console.fleet.choices.NodeStatus",
    "RolloutKindEnum": "console.tuning.rollouts.choices.RolloutKind",
    "RolloutStateEnum": "console.tuning.rollouts.choices.RolloutState",
    "RolloutNodeStateEnum": "console.tuning.rollouts.choices.NodeState",
    "NodeSelectionEnum": "console.tuning.rollouts.choices.NodeSelection",
    "BenchmarkRunStatusEnum": "console.bench.choices.RunStatus",
    "BenchmarkPresetEnum": "console.bench.choices.Preset",
    "RolloutEventLevelEnum": "console.tuning.rollouts.choices.EventLevel",
}

# Celery: JSON only, late acks (a task whose worker died is redelivered, so tasks are
# idempotent), hard and soft time limits.
CELERY_BROKER_URL = _cfg["broker_url"]
CELERY_RESULT_BACKEND = _cfg["result_backend"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = _cfg["task_time_limit"]
CELERY_TASK_SOFT_TIME_LIMIT = _cfg["task_time_limit"] - 5
CELERY_RESULT_EXPIRES = 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {}
CELERY_BEAT_SCHEDULE["fleet-prune-telemetry"] = {"task": "fleet.prune_telemetry", "schedule": 600.0}
# Rollouts: a worker holds a rollout under a lease it renews every poll; once a lease has
# expired (its worker died) the next resume hands the rollout to another worker.
TIERGATE_ROLLOUT_LEASE_S = env_int("TIERGATE_ROLLOUT_LEASE_S", 15, minimum=2)
CELERY_BEAT_SCHEDULE["tuning-resume-rollouts"] = {"task": "tuning.resume_rollouts", "schedule": 5.0}
# Sweeps: leased like rollouts, resumed by the same kind of beat; a trial's version (and the
# base at the end) must be applied and the node healthy within the apply timeout.
TIERGATE_SWEEP_LEASE_S = env_int("TIERGATE_SWEEP_LEASE_S", 15, minimum=2)
TIERGATE_SWEEP_APPLY_TIMEOUT_S = env_int("TIERGATE_SWEEP_APPLY_TIMEOUT_S", 600, minimum=5)
CELERY_BEAT_SCHEDULE["bench-resume-sweeps"] = {"task": "bench.resume_sweeps", "schedule": 5.0}
# A benchmark whose worker died is marked failed within a minute or so
# (docs/architecture.md#security-and-reliability).
CELERY_BEAT_SCHEDULE["bench-detect-lost-runs"] = {
    "task": "bench.detect_lost_runs",
    "schedule": 30.0,
}
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = DATA_DIR / "broker"
    for _sub in ("queue", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    (DATA_DIR / "celery-results").mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        # Broadcast (remote control) exchanges; kombu's default is ./control in the cwd.
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        "polling_interval": 0.1,
    }
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": _cfg["task_time_limit"] + 60}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": _cfg["log_level"]},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}
