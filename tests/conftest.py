from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from tests.servers import Anvil
from tests.sshd import uid_floor
from tests.staff import add_staff

# The `slow` tier (pyproject.toml's markers; `make check` runs the rest, `make test` everything). A test is slow
# when it asks, directly or through another fixture, for one of these: each starts real processes or runs real
# work measured in seconds, not milliseconds.
SLOW_FIXTURES = frozenset(
    {
        # the sandboxed OpenSSH servers (tests/sshd.py, tests/provisioning/flow/node_faults.py)
        "sandbox_sshd",
        "stock_sshd",
        "private_sshd",
        # real Celery workers, beat, gunicorn, private Redis and PostgreSQL servers (tests/servers.py,
        # tests/faults/servers.py)
        "celery_worker",
        "payments_worker",
        "workers",
        "private_redis",
        "private_postgres",
        # the GPU preflight run for real: torchrun-like ranks on CPU, torch.compile
        "preflight",
        "require_torch",
        # the browser journey (tests/browser, run apart by `make test`)
        "browser",
    }
)
# Tests that start such processes themselves, without a fixture (measured: each takes seconds), by module.
SLOW_MODULES = frozenset(
    {
        "tests/perf/test_bench_scripts.py",  # the bench/ scripts at their smallest sizes
        "tests/deploy/test_metrics_under_gunicorn.py",  # gunicorn
        "tests/deploy/test_no_secrets_in_logs.py",  # gunicorn
        "tests/faults/test_broker_down.py",  # gunicorn, workers, beat
        "tests/faults/test_database_restart.py",  # gunicorn, a private PostgreSQL
        "tests/faults/test_worker_killed.py",  # workers
        "tests/project/test_layers.py",  # lint-imports
        "tests/project/test_newcomer_journey.py",  # `make run` from a fresh checkout
        "tests/project/test_make_run_torch.py",
    }
)
# The real servers a test needs, marked the same way: `-m "not postgres and not redis"` runs what needs neither.
# `postgres`: the test database (a `django_db` mark or a database fixture) or a private PostgreSQL cluster;
# `redis`: the Redis server of CELERY_BROKER_URL.
POSTGRES_FIXTURES = frozenset({"db", "transactional_db", "django_db_setup", "live_server", "private_postgres"})
REDIS_FIXTURES = frozenset({"redis_broker", "redis_url", "celery_worker", "payments_worker", "workers"})
REDIS_MODULES = frozenset({"tests/faults/test_worker_killed.py"})
ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config, items):
    """Mark `slow`, `postgres` and `redis` from the fixtures a test uses and the modules listed above."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        module = Path(str(item.fspath)).resolve().relative_to(ROOT).as_posix()
        if names & SLOW_FIXTURES or module in SLOW_MODULES or module.startswith("tests/browser/"):
            item.add_marker(pytest.mark.slow)
        if names & POSTGRES_FIXTURES or item.get_closest_marker("django_db") is not None:
            item.add_marker(pytest.mark.postgres)
        if names & REDIS_FIXTURES or module in REDIS_MODULES:
            item.add_marker(pytest.mark.redis)


@pytest.fixture(autouse=True)
def _empty_cache():
    """Each test starts with an empty cache: it holds copies of rows (the catalog) that the test database
    rolls back between tests."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture(autouse=True)
def _providers_limits_forgotten():
    """What the RPC client learnt of a provider's limits (log ranges, batch sizes, full blocks a request) is
    process-wide: each test starts without it, whatever a test before it refused."""
    from payments.log_ranges import LOG_SPANS
    from payments.native import FULL_BLOCKS_PER_REQUEST
    from payments.rpc import BATCH_SIZES

    LOG_SPANS.forget()
    BATCH_SIZES.forget()
    FULL_BLOCKS_PER_REQUEST.forget()


@pytest.fixture(scope="session")
def anvil():
    """One real anvil for the session, registered as the `local` network's RPC."""
    node = Anvil()
    previous = os.environ.get("CHAIN_RPC_URLS_LOCAL")
    os.environ["CHAIN_RPC_URLS_LOCAL"] = node.url
    yield node
    node.stop()
    if previous is None:
        os.environ.pop("CHAIN_RPC_URLS_LOCAL", None)
    else:
        os.environ["CHAIN_RPC_URLS_LOCAL"] = previous


@pytest.fixture
def only_local_network(monkeypatch):
    """No CHAIN_RPC_URLS_* from the shell leaks in: only `local` (which has a default URL) is configured."""
    for name in list(os.environ):
        if name.startswith("CHAIN_RPC_URLS_") and name != "CHAIN_RPC_URLS_LOCAL":
            monkeypatch.delenv(name)


@pytest.fixture
def reviewer(db):
    """A payment reviewer (tests/staff.py: its password is STAFF_PASSWORD)."""
    return add_staff("rita", "reviewer")


@pytest.fixture
def operator(db):
    """A node operator (tests/staff.py: its password is STAFF_PASSWORD)."""
    return add_staff("olga", "operator")


@pytest.fixture
def make_node(db, tmp_path):
    """A node on this machine (the local driver). Its accounts live in a user database of its own under the test's
    folder: the access tool that a test reaches through it (an extension, a credit) never adds a user to this
    machine."""
    from provisioning.models import Node

    counter = iter(range(1, 10_000))
    accounts = accounts_database(tmp_path / "node-accounts")

    def make(**fields):
        number = next(counter)
        defaults = {"name": f"node-{number}", "driver": "local", "host": "127.0.0.1", "accounts_root": accounts}
        return Node.objects.create(**{**defaults, **fields})

    return make


def accounts_database(folder: Path) -> str:
    """A copy of this machine's user database (no password hash) under `folder`, for `access.py --users-prefix`."""
    etc = folder / "etc"
    (etc / "ssh").mkdir(parents=True)
    (folder / "home").mkdir()
    for name in ("passwd", "group", "shadow", "gshadow", "subuid", "subgid"):
        source = Path("/etc") / name
        if source.exists():
            lines = source.read_text().splitlines()
            if name in ("shadow", "gshadow"):
                lines = [re.sub(r"^([^:]*):[^:]*:", r"\1:*:", line) for line in lines]
            (etc / name).write_text("".join(f"{line}\n" for line in lines))
    # Its accounts number apart from this machine's users and the sshd sandbox's (the end of rental kills by uid)
    floor = uid_floor() + 1_500
    for name, line in (("passwd", f"uid-floor:x:{floor}:{floor}::/nonexistent:/usr/sbin/nologin"),
                       ("group", f"uid-floor:x:{floor}:")):  # fmt: skip
        with open(etc / name, "a") as handle:
            handle.write(f"{line}\n")
    return str(folder)


@pytest.fixture
def ssh_public_key() -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    line = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return f"{line} researcher@lab"


@pytest.fixture
def order_payload(ssh_public_key):
    """A valid API body for one lot, 7 days, paid in ETH on the local chain."""
    return {
        "lots": 1,
        "duration_days": 7,
        "preparation": "pytorch-blackwell",
        "first_name": "Ada",
        "last_name": "Lovelace Byron",
        "email": "ada@example.org",
        "ssh_public_key": ssh_public_key,
        "network": "local",
        "asset": "ETH",
        "hypothesis_kind": "bigger_batch",
        "hypothesis": "A global batch of 2048 fits when sharded.",
    }


@pytest.fixture(autouse=True)
def default_language_after_each_test(settings):
    """A test that renders in Spanish (an email, a page) leaves the thread's language as it found it."""
    yield
    from django.utils import translation

    translation.activate(settings.LANGUAGE_CODE)
