"""docker-compose.yml: the services, their health checks and restart policies, the database volume, and only
variables the settings read. `docker compose config` validates it too where the compose plugin exists."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from tests.deploy.settings_env import (
    COMPOSE_FILE,
    clean_environment,
    compose_operator_values,
    is_read,
    variables_read,
)
from tests.deploy.settings_env import service_environment as environment
from tests.servers import ROOT

SHOP_SERVICES = ("web", "worker", "beat")
SERVICES = (*SHOP_SERVICES, "postgres", "redis", "anvil")
RESTART_POLICIES = {"always", "unless-stopped", "on-failure"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def test_the_stack_has_the_shop_its_servers_and_a_dev_chain(compose):
    assert set(SERVICES) <= set(compose["services"]), sorted(compose["services"])
    assert compose["services"]["anvil"]["profiles"] == ["dev"]
    for name in SERVICES:
        if name != "anvil":
            assert "profiles" not in compose["services"][name], f"{name} must start without a profile"


@pytest.mark.parametrize("name", SERVICES)
def test_every_service_has_a_health_check_and_a_restart_policy(compose, name):
    service = compose["services"][name]

    assert service.get("restart") in RESTART_POLICIES, f"{name}: restart={service.get('restart')!r}"
    test = service.get("healthcheck", {}).get("test")
    assert test, f"{name} has no health check"
    assert test not in (["NONE"], "NONE")


def test_the_database_keeps_its_data_in_a_named_volume(compose):
    volumes = compose["services"]["postgres"]["volumes"]

    data = [volume for volume in volumes if str(volume).endswith(":/var/lib/postgresql/data")]
    assert data, volumes
    assert data[0].split(":")[0] in compose["volumes"]


def test_the_shop_services_run_gunicorn_a_worker_and_one_beat(compose):
    services = compose["services"]

    assert "gunicorn config.wsgi" in services["web"]["command"]
    assert "celery -A config worker" in services["worker"]["command"]
    assert "celery -A config beat" in services["beat"]["command"]
    # A second beat would enqueue every periodic task twice.
    assert services["beat"].get("deploy", {}).get("replicas", 1) == 1
    assert services["web"]["environment"]["DJANGO_SETTINGS_MODULE"] == "config.settings.production"


@pytest.mark.parametrize("name", SHOP_SERVICES)
def test_every_variable_set_for_the_shop_is_one_the_settings_read(compose, name):
    read = variables_read()
    assert {"DJANGO_SECRET_KEY", "DATABASE_URL", "PAYMENTS_XPUB", "NODE_SSH_KEY_FILE"} <= read  # the scan works

    unread = sorted(variable for variable in environment(compose["services"][name]) if not is_read(variable, read))

    assert unread == [], f"{name} sets variables nothing reads: {unread}"


@pytest.mark.parametrize("name", SHOP_SERVICES)
def test_the_shop_gets_every_value_production_refuses_to_start_without(compose, name):
    env = environment(compose["services"][name])

    for variable in ("DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS", "PAYMENTS_XPUB", "MANIFEST_SIGNING_KEY"):
        assert variable in env, f"{name} lacks {variable}"
    assert {"DATABASE_URL", "CELERY_BROKER_URL"} <= set(env)


def test_every_variable_the_compose_file_takes_is_documented_in_the_docs():
    taken = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", COMPOSE_FILE.read_text()))
    # the compose file's own variables (docs/production.md) and the shop's settings table (docs/operating.md)
    docs = (ROOT / "docs" / "production.md").read_text() + (ROOT / "docs" / "operating.md").read_text()

    undocumented = sorted(name for name in taken if f"`{name}`" not in docs and not _documented_prefix(name, docs))

    assert undocumented == []


def _documented_prefix(name: str, docs: str) -> bool:
    return name.startswith("CHAIN_RPC_URLS_") and "`CHAIN_RPC_URLS_<NETWORK>`" in docs


def _compose_plugin() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30).returncode == 0


# `docker compose config` only where the compose plugin exists (not on this project's machines, whose
# docker is a bare client): collected there, absent here, never a skip; the parse tests above always run.
if _compose_plugin():

    def test_docker_compose_accepts_the_file_where_the_compose_plugin_exists(tmp_path):
        key = tmp_path / "node_ssh_key"
        key.write_text("")
        values = {**compose_operator_values(), "NODE_SSH_KEY_PATH": str(key)}
        values["METRICS_TOKEN"] = "c" * 32
        for profile in ([], ["--profile", "dev"], ["--profile", "monitoring"]):
            checked = subprocess.run(
                ["docker", "compose", "-f", str(COMPOSE_FILE), *profile, "config", "--quiet"],
                cwd=ROOT,
                env=clean_environment(**values),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert checked.returncode == 0, checked.stderr


def test_the_monitoring_profile_runs_prometheus_with_the_rules_scraping_the_web_service_with_the_token(compose):
    prometheus = compose["services"]["prometheus"]

    assert prometheus["profiles"] == ["monitoring"]
    assert prometheus.get("restart") in RESTART_POLICIES and prometheus["healthcheck"]["test"]
    mounts = {volume.split(":")[1]: volume.split(":")[0] for volume in prometheus["volumes"]}
    assert mounts["/etc/prometheus/alerts.yml"] == "./deploy/prometheus/alerts.yml"
    config = yaml.safe_load((ROOT / mounts["/etc/prometheus/prometheus.yml"]).read_text())
    assert "/etc/prometheus/alerts.yml" in config["rule_files"]
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics" and job["static_configs"][0]["targets"] == ["web:8000"]
    # The token: the web service's METRICS_TOKEN, given to Prometheus as a secret file
    assert job["authorization"] == {"type": "Bearer", "credentials_file": "/run/secrets/metrics_token"}
    assert "metrics_token" in prometheus["secrets"]
    assert compose["secrets"]["metrics_token"] == {"environment": "METRICS_TOKEN"}
    assert environment(compose["services"]["web"])["METRICS_TOKEN"] == "${METRICS_TOKEN:-}"


def test_gunicorn_adds_up_its_workers_request_histograms(compose):
    web = compose["services"]["web"]
    assert "-c python:config.gunicorn" in web["command"]
    assert environment(web)["PROMETHEUS_MULTIPROC_DIR"]
