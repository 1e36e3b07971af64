"""Settings shared by every environment. Site-specific and secret values come from the environment.

The defaults are the embedded development values of `make run`; with DEBUG off they are refused at start-up,
whatever the settings module (config/apps.py).
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

from config.settings.database import refuse_other_engines
from config.settings.env import env_bool, env_int, env_list, env_share, env_str
from core.local_postgres import database_url

BASE_DIR = Path(__file__).resolve().parent.parent.parent

DEV_SECRET_KEY = "dev-insecure-secret-key-do-not-use-in-production"  # noqa: S105
# An account-level (m/44'/60'/0') public key whose mnemonic was thrown away when it was made:
# nobody holds its private half, and it is not the well-known development mnemonic of anvil.
# Ed25519 key that signs manifests in development only (base64 of 32 bytes); production refuses it.
DEV_MANIFEST_SIGNING_KEY = "ZGV2ZWxvcG1lbnQgbWFuaWZlc3Qga2V5IG9ubHkhISE="  # noqa: S105
DEV_PAYMENTS_XPUB = (
    "xpub6DG4MToYnNQ7Kr1frmWsQotXvUFiWAxNibVaTgepgxthUSyqTCmiCPMM99YFnGHWYh6iWbZ237si6AvpmctqjuC8HfwQ7eK3zKYbJt5tRpr"
)

SECRET_KEY = env_str("DJANGO_SECRET_KEY", DEV_SECRET_KEY)
# After a rotation, the previous keys: sessions and emailed order links made under them keep working.
SECRET_KEY_FALLBACKS = env_list("DJANGO_SECRET_KEY_FALLBACKS", [])
DEBUG = env_bool("DJANGO_DEBUG", True)
DEV_ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "testserver"]
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", DEV_ALLOWED_HOSTS)
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    # First: with DEBUG off it refuses the development values before any other app starts (config/apps.py).
    "config.apps.ProjectConfig",
    "core.jobs",
    "core.tallies",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "fleet",  # the nodes
    "orders",  # the order domain
    "shop",  # the storefront
    "payments",
    "provisioning",
    "axes",
    "django_otp",
    "django_otp.plugins.otp_totp",
]

MIDDLEWARE = [
    "core.request_id.RequestIdMiddleware",  # first: every other one and every log line knows the request's id
    "core.metrics_http.RequestLatencyMiddleware",  # the latency it measures includes every other one
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_otp.middleware.OTPMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "core.csp.ContentSecurityPolicyMiddleware",
    "core.ratelimit.RateLimitMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

# Staff sign in on the admin's login page, also for the operator console (/ops/ redirects there, not to Django's
# default /accounts/login/, which the shop does not serve).
LOGIN_URL = "admin:login"
# Staff login throttling (django-axes): 5 failed logins for one username from one IP lock that
# pair out for 15 minutes with a 429; another username from the same IP still gets in.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_HTTP_RESPONSE_CODE = 429
AXES_RESET_ON_SUCCESS = True
# The lockout is the site's translated 429 page, and the IP is read as the rate limits read it (trusted proxies).
AXES_LOCKOUT_CALLABLE = "config.staff_login.lockout_response"
AXES_CLIENT_IP_CALLABLE = "core.ratelimit.client_ip"

# Security headers on every response, in development too, so that a page breaking them shows at once.
# No `unsafe-inline` anywhere: scripts are files under static/js/ (no inline script, no `on*=`
# attribute), styles are static/css/site.css (no `style=`); the QR code is inline SVG markup.
CONTENT_SECURITY_POLICY = {
    "default-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "style-src": ["'self'"],
    "script-src": ["'self'"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "frame-ancestors": ["'none'"],
    "form-action": ["'self'"],
    "base-uri": ["'none'"],
}
SECURE_CONTENT_TYPE_NOSNIFF = True
# The order page's URL carries its secret token: never send it to another site.
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            # `{% load js_text %}`: texts for the progressive-enhancement scripts (static/js/).
            "libraries": {"js_text": "core.js_text", "money_text": "core.money_text"},
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# What `make run` keeps between runs (the embedded database, the broker's folders, beat's state, emails); ignored
# by git. RUN_DIR moves it (the suite's journey test runs a whole stack in a folder of its own).
RUN_DIR = Path(env_str("RUN_DIR", str(BASE_DIR / ".run")))

# PostgreSQL only: row locks, advisory locks and triggers keep the money right. With no DATABASE_URL, the embedded
# cluster that `make run` starts under RUN_DIR/postgres (core/local_postgres.py).
DATABASE_URL = env_str("DATABASE_URL", "") or database_url(RUN_DIR / "postgres")
refuse_other_engines(DATABASE_URL)
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)}
# A database that does not answer fails a request (and /healthz) in seconds instead of hanging it.
DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("es", _("Spanish")), ("fr", _("French"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

SESSION_ENGINE = "django.contrib.sessions.backends.db"
# DEBUG off means a deployment behind HTTPS: cookies never travel in clear. `make run` serves plain HTTP.
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG

# Rate limits per client IP (core/ratelimit.py); the counters live in the default cache.
_CACHE_URL = env_str("CACHE_URL", "")
CACHES = {
    # Pages and rate limits keep working while this Redis is down (core/cache.py).
    "default": {
        "BACKEND": "core.cache.ForgivingRedisCache",
        "LOCATION": _CACHE_URL,
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    }
    if _CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}
RATELIMIT_ENABLE = env_bool("RATELIMIT_ENABLE", True)
RATELIMIT_WINDOW_S = env_int("RATELIMIT_WINDOW_S", 600)
RATELIMIT_ORDERS = env_int("RATELIMIT_ORDERS", 10)
RATELIMIT_PAID = env_int("RATELIMIT_PAID", 30)
RATELIMIT_EXTENSIONS = env_int("RATELIMIT_EXTENSIONS", 10)
RATELIMIT_KEY_CHANGES = env_int("RATELIMIT_KEY_CHANGES", 10)  # "Replace SSH key" per client IP and window
RATELIMIT_TOKEN_FAILURES = env_int("RATELIMIT_TOKEN_FAILURES", 20)
# "Find my order": per client IP, and per email address asked about (the emails a stranger can trigger).
RATELIMIT_LOOKUPS = env_int("RATELIMIT_LOOKUPS", 10)
RATELIMIT_LOOKUPS_PER_EMAIL = env_int("RATELIMIT_LOOKUPS_PER_EMAIL", 3)
RATELIMIT_LOOKUPS_EMAIL_WINDOW_S = env_int("RATELIMIT_LOOKUPS_EMAIL_WINDOW_S", 3600)
RATELIMIT_TRUSTED_PROXIES = env_int("RATELIMIT_TRUSTED_PROXIES", 0)

# Email: the console by default; any SMTP server or ESP backend through the environment.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_FILE_PATH = env_str("EMAIL_FILE_PATH", str(RUN_DIR / "emails"))  # filebased backend only
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "B200 Pairs <orders@localhost>")
# Absolute links in emails (the order's secret status link).
SITE_URL = env_str("SITE_URL", "http://127.0.0.1:8000").rstrip("/")
# Who sells, as the receipt names it (/o/<reference>/<token>/receipt/): set them to the legal entity.
SELLER_NAME = env_str("SELLER_NAME", "B200 Pairs")
SELLER_ADDRESS = env_str("SELLER_ADDRESS", "")  # one line; empty: not shown
SELLER_TAX_ID = env_str("SELLER_TAX_ID", "")  # a VAT or company number; empty: not shown

# Celery: a server-less filesystem transport for `make run` unless a broker is configured.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "data_folder_in": str(RUN_DIR / "broker"),
        "data_folder_out": str(RUN_DIR / "broker"),
        "processed_folder": str(RUN_DIR / "broker-processed"),
        "control_folder": str(RUN_DIR / "broker-control"),
        "store_processed": False,
        "polling_interval": 0.05,
    }
    if CELERY_BROKER_URL.startswith("filesystem")
    # Redis: a task whose worker died unacknowledged (acks_late) goes back to the queue after this long.
    # It must exceed the longest countdown (retry backoff) a task waits in a worker; tests shorten it.
    else {
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT_SECONDS", 3600),
        # Look for such tasks every 10 s (kombu's default scans on every 10th sweep: about 100 s), and not
        # only when a worker starts, which a concurrent sweep holding kombu's mutex can make it miss.
        "unacked_restore_interval": 10,
        "unacked_restore_throttle": 1,
        # A broker that accepts connections but never answers (a hung host) would otherwise hold a request
        # that enqueues work forever: kombu's default socket timeout is none.
        "socket_timeout": env_int("CELERY_BROKER_SOCKET_TIMEOUT_SECONDS", 2),
        "socket_connect_timeout": env_int("CELERY_BROKER_SOCKET_TIMEOUT_SECONDS", 2),
    }
)
if CELERY_BROKER_URL.startswith("filesystem"):
    CELERY_BROKER_TRANSPORT = "config.broker_files:Transport"  # kombu's, with messages that appear whole
    for folder in ("broker", "broker-processed", "broker-control"):
        (RUN_DIR / folder).mkdir(parents=True, exist_ok=True)
# A request that enqueues work must not hang on a broker that is down.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = 300
CELERY_TASK_SOFT_TIME_LIMIT = 240
CELERY_TIMEZONE = "UTC"
SCAN_INTERVAL_SECONDS = env_int("SCAN_INTERVAL_SECONDS", 15)
# Money due back that is worth less than this (in USD) opens no refund by itself: dust anyone can send to a
# public address. A reviewer can still refund it; a token the shop does not sell always waits for one.
REFUND_MIN_USD = Decimal(env_str("REFUND_MIN_USD", "1.00"))
# Where the treasurer sweeps deposit addresses: a transfer out to it is a sweep, not a leak. Per network,
# TREASURY_ADDRESS_<NETWORK> overrides it (read by payments.networks, as CHAIN_RPC_URLS_<NETWORK> is).
TREASURY_ADDRESS = env_str("TREASURY_ADDRESS", "")
# Who hears of money leaving a deposit address unexplained (it may mean a leaked key); ADMINS when empty.
STAFF_ALERT_EMAILS = env_list("STAFF_ALERT_EMAILS", [])
# /metrics: with a token, every scraper needs `Authorization: Bearer <token>`; without one, loopback clients only.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
# A short token could be guessed by whoever reaches /metrics: refused at start, not found out later.
if METRICS_TOKEN and (len(METRICS_TOKEN) < 32 or not METRICS_TOKEN.isascii() or not METRICS_TOKEN.isalnum()):
    raise ImproperlyConfigured("METRICS_TOKEN must be at least 32 letters and digits: `openssl rand -hex 32`")
# A chat channel's incoming webhook: every staff notification is also POSTed there as {"text": ...}
# (orders/staff_notices.py). Its URL is its secret: never logged.
STAFF_WEBHOOK_URL = env_str("STAFF_WEBHOOK_URL", "").strip()
# A background job (an email, a payment check, a preparation run...) not run this long after its change
# committed is sent again by beat: the broker was down, or the worker that took it died (core/jobs).
JOB_RESEND_AFTER_SECONDS = env_int("JOB_RESEND_AFTER_SECONDS", 60)
# How often beat probes the idle nodes (a day by default).
NODE_PROBE_INTERVAL_SECONDS = env_int("NODE_PROBE_INTERVAL_SECONDS", 86400)
# Beat's state (when each periodic task last ran) lives in a run folder, never in the working directory:
# `celery ... beat` or `worker --beat` started in the checkout leaves nothing in it (.run/ is ignored).
CELERY_BEAT_SCHEDULE_FILENAME = env_str("CELERY_BEAT_SCHEDULE_FILENAME", str(RUN_DIR / "celerybeat-schedule"))
CELERY_BEAT_SCHEDULER = "core.beat.RunFolderScheduler"
CELERY_BEAT_SCHEDULE = {
    "send-due-jobs": {"task": "core.jobs.tasks.jobs_send_due_task", "schedule": max(1.0, JOB_RESEND_AFTER_SECONDS)},
    "release-expired-reservations": {
        "task": "orders.tasks.reservations_release_expired_task",
        "schedule": 60.0,
    },
    "scan-payments": {
        "task": "payments.tasks.scan_all_networks_task",
        "schedule": float(SCAN_INTERVAL_SECONDS),
    },
    "revoke-ended-access": {"task": "provisioning.tasks.access_revoke_due_task", "schedule": 60.0},
    "resume-stuck-preparations": {"task": "provisioning.tasks.preparation_resume_stuck_task", "schedule": 60.0},
    "remind-before-the-end": {"task": "provisioning.tasks.access_reminders_task", "schedule": 600.0},
    # Idle nodes between rentals: reachable with their pinned host key, nothing on their cards (docs/staff-guide.md).
    "probe-idle-nodes": {
        "task": "provisioning.tasks.node_probe_idle_task",
        "schedule": float(NODE_PROBE_INTERVAL_SECONDS),
    },
}

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "core.api_errors.api_exception_handler",  # each error's stable `code`
    # DRF's parsers, but JSON nested too deeply is a 400 before it reaches the decoder (core/api_parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "core.api_parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "B200 pairs shop API",
    "DESCRIPTION": "Order lots of two NVIDIA B200 cards and pay with a crypto transfer.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
}

# Payments
PAYMENTS_XPUB = env_str("PAYMENTS_XPUB", DEV_PAYMENTS_XPUB)
if PAYMENTS_XPUB != DEV_PAYMENTS_XPUB:
    # Refuse at start-up, not at the first checkout, a private key, a key of another level, or garbage.
    from payments.addresses import validate_account_xpub

    validate_account_xpub(PAYMENTS_XPUB)
PAYMENT_WINDOW_MINUTES = env_int("PAYMENT_WINDOW_MINUTES", 30)
# The most lots one order may hold before it is paid: a count, or a share of the sellable fleet (rounded up),
# so that nobody can take every lot for a payment window without paying (orders.capacity.lots_cap).
MAX_LOTS_PER_UNPAID_ORDER = env_share("MAX_LOTS_PER_UNPAID_ORDER", "50%")
# Deposit addresses stay watched this long after the window: late money reaches a reviewer.
PAYMENT_WATCH_DAYS = env_int("PAYMENT_WATCH_DAYS", 7)
# How long a rental's end waits for an extension paid in full before the end whose money is not final yet.
EXTENSION_FINALITY_GRACE_MINUTES = env_int("EXTENSION_FINALITY_GRACE_MINUTES", 60)
# Final credits stay re-checked this long after their block (a reorg deeper than the confirmations goes to review).
PAYMENT_REORG_WATCH_HOURS = env_int("PAYMENT_REORG_WATCH_HOURS", 24)

# A native coin's USD rate older than this is refused when quoting.
RATE_MAX_AGE_SECONDS = env_int("RATE_MAX_AGE_SECONDS", 600)
# The local development chain prices its native coin at this fixed rate when no fresh rate exists.
DEV_NATIVE_USD_RATE = env_str("DEV_NATIVE_USD_RATE", "3000")
RPC_TIMEOUT_SECONDS = env_int("RPC_TIMEOUT_SECONDS", 5)
# A whole answer must arrive within this (a provider that drips bytes never trips the read timeout) and be at most
# this large (geth caps a batch's answer at 25 MB): past either, that provider failed the request.
RPC_ANSWER_DEADLINE_SECONDS = env_int("RPC_ANSWER_DEADLINE_SECONDS", 30)
RPC_MAX_ANSWER_BYTES = env_int("RPC_MAX_ANSWER_BYTES", 32_000_000)
# A provider that answers 429: its Retry-After is waited out up to this many seconds, this many times a request.
RPC_RETRY_AFTER_MAX_SECONDS = env_int("RPC_RETRY_AFTER_MAX_SECONDS", 2)
RPC_RATE_LIMIT_RETRIES = env_int("RPC_RATE_LIMIT_RETRIES", 3)
# What one request for full blocks (native-coin detection) may bring back, about: fewer blocks a request on busy
# chains. Providers refuse far larger answers (geth's default batch response cap is 25 MB).
RPC_MAX_RESPONSE_BYTES = env_int("RPC_MAX_RESPONSE_BYTES", 2_000_000)
# Blocks are not read in full to find native coin: every watched address's balance and nonce are checked this
# often (a native-coin order's balance every pass), and blocks are read only where coin moved (payments.coin_watch).
COIN_CHECK_SECONDS = env_int("COIN_CHECK_SECONDS", 600)
# With no address watched and no money in flight, a network's pass reads only its head, this often at most.
IDLE_PASS_SECONDS = env_int("IDLE_PASS_SECONDS", 60)
# `CHAIN_RPC_URLS_<NETWORK>` are read per network by payments.networks; this is the local default.
DEFAULT_LOCAL_RPC_URL = "http://127.0.0.1:8545"

# Provisioning
MANIFEST_SIGNING_KEY = env_str("MANIFEST_SIGNING_KEY", DEV_MANIFEST_SIGNING_KEY)
PREFLIGHT_TIMEOUT_SECONDS = env_int("PREFLIGHT_TIMEOUT_SECONDS", 1800)
# A node that accepts the TCP connection but never completes the SSH handshake fails after this long.
NODE_CONNECT_TIMEOUT_SECONDS = env_int("NODE_CONNECT_TIMEOUT_SECONDS", 10)
# A preparation run still queued (or running with no live worker) this long after it started, or a withdrawal
# still pending, is started again by beat (its task was lost).
PREPARATION_STUCK_AFTER_SECONDS = env_int("PREPARATION_STUCK_AFTER_SECONDS", 120)
REMINDER_HOURS = (72, 24, 1)

# The renter's campaign (docs/provisioning.md, "While a rental runs"). Rented nodes are probed every few minutes
# without loading their cards; results are kept this many days.
NODE_HEALTH_PROBE_MINUTES = env_int("NODE_HEALTH_PROBE_MINUTES", 5)
NODE_HEALTH_KEEP_DAYS = env_int("NODE_HEALTH_KEEP_DAYS", 14)
# Rented nodes: a health probe each (docs/provisioning.md, "While a rental runs"); old probes go with retention.
CELERY_BEAT_SCHEDULE["probe-rented-nodes"] = {
    "task": "provisioning.tasks.node_health_probes_task",
    "schedule": 60.0 * NODE_HEALTH_PROBE_MINUTES,
}
# Downtime the probes saw is added to the rental's end, at most this many hours per rental (the terms say so).
DOWNTIME_CREDIT_CAP_HOURS = env_int("DOWNTIME_CREDIT_CAP_HOURS", 72)
# A move to a spare node copies at most this many GiB of the tenant's home and scratch, node to node.
MOVE_COPY_MAX_GIB = env_int("MOVE_COPY_MAX_GIB", 200)
# ... and stops after this many minutes (what is left is listed as not copied; the move goes on).
MOVE_COPY_MAX_MINUTES = env_int("MOVE_COPY_MAX_MINUTES", 240)
# After the end, the account may download its data over read-only SFTP for this many hours (0: none).
DATA_GRACE_HOURS = env_int("DATA_GRACE_HOURS", 12)
# Before the rental ends (or a move stops the node), the node tells the account this many minutes ahead:
# ~/.b200/notice.json and a line on its terminals (issue 41).
END_NOTICE_MINUTES = env_int("END_NOTICE_MINUTES", 30)
# At the end the account's processes get SIGTERM, then SIGKILL this many seconds later: a loop that saves a
# checkpoint on SIGTERM keeps it into the data window.
END_GRACE_SECONDS = env_int("END_GRACE_SECONDS", 120)
CELERY_BEAT_SCHEDULE["notice-before-the-end"] = {"task": "provisioning.tasks.access_notices_task", "schedule": 60.0}
# On: a paid order's preparation starts by itself (operators can still stop it). Off: operators trigger it.
AUTO_PREPARE = env_bool("AUTO_PREPARE", False)

DEFAULT_EXCEPTION_REPORTER_FILTER = "core.redaction.SecretsHidingExceptionReporterFilter"
# `json`: one JSON object per line (time, level, logger, message, and order, network, node, task where known);
# else text with the same fields (core/logs.py). Either way every line goes through core.redaction: order
# tokens, API tokens, private keys, mnemonics and URL passwords never reach a log.
LOG_FORMAT = env_str("LOG_FORMAT", "text").strip().lower() or "text"
if LOG_FORMAT not in {"json", "text"}:
    raise ImproperlyConfigured(f"LOG_FORMAT={LOG_FORMAT!r}: use json, or text (the default)")
LOG_FORMATTER = "core.logs.RedactingJsonFormatter" if LOG_FORMAT == "json" else "core.logs.HumanFormatter"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "core.log_context.ContextFilter"}},
    "formatters": {"default": {"()": LOG_FORMATTER}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "default", "filters": ["context"]}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# Retention (shop/retention.py, docs/operating.md "Retention"): operational history goes after these many days, in an
# hourly pass of short batches. Money evidence is kept; personal data goes as the privacy page says.
JOB_KEEP_DAYS = env_int("JOB_KEEP_DAYS", 7)  # background jobs done or given up (a lookup's typed address with them)
EMAIL_KEEP_DAYS = env_int("EMAIL_KEEP_DAYS", 30)  # customer emails sent (who, which, when: no body is stored)
NODE_CHECK_KEEP_DAYS = env_int("NODE_CHECK_KEEP_DAYS", 90)  # rechecks and idle probes (each node's latest stays)
RUN_LOG_KEEP_DAYS = env_int("RUN_LOG_KEEP_DAYS", 90)  # a finished preparation's log (its report is evidence: kept)
UNPAID_ORDER_KEEP_DAYS = env_int("UNPAID_ORDER_KEEP_DAYS", 90)  # an order expired with no transfer: no sale, gone whole
# The accounting period: an order whose books are closed goes whole with its money evidence this long after its last
# change (ten years: the longest the shop's jurisdictions ask of accounting records; Spain asks six, France ten).
MONEY_EVIDENCE_KEEP_DAYS = env_int("MONEY_EVIDENCE_KEEP_DAYS", 3653)
CELERY_BEAT_SCHEDULE["prune-history"] = {"task": "shop.tasks.history_prune_task", "schedule": 3600.0}
