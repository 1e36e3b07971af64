"""`make run`: start the embedded PostgreSQL (when no DATABASE_URL is given) and anvil, migrate, register
development nodes, and run a Celery worker and beat and the web server together, on kombu's filesystem transport.
Ctrl-C stops everything it started, the database included.

Options (the suite's journey test runs a whole stack of its own with them): `--port` for the web server (8000),
`--run-dir` for what is kept between runs (RUN_DIR, default `.run/`); the chain is CHAIN_RPC_URLS_LOCAL's first URL.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.local_postgres import Cluster, ClusterError  # noqa: E402 - after the checkout is on the path

PY = sys.executable
ANVIL = ROOT / "node_modules" / ".bin" / "anvil"
DEV_NODES = ["dev-node-1", "dev-node-2", "dev-node-3"]
STOP_SECONDS = 10
PR_SET_CHILD_SUBREAPER = 36  # prctl(2), Linux


def rpc_answers(url: str) -> bool:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=1) as response:
            return "result" in json.load(response)
    except OSError:
        return False


def dev_accounts_sandbox(run_dir: Path) -> Path:
    """A copy of this machine's user database (password fields blanked) for useradd --prefix."""
    root = run_dir / "accounts"
    etc = root / "etc"
    if not (etc / "passwd").exists():
        (root / "home").mkdir(parents=True, exist_ok=True)
        etc.mkdir(parents=True, exist_ok=True)
        for name in ("passwd", "group", "shadow", "gshadow"):
            source = Path("/etc") / name
            if source.exists() and os.access(source, os.R_OK):
                lines = source.read_text().splitlines()
                if name in ("shadow", "gshadow"):
                    lines = [":".join([line.split(":")[0], "*", *line.split(":")[2:]]) for line in lines if line]
                (etc / name).write_text("".join(f"{line}\n" for line in lines))
    return root


def this_machines_host_key() -> str:
    """The development nodes are this machine: its SSH server's host key is theirs (the access shows its
    fingerprint, as a real node's); empty where no SSH server is installed."""
    for kind in ("ed25519", "ecdsa", "rsa"):
        path = Path(f"/etc/ssh/ssh_host_{kind}_key.pub")
        if path.is_file() and os.access(path, os.R_OK):
            return " ".join(path.read_text().split()[:2])
    return ""


class Stack:
    """The processes `make run` started, each the leader of its own process group, so that stopping one stops
    whatever it started too (a worker's pool, a preflight); and the embedded database, if it started one."""

    def __init__(self) -> None:
        self.children: list[subprocess.Popen] = []
        self.database: Cluster | None = None

    def start(self, command: list[str]) -> subprocess.Popen:
        child = subprocess.Popen(command, cwd=ROOT, process_group=0)
        self.children.append(child)
        return child

    def stop(self) -> None:
        for child in self.children:
            # Python programs stop cleanly on SIGINT (Celery's warm shutdown); anvil on SIGTERM.
            self._signal(child, signal.SIGINT if child.args[0] == PY else signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        for child in self.children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            self._signal(child, signal.SIGKILL)  # whatever is left of its group
            child.wait()
        if self.database is not None:
            try:
                self.database.stop()
            except ClusterError as error:
                print(f"devstack: the database did not stop: {error}", file=sys.stderr)

        orphans_stop()

    @staticmethod
    def _signal(child: subprocess.Popen, number: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, number)


def become_subreaper() -> None:
    """Processes the stack's own processes started in a session of their own (the development nodes' preflight and
    access tool) are handed to this process when their parent dies, not to init: Ctrl-C can stop them too."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def orphans_stop() -> None:
    """SIGKILL whatever is left as this process's child (and its process group), and reap it."""
    for _ in range(50):
        orphans = [
            int(entry.name)
            for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and _parent(entry) == os.getpid()
        ]
        if not orphans:
            return
        for pid in orphans:
            with contextlib.suppress(OSError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        time.sleep(0.1)


def _parent(entry: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        stat = entry.joinpath("stat").read_text()
        return int(stat[stat.rindex(")") + 2 :].split()[1])
    return None


def manage(*args: str) -> None:
    subprocess.run([PY, "manage.py", *args], cwd=ROOT, check=True)


def prepare(run_dir: Path, rpc_url: str, stack: Stack) -> None:
    """Everything before serving: the database, the chain, the schema, the development nodes and tokens."""
    for folder in ("broker", "broker-processed", "broker-control"):
        (run_dir / folder).mkdir(parents=True, exist_ok=True)
    if not os.environ.get("DATABASE_URL"):
        stack.database = Cluster(run_dir / "postgres")
        os.environ["DATABASE_URL"] = stack.database.start()
        print(f"devstack: embedded PostgreSQL at {os.environ['DATABASE_URL']} (data in {stack.database.data})")

    if rpc_answers(rpc_url):
        print(f"devstack: a chain already answers at {rpc_url}; using it")
    else:
        port = rpc_url.rsplit(":", 1)[-1].strip("/")
        # --block-time: blocks keep coming, so confirmations accumulate as on a real network.
        stack.start([str(ANVIL), "--port", port, "--block-time", "2", "--silent"])
        deadline = time.monotonic() + 15
        while not rpc_answers(rpc_url):
            if time.monotonic() > deadline:
                raise RuntimeError(f"anvil did not answer at {rpc_url}")
            time.sleep(0.1)

    manage("migrate", "--noinput", "-v0")
    accounts = dev_accounts_sandbox(run_dir)
    host_key = this_machines_host_key()
    for name in DEV_NODES:
        # Development nodes run the preflight on this machine's CPU (two processes) and create the
        # customers' accounts in a sandboxed user database under the run folder, never on this machine.
        node = ["add_node", name, "--driver", "local", "--python", PY, "--device", "cpu"]
        manage(*node, "--accounts-root", str(accounts), "--host-key", host_key)
    manage("devnet", "setup", "--rpc-url", rpc_url)  # test USDC/USDT on the local chain


def serve(port: int, run_dir: Path, stack: Stack) -> int:
    celery = [PY, "-m", "celery", "-A", "config"]
    stack.start([*celery, "worker", "--loglevel", "INFO", "--concurrency", "2"])
    stack.start([*celery, "beat", "--loglevel", "INFO", "--schedule", str(run_dir / "celerybeat-schedule")])
    stack.start([PY, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"])
    print(f"devstack: the shop is at http://127.0.0.1:{port} (Ctrl-C stops everything)", flush=True)
    while all(child.poll() is None for child in stack.children):
        time.sleep(0.5)
    print("devstack: a process stopped; stopping the others", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000, help="the web server's port on 127.0.0.1 (8000)")
    parser.add_argument("--run-dir", type=Path, default=Path(os.environ.get("RUN_DIR", ROOT / ".run")))
    options = parser.parse_args(argv)
    run_dir = options.run_dir.resolve()
    rpc_url = os.environ.get("CHAIN_RPC_URLS_LOCAL", "http://127.0.0.1:8545").split(",")[0]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    os.environ["RUN_DIR"] = str(run_dir)  # the settings of every process read the same folder
    os.environ.setdefault("SITE_URL", f"http://127.0.0.1:{options.port}")  # the links in emails

    become_subreaper()
    stack = Stack()
    # A SIGTERM (a supervisor, a test) stops the stack as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        prepare(run_dir, rpc_url, stack)
        return serve(options.port, run_dir, stack)
    except KeyboardInterrupt:
        return 0
    except (ClusterError, RuntimeError, subprocess.CalledProcessError) as error:
        print(f"devstack: {error}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not cut the stopping short
        stack.stop()
        print("devstack: stopped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
