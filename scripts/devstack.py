"""`make run`: migrate, register development nodes, and run anvil, a Celery worker and beat, and the
web server together on embedded defaults (SQLite, kombu's filesystem transport). Ctrl-C stops all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
ANVIL = ROOT / "node_modules" / ".bin" / "anvil"
RPC_URL = os.environ.get("CHAIN_RPC_URLS_LOCAL", "http://127.0.0.1:8545").split(",")[0]
DEV_NODES = ["dev-node-1", "dev-node-2", "dev-node-3"]


def rpc_answers(url: str) -> bool:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=1) as response:
            return "result" in json.load(response)
    except OSError:
        return False


def dev_accounts_sandbox() -> Path:
    """A copy of this machine's user database (password fields blanked) for useradd --prefix."""
    root = ROOT / ".run" / "accounts"
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


def manage(*args: str) -> None:
    subprocess.run([PY, "manage.py", *args], cwd=ROOT, check=True)


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    (ROOT / ".run" / "broker").mkdir(parents=True, exist_ok=True)
    (ROOT / ".run" / "broker-processed").mkdir(parents=True, exist_ok=True)
    children: list[subprocess.Popen] = []

    if rpc_answers(RPC_URL):
        print(f"devstack: a chain already answers at {RPC_URL}; using it")
    else:
        port = RPC_URL.rsplit(":", 1)[-1].strip("/")
        # --block-time: blocks keep coming, so confirmations accumulate as on a real network.
        children.append(subprocess.Popen([str(ANVIL), "--port", port, "--block-time", "2", "--silent"], cwd=ROOT))
        for _ in range(100):
            if rpc_answers(RPC_URL):
                break
            time.sleep(0.1)
        else:
            print(f"devstack: anvil did not answer at {RPC_URL}", file=sys.stderr)
            return stop(children, 1)

    manage("migrate", "--noinput", "-v0")
    accounts = dev_accounts_sandbox()
    for name in DEV_NODES:
        # Development nodes run the preflight on this machine's CPU (two processes) and create the
        # customers' accounts in a sandboxed user database under .run/, never on this machine.
        manage(
            "add_node", name, "--driver", "local", "--python", PY, "--device", "cpu", "--accounts-root", str(accounts)
        )
    manage("devnet", "setup", "--rpc-url", RPC_URL)  # test USDC/USDT on the local chain

    celery = [PY, "-m", "celery", "-A", "config"]
    children.append(subprocess.Popen([*celery, "worker", "--loglevel", "INFO", "--concurrency", "2"], cwd=ROOT))
    children.append(
        subprocess.Popen(
            [*celery, "beat", "--loglevel", "INFO", "--schedule", str(ROOT / ".run" / "celerybeat-schedule")], cwd=ROOT
        )
    )
    web = subprocess.Popen([PY, "manage.py", "runserver", "127.0.0.1:8000", "--noreload"], cwd=ROOT)
    children.append(web)
    print("devstack: the shop is at http://127.0.0.1:8000 (Ctrl-C stops everything)")

    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        print("devstack: a process stopped; stopping the others", file=sys.stderr)
        return stop(children, 1)
    except KeyboardInterrupt:
        return stop(children, 0)


def stop(children: list[subprocess.Popen], code: int) -> int:
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGINT if child.args[0] == PY else signal.SIGTERM)
    deadline = time.monotonic() + 10
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
    return code


if __name__ == "__main__":
    sys.exit(main())
