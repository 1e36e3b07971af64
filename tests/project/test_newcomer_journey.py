"""The newcomer's journey on the `make run` stack itself: scripts/devstack.py from this checkout, on free ports, with
its embedded PostgreSQL, anvil, kombu's filesystem broker, a Celery worker and beat, and the development nodes.

As a customer (Chromium through the pages): order a lot, pay with `manage.py devnet pay` run as a second terminal
would (no DATABASE_URL: it finds the running stack through its run folder), press "I have paid" and see the order
paid within a minute of the transfer. As an operator: sign in, press "Prepare" on /ops/. As the customer again: the
access (the ssh command, the host key's fingerprint) and the signed manifest, checked against /manifest-key.pub.
Then Ctrl-C: every process of the stack stops and no port stays held.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from core.local_postgres import Cluster, running_port
from tests.browser.checks import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, chromium_missing
from tests.servers import ROOT, clean_environment, free_port, wait_while_running

START_SECONDS = 300  # a fresh cluster, the migrations, three nodes, the test tokens, then the worker and beat
PAID_WITHIN_SECONDS = 60  # the bound: paid within a minute of the transfer
ACTIVE_SECONDS = 600  # the development node's CPU preflight (two processes), on a loaded two-core machine
STOP_SECONDS = 60
OPERATOR_PASSWORD = "a-long-operator-password"
TREASURY = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"  # anvil's tenth development account: sweeps go there
# The settings a developer's shell or this suite may carry that `make run` must not inherit: it runs on its own
# embedded defaults.
NOT_INHERITED = ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL", "RUN_DIR", "SITE_URL", "TEST_DATABASE_NAME")


@dataclass
class DevStack:
    process: subprocess.Popen
    url: str
    web_port: int
    chain_port: int
    run_dir: Path
    env: dict[str, str]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-8000:]

    def manage(self, *args: str) -> str:
        """`python manage.py ...` as the newcomer types it in a second terminal, next to `make run`."""
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"manage.py {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def database_port(self) -> int | None:
        return running_port(self.run_dir / "postgres")


def session_processes(session: int) -> list[str]:
    """Every live process of the session (devstack leads its own), as `pid command`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z" and int(fields[3]) == session:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name} {command.strip()}")
    return found


def processes_naming(text: str) -> list[str]:
    """Live processes whose command line names `text` (the embedded server runs in a session of its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if text in command:
                    found.append(f"{entry.name} {command.strip()}")
    return found


def port_held(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def wait_until(condition, what: str, seconds: float, stack: DevStack):
    return wait_while_running(stack.process, condition, what, seconds, stack.output, "make run stack", interval=0.5)


@pytest.fixture
def devstack(tmp_path):
    chromium_missing()
    web_port, chain_port = free_port(), free_port()
    env = clean_environment(
        CHAIN_RPC_URLS_LOCAL=f"http://127.0.0.1:{chain_port}", TREASURY_ADDRESS=TREASURY, PYTHONUNBUFFERED="1"
    )
    for name in NOT_INHERITED:
        env.pop(name, None)
    run_dir = tmp_path / "run"
    env["RUN_DIR"] = str(run_dir)  # what `make run` keeps (.run/ in a checkout), here the test's own
    log = tmp_path / "devstack.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "scripts/devstack.py", "--port", str(web_port), "--run-dir", str(run_dir)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a terminal of its own: what is left of it afterwards is found by session
        )
    stack = DevStack(process, f"http://127.0.0.1:{web_port}", web_port, chain_port, run_dir, env, log)
    try:
        yield stack
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=STOP_SECONDS)
        for line in session_processes(process.pid):  # a failed test leaves nothing behind either
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
        with contextlib.suppress(Exception):
            Cluster(run_dir / "postgres").stop()


def order_a_lot(page, public_key: str) -> str:
    """The order wizard, as the customer goes through it; returns the order's reference."""
    page.goto("/")
    page.locator("main a[href$='/order/']").first.click()
    page.wait_for_url("**/order/")
    page.locator("#id_lots").fill("1")
    page.locator("input[name=preparation][value='pytorch-blackwell']").check()
    page.locator("input[name=duration_days][value='3']").check()
    page.locator("button[name=continue]").click()
    page.wait_for_url("**/order/contact/")
    page.locator("#id_first_name").fill("Ada")
    page.locator("#id_last_name").fill("Lovelace")
    page.locator("#id_email").fill("ada@example.org")
    page.locator("#id_ssh_public_key").fill(public_key)
    page.locator("#id_terms").check()
    page.locator("form.form button[type=submit]").click()
    page.wait_for_url("**/order/payment/")
    page.locator("input[name=payment_option][value='local:USDC']").check()
    page.locator("form.form button[type=submit]").click()
    page.wait_for_url("**/order/review/")
    page.locator("form.form--place button[type=submit]").click()
    page.wait_for_url(re.compile(r"/o/B2-[A-Z0-9-]+/[^/]+/$"))
    return re.search(r"/o/(B2-[A-Z0-9-]+)/", page.url).group(1)


def shown(page, selector: str) -> bool:
    """Whether the order page shows `selector`, reloading it as a customer would if its script did not."""
    if page.locator(selector).count():
        return True
    page.reload()
    return bool(page.locator(selector).count())


def operator_prepares(page, reference: str) -> None:
    page.goto("/admin/login/?next=/ops/")
    page.locator("#id_username").fill("olga")
    page.locator("#id_password").fill(OPERATOR_PASSWORD)
    page.locator("#login-form [type=submit]").click()
    page.wait_for_url("**/ops/")
    row = page.locator("tr", has=page.locator("code", has_text=reference))
    with page.expect_navigation():
        row.get_by_role("button", name="Prepare").click()


def expected_fingerprint() -> str:
    """What the development nodes show: this machine's SSH host key (devstack pins it), as ssh-keygen prints it."""
    for kind in ("ed25519", "ecdsa", "rsa"):
        path = Path(f"/etc/ssh/ssh_host_{kind}_key.pub")
        if path.is_file():
            printed = subprocess.run(["ssh-keygen", "-lf", str(path)], capture_output=True, text=True, check=True)
            return printed.stdout.split()[1]
    return "local"  # no SSH server on this machine: nothing to pin


def treasury_plan_holds_the_payment(stack: DevStack, deposit_address: str) -> None:
    """A treasurer's plan for the local chain sweeps the paid order's deposit address, its USDC read on-chain (the
    plan's UNION ALL read answered 500 on the old SQLite default)."""
    stack.manage("add_staff", "tess", "--role", "treasurer", "--password", OPERATOR_PASSWORD)
    token = stack.manage("drf_create_token", "tess").split()[2]
    request = urllib.request.Request(f"{stack.url}/api/v1/treasury/plan/?network=local")
    request.add_header("Authorization", f"Token {token}")
    with urllib.request.urlopen(request, timeout=30) as response:
        plan = json.load(response)
    swept = [item for item in plan["items"] if item["asset"] == "USDC" and int(item["sweep_base_units"]) > 0]
    assert [item["address"] for item in swept] == [deposit_address], plan


def manifest_verifies(page, reference: str) -> dict:
    """Download the manifest from the page's link and check its signature with the published key, as the
    customer does offline (Ed25519 over the JCS canonical JSON of `body`)."""
    link = page.locator("a[download]", has_text="Download the signed manifest").get_attribute("href")
    document = page.request.get(link).json()
    published = page.request.get("/manifest-key.pub").text().strip()
    assert document["public_key"] == published
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(published))
    key.verify(base64.b64decode(document["signature"]), rfc8785.dumps(document["body"]))  # raises if it does not hold
    assert document["body"]["order_reference"] == reference, json.dumps(document["body"])[:2000]
    return document


def test_make_run_carries_a_newcomer_from_order_to_access_and_ctrl_c_leaves_nothing(devstack, tmp_path):
    from playwright.sync_api import sync_playwright

    timings: dict[str, float] = {}
    began = time.monotonic()
    wait_until(lambda: answers(devstack.url + "/healthz"), "the shop did not answer", START_SECONDS, devstack)
    timings["started"] = time.monotonic() - began
    key_file = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key_file)], check=True)
    public_key = key_file.with_suffix(".pub").read_text().strip()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        customer = browser.new_context(base_url=devstack.url, viewport=VIEWPORT).new_page()
        customer.set_default_timeout(30_000)

        reference = order_a_lot(customer, public_key)
        assert customer.locator("#order-status.status--awaiting_payment").count()
        deposit_address = customer.locator("#pay-address").inner_text().strip()

        paid_at = time.monotonic()
        assert f"paid {reference}" in devstack.manage("devnet", "pay", reference)
        with customer.expect_navigation():
            customer.locator(".paid-button").first.click()
        wait_until(lambda: shown(customer, "#order-status.status--paid"), "not paid", PAID_WITHIN_SECONDS, devstack)
        timings["paid after the transfer"] = time.monotonic() - paid_at

        treasury_plan_holds_the_payment(devstack, deposit_address)

        devstack.manage("add_staff", "olga", "--role", "operator", "--password", OPERATOR_PASSWORD)
        operator = browser.new_context(base_url=devstack.url, viewport=VIEWPORT).new_page()
        prepared_at = time.monotonic()
        operator_prepares(operator, reference)
        wait_until(lambda: shown(customer, "#order-status.status--active"), "not active", ACTIVE_SECONDS, devstack)
        timings["active after Prepare"] = time.monotonic() - prepared_at

        access = customer.locator("section.access")
        account = "o-" + reference.replace("-", "").lower()
        assert customer.locator("#ssh-1").input_value() == f"ssh {account}@127.0.0.1"
        assert access.locator("code.address").first.inner_text() == expected_fingerprint()
        manifest_verifies(customer, reference)
        browser.close()

    database_port = devstack.database_port()
    assert database_port, "the stack did not run its own embedded PostgreSQL"
    stopping = time.monotonic()
    devstack.process.send_signal(signal.SIGINT)  # Ctrl-C
    assert devstack.process.wait(timeout=STOP_SECONDS) == 0, devstack.output()
    timings["stopped after Ctrl-C"] = time.monotonic() - stopping

    assert session_processes(devstack.process.pid) == []
    assert processes_naming(str(devstack.run_dir)) == []  # the embedded server runs in a session of its own
    for port in (devstack.web_port, devstack.chain_port, database_port):
        assert not port_held(port), f"port {port} is still held after Ctrl-C"
    timings["whole journey"] = time.monotonic() - began
    print("newcomer journey:", ", ".join(f"{what} {seconds:.0f} s" for what, seconds in timings.items()))


ORPHAN_LEFT = """
import os, subprocess, sys, time
sys.path.insert(0, os.getcwd())
from scripts import devstack
devstack.become_subreaper()
# A child that starts a process in a session of its own and dies (a worker killed mid-preflight)
started = subprocess.run(["sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!"], capture_output=True)
orphan = int(started.stdout)
time.sleep(0.2)
print("adopted", open(f"/proc/{orphan}/stat").read().split(")")[1].split()[1] == str(os.getpid()))
devstack.orphans_stop()
print("left", os.path.exists(f"/proc/{orphan}"))
"""


def test_ctrl_c_also_stops_what_the_stacks_processes_started_in_sessions_of_their_own():
    # Given the stack's process, and a process one of its children started with setsid before dying (as the
    # development nodes' preflight runs, when Ctrl-C comes in the middle of a preparation)
    done = subprocess.run([sys.executable, "-c", ORPHAN_LEFT], cwd=ROOT, capture_output=True, text=True, timeout=60)

    # Then the orphan was handed to the stack's process, which stopped it on the way out
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["adopted", "True", "left", "False"]
