"""`python -m config.healthcheck [URL]`: the web container's health check; exit 0 when /healthz answers 200.

It asks the local gunicorn (default `http://127.0.0.1:8000/healthz`) with a Host the settings allow (the
first of DJANGO_ALLOWED_HOSTS) and as the TLS proxy would (`X-Forwarded-Proto: https`), so that neither
ALLOWED_HOSTS nor the HTTPS redirect of the production settings turns the probe away. No Django import:
it costs a fraction of a second.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8000/healthz"


def allowed_host() -> str:
    hosts = [host.strip() for host in os.environ.get("DJANGO_ALLOWED_HOSTS", "").split(",") if host.strip()]
    if not hosts or hosts[0] == "*":
        return "localhost"
    return hosts[0].lstrip(".")  # ".example.org" allows example.org and its subdomains


def main(argv: list[str]) -> int:
    url = argv[1] if len(argv) > 1 else DEFAULT_URL
    if not url.startswith(("http://", "https://")):
        print(f"healthcheck: not an HTTP URL: {url}", file=sys.stderr)
        return 2
    headers = {"Host": allowed_host(), "X-Forwarded-Proto": "https"}
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - the scheme is checked above
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return 0 if response.status == 200 else 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"healthcheck: {url}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
