"""Production settings with real-looking values pass Django's deployment checks without a single warning,
and keep the security headers of the development settings."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.deploy.settings_env import clean_environment, production_values
from tests.servers import ROOT

SETTINGS = (
    "import json, django; django.setup(); from django.conf import settings; "
    "print(json.dumps({'middleware': settings.MIDDLEWARE, 'csp': settings.CONTENT_SECURITY_POLICY, "
    "'nosniff': settings.SECURE_CONTENT_TYPE_NOSNIFF, 'referrer': settings.SECURE_REFERRER_POLICY, "
    "'debug': settings.DEBUG, 'staticfiles': settings.STORAGES['staticfiles']['BACKEND']}))"
)


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *command],
        cwd=ROOT,
        env=clean_environment(**production_values()),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_pass_check_deploy_without_a_warning():
    # Given the production settings with an operator's values / When Django's deployment checks run
    checked = run("manage.py", "check", "--deploy", "--fail-level", "WARNING")

    # Then they exit 0 and report nothing at all
    output = checked.stdout + checked.stderr
    assert checked.returncode == 0, output
    assert "System check identified no issues (0 silenced)." in checked.stdout
    assert "WARNING" not in output
    assert "?: (" not in output  # a check's id, as "?: (security.W004)"


def test_production_serves_the_csp_and_the_static_files_itself():
    shown = run("-c", SETTINGS)

    assert shown.returncode == 0, shown.stderr
    settings = json.loads(shown.stdout.strip().splitlines()[-1])
    assert settings["debug"] is False
    assert "core.csp.ContentSecurityPolicyMiddleware" in settings["middleware"]
    assert "whitenoise.middleware.WhiteNoiseMiddleware" in settings["middleware"]
    assert settings["staticfiles"] == "whitenoise.storage.CompressedManifestStaticFilesStorage"
    assert settings["csp"]["script-src"] == ["'self'"]
    assert settings["nosniff"] is True
    assert settings["referrer"] == "same-origin"
