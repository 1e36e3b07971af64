"""A real OpenSSH server on a loopback port that sees a sandboxed user database (tests only).

sshd runs in a private mount namespace (unshare --mount --propagation private) where:
- /etc is the sandbox's etc/: real files for the user database (passwd, shadow, group, gshadow, subuid,
  subgid: copies of the machine's, every password replaced by "*"), and for everything else links to
  the machine's /etc, which the namespace sees read-only at /run/host-etc;
- /home is the sandbox's home/, /run a fresh tmpfs (sshd's privilege separation directory and the
  operator's authorized keys), and the login records under /var/log are sandbox files.
Accounts made with `useradd --prefix SANDBOX` (what `access.py --users-prefix SANDBOX` does) therefore
exist for this sshd and its sessions only; the machine's users, /etc and own sshd are never touched.
- /run/scratch (1777, on that tmpfs) is the node's scratch disk: outside /tmp, /var/tmp and /dev/shm and
  seen only inside the namespace, so only a sweep of the configured scratch paths reaches what a tenant
  leaves there (a folder under the machine's /tmp would be swept with /tmp anyway);
- /usr/local/sbin (the first folder of the access tool's PATH) is the sandbox's gpu-tools/, empty until a
  test installs the FAKE nvidia-smi (`install_fake_nvidia_smi()`: this machine has no GPU); its one
  answer, the compute apps, lists the processes holding the fake card /run/fake-gpu/nvidia0 open, as the
  real one lists those holding /dev/nvidia*.
Root logs in with the operator key (the sandbox's operator_keys/root), customers with the keys access.py
writes into their sandboxed homes; StrictModes stays on, as on a real node. `add_sudo_operator()` adds a
non-root operator login (OPERATOR_USER, the same key) whose only root command is the access tool installed
by `install_access_tool()` at /run/b200-tools (the sandbox's tools/), through the sandbox's own sudoers.

Needs root (mount namespaces), util-linux and Debian's openssh-server; without them the fixture calls
server_missing(), which fails under CI=true.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.servers import free_port, server_missing

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd")
USER_DATABASE = ("passwd", "shadow", "group", "gshadow", "subuid", "subgid")
# Names under /etc that shadow's tools write (these files, their "-" backups, "+" copies and locks):
# they are real files in the sandbox, never links to the machine's /etc.
WRITTEN_BY_SHADOW = (*USER_DATABASE, ".pwd.lock")
# Inside the namespace the machine's /etc stays readable here, for the links of the sandbox's etc/.
HOST_ETC = "/run/host-etc"
LOGIN_RECORDS = ("/var/log/lastlog", "/var/log/faillog", "/var/log/wtmp", "/var/log/btmp")
# The non-root operator login of the sudo rule in docs/production.md, and where the namespace sees the installed tools.
OPERATOR_USER = "shop-ops"
TOOLS = "/run/b200-tools"
SCRATCH = "/run/scratch"
FAKE_CARD = "/run/fake-gpu/nvidia0"
GPU_TOOLS = "/usr/local/sbin"
FAKE_NVIDIA_SMI = f"""#!/bin/sh
# FAKE nvidia-smi, written by tests/sshd.py: the real tool cannot run on this machine (no GPU). The processes
# on the cards are those holding the fake card {FAKE_CARD} open: this sandbox's card, by device and inode,
# since another sandbox's (another pytest-xdist worker's) card has the same path in its own mount namespace.
case "$*" in
  *--query-compute-apps=pid,used_memory*--format=csv,noheader*) ;;
  *) echo "fake nvidia-smi: no canned output for: $*" >&2; exit 99 ;;
esac
card=$(stat -c %d:%i {FAKE_CARD})
for fd in /proc/[0-9]*/fd/*; do
  [ "$(readlink "$fd" 2>/dev/null)" = {FAKE_CARD} ] || continue
  [ "$(stat -L -c %d:%i "$fd" 2>/dev/null)" = "$card" ] || continue
  pid=${{fd#/proc/}}
  echo "${{pid%%/*}}, 1024 MiB"
done | sort -u
"""


def uid_floor() -> int:
    """Where this test process's sandboxed accounts start numbering: apart for each pytest-xdist worker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    # SANDBOX_UID_BASE keeps two test runs on one machine (two checkouts at once) apart too.
    return int(os.environ.get("SANDBOX_UID_BASE", "20000")) + 2_000 * int(worker or 0)


class SandboxSshd:
    host = "127.0.0.1"

    def __init__(self, root: Path, *, stock_keys: bool = False) -> None:
        self.root = root
        self.stock_keys = stock_keys
        self.sandbox = root / "sandbox"
        # Where sshd reads its configuration in the namespace (/etc/ssh/sshd_config), so that `sshd -T` run there
        # (the access tool's sshd-check) sees this server's settings.
        self.config = self.sandbox / "etc" / "ssh" / "sshd_config"
        self.log_path = root / "sshd.log"
        self.host_key_file = root / "host_ed25519"
        self.operator_key_file = root / "operator_ed25519"
        self.port = 0
        self.process: subprocess.Popen | None = None

    # Start and stop ---------------------------------------------------------------------------

    @classmethod
    def start(cls, root: Path, *, stock_keys: bool = False) -> SandboxSshd:
        server = cls(root, stock_keys=stock_keys)
        server._check_prerequisites()
        server._build_sandbox()
        server._write_config()
        server._check_config()
        server._launch()
        return server

    def _check_prerequisites(self) -> None:
        self.sshd = next((path for path in SSHD_CANDIDATES if os.access(path, os.X_OK)), "")
        if not self.sshd:
            server_missing("sshd (Debian's openssh-server; .ci/run installs it)")
        for tool in ("ssh-keygen", "unshare", "mount"):
            if shutil.which(tool) is None:
                server_missing(f"sshd sandbox: {tool} is not installed")
        if os.geteuid() != 0:
            server_missing("sshd sandbox (needs root for a private mount namespace)")
        for directory in ("/etc", "/home", "/run"):
            if not os.path.isdir(directory) or os.path.islink(directory):
                server_missing(f"sshd sandbox: {directory} is not a plain directory here")

    def _build_sandbox(self) -> None:
        etc = self.sandbox / "etc"
        for directory in (etc, self.sandbox / "home", self.sandbox / "var-log"):
            directory.mkdir(parents=True, mode=0o755)
        # A tenant reaches what the access tool installs under the sandbox (b200's command and the order's facts)
        # as on a node, where those folders are world-traversable: the temp folders above it may be traversed,
        # never listed.
        for folder in (self.sandbox, self.root, *self.root.parents):
            if str(folder).startswith(tempfile.gettempdir() + "/") and folder.stat().st_mode & 0o077 == 0:
                folder.chmod(0o711)
        self._copy_user_database(etc)
        for name in sorted(os.listdir("/etc")):
            if name.startswith(WRITTEN_BY_SHADOW) or name.endswith(".lock"):
                continue
            source = Path("/etc") / name
            if name == "ssh":
                self._build_ssh_folder(etc / name)
                continue
            if name == "profile.d":  # the sandbox's own: the access tool installs b200's login welcome there
                (etc / name).mkdir(mode=0o755)
                continue
            target = f"{HOST_ETC}/{name}"
            if source.is_symlink():
                link = os.readlink(source)
                target = link if link.startswith("/") else os.path.normpath(os.path.join("/etc", link))
            os.symlink(target, etc / name)
        for record in LOGIN_RECORDS:
            (self.sandbox / "var-log" / Path(record).name).touch(mode=0o644)
        keys = self.sandbox / "operator_keys"
        keys.mkdir(mode=0o755)  # sshd reads a login's keys as that login (StrictModes): a non-root one too
        (self.sandbox / "tools").mkdir(mode=0o755)
        (self.sandbox / "gpu-tools").mkdir(mode=0o755)
        _keygen(self.host_key_file, "sandbox-sshd-host")
        _keygen(self.operator_key_file, "operator@sandbox")
        self.host_key = self.host_key_file.with_suffix(".pub").read_text().strip()
        self.operator_public_key = self.operator_key_file.with_suffix(".pub").read_text().strip()
        authorized = keys / "root"
        authorized.write_text(self.operator_public_key + "\n")
        authorized.chmod(0o600)

    def _build_ssh_folder(self, folder: Path) -> None:
        """etc/ssh: the machine's files (links), but this server's sshd_config, no sshd_config.d, and the held keys
        (authorized_keys/) the sandbox's own."""
        folder.mkdir(mode=0o755)
        for name in sorted(os.listdir("/etc/ssh")):
            if name not in ("sshd_config", "sshd_config.d", "authorized_keys"):
                os.symlink(f"{HOST_ETC}/ssh/{name}", folder / name)

    def _copy_user_database(self, etc: Path) -> None:
        for name in USER_DATABASE:
            source = Path("/etc") / name
            if not source.exists():
                continue
            lines = source.read_text().splitlines()
            if name in ("shadow", "gshadow"):  # no password hash leaves the machine's /etc
                lines = [re.sub(r"^([^:]*):[^:]*:", r"\1:*:", line) for line in lines]
            (etc / name).write_text("".join(f"{line}\n" for line in lines))
            (etc / name).chmod(0o640 if name in ("shadow", "gshadow") else 0o644)
        # Each pytest-xdist worker's tenants get uids of their own: the end of rental sweeps the machine's /tmp
        # and processes by uid, which two sandboxes numbering accounts alike would share.
        floor = uid_floor()
        for name, line in (
            ("passwd", f"uid-floor:x:{floor}:{floor}::/nonexistent:/usr/sbin/nologin"),
            ("shadow", "uid-floor:*:19000:0:99999:7:::"),
            ("group", f"uid-floor:x:{floor}:"),
            ("gshadow", "uid-floor:*::"),
        ):
            if (etc / name).exists():
                with open(etc / name, "a") as handle:
                    handle.write(f"{line}\n")
        passwd = (etc / "passwd").read_text()
        if not re.search(r"^sshd:", passwd, re.MULTILINE):  # sshd's privilege separation user
            used = {int(line.split(":")[2]) for line in passwd.splitlines() if line.count(":") >= 6}
            uid = next(uid for uid in range(999, 100, -1) if uid not in used)
            with open(etc / "passwd", "a") as handle:
                handle.write(f"sshd:x:{uid}:65534::/run/sshd:/usr/sbin/nologin\n")
            with open(etc / "shadow", "a") as handle:
                handle.write("sshd:*:19000:0:99999:7:::\n")

    def _write_config(self) -> None:
        self.port = free_port()
        lines = [
            "ListenAddress 127.0.0.1",
            f"Port {self.port}",
            f"HostKey {self.host_key_file}",
            f"PidFile {self.root / 'sshd.pid'}",
            "UsePAM no",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "PermitRootLogin prohibit-password",
            # Customers: the file per account that only root writes (docs/production.md), or, for the tests of a
            # node set up wrong, OpenSSH's stock setting (keys in the tenant's home). sshd checks their modes.
            "AuthorizedKeysFile "
            + (".ssh/authorized_keys .ssh/authorized_keys2" if self.stock_keys else "/etc/ssh/authorized_keys/%u"),
            "StrictModes yes",
            "Subsystem sftp internal-sftp",
            "UseDNS no",
            "PrintMotd no",
            "PrintLastLog no",
            "LogLevel VERBOSE",
            "MaxStartups 100",
        ]
        if _openssh_version(self.sshd) >= (9, 8):
            lines.append("PerSourcePenalties no")  # the tests fail logins on purpose, from 127.0.0.1
        # The operator key for root lives in the sandbox (seen at /run/operator-keys inside the namespace),
        # never in the machine's /root/.ssh.
        lines += [f"Match User root,{OPERATOR_USER}", "    AuthorizedKeysFile /run/operator-keys/%u"]
        self.config.write_text("\n".join(lines) + "\n")

    def _namespace_script(self, command: str) -> str:
        sandbox = shlex.quote(str(self.sandbox))
        steps = [
            "set -e",
            "mount -t tmpfs -o mode=0755,size=8m sshd-sandbox /run",
            f"mkdir -m 0755 /run/sshd /run/operator-keys {HOST_ETC}",
            f"mount --bind {sandbox}/operator_keys /run/operator-keys",
            f"mkdir -m 0755 {TOOLS}",
            f"mount --bind {sandbox}/tools {TOOLS}",
            f"mount --bind /etc {HOST_ETC}",
            f"mount -o remount,bind,ro {HOST_ETC}",  # nothing in the namespace writes the machine's /etc
            f"mount --bind {sandbox}/etc /etc",
            f"mount --bind {sandbox}/home /home",
            f"mkdir -m 1777 {SCRATCH}",
            f"mkdir -m 0755 {os.path.dirname(FAKE_CARD)}",
            f"touch {FAKE_CARD}",
            f"chmod 0644 {FAKE_CARD}",
        ]
        if os.path.isdir(GPU_TOOLS) and not os.path.islink(GPU_TOOLS):
            steps.append(f"mount --bind {sandbox}/gpu-tools {GPU_TOOLS}")
        for record in LOGIN_RECORDS:
            if os.path.isfile(record):
                steps.append(f"mount --bind {sandbox}/var-log/{Path(record).name} {record}")
        steps.append(f"exec {command}")
        return "\n".join(steps)

    def _unshare(self, command: str) -> list[str]:
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", self._namespace_script(command)]

    def _sshd_command(self, mode: str) -> str:
        return f"{self.sshd} {mode} -f {shlex.quote(str(self.config))}"

    def _check_config(self) -> None:
        """First the namespace alone, then `sshd -t` inside it: each failure says what it is."""
        probe = subprocess.run(self._unshare("true"), capture_output=True, text=True, timeout=30)
        if probe.returncode != 0:
            output = (probe.stderr + probe.stdout).strip()
            server_missing(f"sshd sandbox: a private mount namespace is not permitted here ({output})")
        probe = subprocess.run(self._unshare(self._sshd_command("-t")), capture_output=True, text=True, timeout=30)
        if probe.returncode != 0:
            output = (probe.stderr + probe.stdout).strip()
            raise RuntimeError(f"sshd -t rejected the sandbox configuration:\n{output}")

    def _launch(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self._unshare(self._sshd_command("-D -e")), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"sshd exited with {self.process.returncode}:\n{self.log()}")
            with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), timeout=1) as sock:
                if sock.recv(64).startswith(b"SSH-2.0-"):
                    return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"sshd did not answer on {self.host}:{self.port} within 15 s:\n{self.log()}")

    def stop(self) -> None:
        """Kill sshd and every process of its namespace (sessions, what customers left running)."""
        if self.halt():
            # Nothing of the machine is mounted here any more (the namespace died with its processes):
            # drop the sandbox's copies of the user database, keep the log.
            shutil.rmtree(self.sandbox, ignore_errors=True)

    def restart(self) -> None:
        """Start sshd again after halt(): same port, host key, operator key and sandboxed accounts."""
        if self.process is None:
            self._launch()

    def namespace_pids(self) -> list[int]:
        """Processes of sshd's namespace other than sshd itself: sessions and what they started."""
        namespace = _mount_namespace(self.process.pid) if self.process else ""
        if not namespace or namespace == _mount_namespace(os.getpid()):
            return []
        return [pid for pid in _pids() if pid != self.process.pid and _mount_namespace(pid) == namespace]

    def halt(self) -> bool:
        """Kill sshd and every process of its namespace, as a node that goes down; the sandbox stays."""
        process, self.process = self.process, None
        if process is None:
            return False
        namespace = _mount_namespace(process.pid)
        if namespace and namespace != _mount_namespace(os.getpid()):
            for _ in range(20):
                members = [pid for pid in _pids() if _mount_namespace(pid) == namespace]
                if not members:
                    break
                for pid in members:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        return True

    # A non-root operator -----------------------------------------------------------------------

    def add_sudo_operator(self, sudoers_line: str) -> str:
        """OPERATOR_USER logs in with the operator key; `sudoers_line` is the sandbox's whole sudoers."""
        if self.entry("passwd", OPERATOR_USER) is None:
            lines = self.etc("passwd").read_text().splitlines()
            used = {int(line.split(":")[2]) for line in lines if line.count(":") >= 6}
            uid = next(uid for uid in range(998, 100, -1) if uid not in used)
            home = self.sandbox / "home" / OPERATOR_USER
            home.mkdir(mode=0o755)
            os.chown(home, uid, uid)
            for name, line in (
                ("passwd", f"{OPERATOR_USER}:x:{uid}:{uid}::/home/{OPERATOR_USER}:/bin/sh"),
                ("shadow", f"{OPERATOR_USER}:*:19000:0:99999:7:::"),
                ("group", f"{OPERATOR_USER}:x:{uid}:"),
                ("gshadow", f"{OPERATOR_USER}:!::"),
            ):
                with open(self.etc(name), "a") as handle:
                    handle.write(line + "\n")
            keys = self.sandbox / "operator_keys" / OPERATOR_USER
            keys.write_text(self.operator_public_key + "\n")
            keys.chmod(0o644)
        sudoers = self.etc("sudoers")
        if sudoers.is_symlink():
            sudoers.unlink()  # the machine's own rules never apply in the sandbox
        sudoers.write_text(
            "Defaults env_reset\n"
            'Defaults secure_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"\n'
            f"{sudoers_line}\n"
        )
        sudoers.chmod(0o440)
        return OPERATOR_USER

    def install_access_tool(self, program: bytes) -> str:
        """What an administrator does once per node (`install -m 0755 access.py ...`); returns its path there."""
        path = self.sandbox / "tools" / "b200-access"
        path.write_bytes(program)
        path.chmod(0o755)
        return f"{TOOLS}/b200-access"

    def install_fake_nvidia_smi(self) -> None:
        """The node gets GPUs: the FAKE nvidia-smi is on the access tool's PATH until removed again."""
        if not os.path.isdir(GPU_TOOLS) or os.path.islink(GPU_TOOLS):
            server_missing(f"the fake nvidia-smi needs a plain {GPU_TOOLS} folder to bind over")
        path = self.sandbox / "gpu-tools" / "nvidia-smi"
        path.write_text(FAKE_NVIDIA_SMI)
        path.chmod(0o755)

    def remove_fake_nvidia_smi(self) -> None:
        (self.sandbox / "gpu-tools" / "nvidia-smi").unlink(missing_ok=True)

    # What tests look at -----------------------------------------------------------------------

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def accepted_logins(self) -> int:
        return self.log().count("Accepted publickey")

    def etc(self, name: str) -> Path:
        return self.sandbox / "etc" / name

    def home(self, account: str) -> Path:
        return self.sandbox / "home" / account

    def held_key(self, account: str) -> Path:
        """The account's key file that this sshd reads (AuthorizedKeysFile /etc/ssh/authorized_keys/%u)."""
        return self.etc("ssh") / "authorized_keys" / account

    def entry(self, name: str, account: str) -> list[str] | None:
        """The account's line in the sandbox's etc/NAME (passwd, shadow, group), split on ':'."""
        for line in self.etc(name).read_text().splitlines():
            fields = line.split(":")
            if fields[0] == account:
                return fields
        return None

    def node(self, **fields):
        """An unsaved Node for this server (no database needed): ssh driver, root, the pinned host key."""
        from provisioning.models import Node

        return Node(
            **{
                "name": "sandbox-node",
                "driver": "ssh",
                "host": self.host,
                "port": self.port,
                "user": "root",
                "host_key": self.host_key,
                **fields,
            }
        )


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )


def _openssh_version(sshd: str) -> tuple[int, int]:
    for command in ([sshd, "-V"], ["ssh", "-V"]):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            result = subprocess.run(command, capture_output=True, text=True, timeout=10)
            match = re.search(r"OpenSSH_(\d+)\.(\d+)", result.stdout + result.stderr)
            if match:
                return int(match.group(1)), int(match.group(2))
    return (0, 0)


def _mount_namespace(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return ""


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


@pytest.fixture(scope="session")
def sandbox_sshd(tmp_path_factory):
    """One sandboxed sshd for the session (import this fixture into a conftest to use it)."""
    server = SandboxSshd.start(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def stock_sshd(tmp_path_factory):
    """A sandboxed sshd with OpenSSH's stock AuthorizedKeysFile (keys in the tenant's home): a node set up wrong."""
    server = SandboxSshd.start(tmp_path_factory.mktemp("stock-sshd"), stock_keys=True)
    yield server
    server.stop()
