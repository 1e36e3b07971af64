"""SSH that works on the first try (issue 41): for each node of a rental, the `known_hosts` line of its pinned host
key and an `~/.ssh/config` block (an alias, host, port, user, `HostKeyAlias`, `StrictHostKeyChecking yes`), so
that the customer's first `ssh ALIAS` asks nothing and trusts nothing it was not given here.

The line is the node's pinned key (fleet's `Node.host_key`, which every connection of the shop proves), given only
while its fingerprint is the one recorded at the hand-over: a node re-pinned since then gets no line rather than
one the customer's ssh would refuse, or one that would vouch for another machine.
"""

from __future__ import annotations

import base64
import re

from provisioning.drivers.base import fingerprint, parse_public_key
from provisioning.models import AccessGrant

# What ssh_config and known_hosts take as a plain word: a host name or address, an account, an alias. Anything
# else (a space, a newline, a pattern character, a comma) would end the word or change what the line says.
PLAIN = re.compile(r"^[A-Za-z0-9._:-]{1,253}$")


def ssh_alias(grant: AccessGrant) -> str:
    """`b2-xxxx-yyyy-NODE`: one alias per order and node, lower case, only what a Host line takes."""
    words = f"{grant.order.reference}-{grant.node.name}".lower()
    return re.sub(r"[^a-z0-9.-]+", "-", words).strip("-.")[:100]


def known_hosts_line(grant: AccessGrant) -> str | None:
    """`ALIAS TYPE BASE64` for the node's pinned key, or None when the node's key is not the hand-over's."""
    try:
        key_type, blob = parse_public_key(grant.node.host_key)
    except ValueError:
        return None  # a development node (the local driver) has no key for a customer's ssh to pin
    if fingerprint(blob) != grant.host_key_fingerprint:
        return None
    return f"{ssh_alias(grant)} {key_type} {base64.b64encode(blob).decode()}"


def ssh_config_block(grant: AccessGrant) -> str | None:
    """The `Host ALIAS` block for `~/.ssh/config`, or None when a value would not be a plain word."""
    if not all(PLAIN.match(str(value)) for value in (grant.host, grant.port, grant.account)):
        return None
    alias = ssh_alias(grant)
    return (
        f"Host {alias}\n"
        f"    HostName {grant.host}\n"
        f"    Port {grant.port}\n"
        f"    User {grant.account}\n"
        f"    HostKeyAlias {alias}\n"
        "    StrictHostKeyChecking yes\n"
    )
