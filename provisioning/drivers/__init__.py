"""Node drivers: the one door to a GPU node (run a command, put a file, get a file).

    with driver_for(node) as driver:
        driver.put_file(program, "access.py")          # relative paths land in driver.workdir
        result = driver.run([node.python, "access.py", "show", "--account", name], timeout=60)

`local` runs on this machine (development); `ssh` connects to the node with its pinned host key and the
operator key in NODE_SSH_KEY_FILE. Tests run the real thing: a real sshd on loopback (tests/sshd.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from provisioning.drivers.base import (
    CommandResult,
    CommandTimeout,
    Driver,
    DriverError,
    HostKeyMismatch,
    public_key_fingerprint,
)

if TYPE_CHECKING:
    from fleet.models import Node

__all__ = [
    "CommandResult",
    "CommandTimeout",
    "Driver",
    "DriverError",
    "HostKeyMismatch",
    "driver_for",
    "public_key_fingerprint",
]


def driver_for(node: Node, *, connect_timeout: float = 10, key_file: str | None = None) -> Driver:
    """A connected driver for the node (a context manager). `key_file` overrides NODE_SSH_KEY_FILE."""
    if node.driver == "local":
        from provisioning.drivers.local import LocalDriver

        return LocalDriver(name=node.name, host_key=node.host_key)
    if node.driver == "ssh":
        from provisioning.drivers.ssh import SSHDriver

        return SSHDriver(
            host=node.host,
            port=node.port,
            user=node.user,
            host_key=node.host_key,
            key_file=key_file,
            connect_timeout=connect_timeout,
            name=node.name,
        )
    raise DriverError(f"node {node.name}: unknown driver {node.driver!r}")
