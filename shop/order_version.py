"""The version of everything an order's page and API body show, in one cheap query: conditional polling.

A customer's page polls the order while it waits; almost every answer is "nothing changed". This reads the
rows that can change what the customer is shown (the order's status and dates, each payment's status,
confirmations and amounts, the counted transfers, the "I have paid" notices, refunds, extensions, preparation
runs, handed-over access, the manifest) in one statement with no ORM compilation, checks the token, and
hashes the rows into an ETag. An unchanged ETag answers 304 without reading or serialising the order; a
changed one reuses what this query already brought (the notices, the transactions, the runs, which related
sets are empty) so that the full read costs one more query.

The confirmations are stored on the payment by the scan pass, so the chain's head only moves the ETag when
it moves a number the customer sees.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TypedDict

from django.utils.dateparse import parse_datetime

from core.prepared import CompiledRead, Row, prepared_rows
from fleet.models import Node
from orders.models import Extension, Order, SshKeyChange
from orders.orders import order_token_opens
from payments.models import Credit, Notice, PaymentRequest, Refund
from provisioning.models import AccessGrant, Manifest, NodeHealth, PreparationRun

# Bump when the representation changes shape, so that no browser keeps a body of the previous release.
REPRESENTATION_REVISION = "4"  # 2: the credits (time given back); 3: nodes_health; 4: ssh_config
# One row per thing shown that can change: a kind letter, then up to 7 values, all as text (every part of a
# UNION has the same columns). Table names come from the models; the only parameters are bound.
VERSION_SQL = """
WITH o AS (SELECT id, access_nonce, status, updated_at, ends_at, active_since, personal_data_erased_at
           FROM {order} WHERE reference = %s),
     pay AS (SELECT id, extension_id, status, confirmations, received_base_units, expires_at, refunds_due,
                    settled_at, reviewed_at, refund_decided_at FROM {payment} WHERE order_id = (SELECT id FROM o))
SELECT 'o', CAST(id AS TEXT), access_nonce, status, CAST(updated_at AS TEXT), CAST(ends_at AS TEXT),
       CAST(active_since AS TEXT), CAST(personal_data_erased_at AS TEXT) FROM o
UNION ALL SELECT 'p', CAST(id AS TEXT), CAST(extension_id AS TEXT), status, CAST(confirmations AS TEXT),
       CAST(received_base_units AS TEXT), CAST(expires_at AS TEXT), CAST(refunds_due AS TEXT) FROM pay
UNION ALL SELECT 's', CAST(id AS TEXT), CAST(settled_at AS TEXT), CAST(reviewed_at AS TEXT),
       CAST(refund_decided_at AS TEXT), NULL, NULL, NULL FROM pay
UNION ALL SELECT DISTINCT 'c', CAST(payment_id AS TEXT), tx_hash, NULL, NULL, NULL, NULL, NULL FROM {credit}
       WHERE payment_id IN (SELECT id FROM pay) AND removed_at IS NULL AND after_settlement = %s
UNION ALL SELECT 'n', CAST(payment_id AS TEXT), CAST(COUNT(*) AS TEXT), NULL, NULL, NULL, NULL, NULL FROM {notice}
       WHERE payment_id IN (SELECT id FROM pay) GROUP BY payment_id
UNION ALL SELECT 'r', CAST(id AS TEXT), status, to_address, tx_hash, CAST(amount_base_units AS TEXT), NULL, NULL
       FROM {refund} WHERE payment_id IN (SELECT id FROM pay)
UNION ALL SELECT 'e', CAST(id AS TEXT), status, CAST(applied_at AS TEXT), CAST(ends_at_after AS TEXT), NULL, NULL,
       NULL FROM {extension} WHERE order_id = (SELECT id FROM o)
UNION ALL SELECT 'u', CAST(u.created_at AS TEXT), CAST(u.id AS TEXT), nd.name, u.status, u.step,
       CAST(u.progress AS TEXT), NULL FROM {run} u JOIN {node} nd ON nd.id = u.node_id
       WHERE u.order_id = (SELECT id FROM o)
UNION ALL SELECT 'g', CAST(id AS TEXT), host, CAST(port AS TEXT), account, host_key_fingerprint,
       CAST(ends_at AS TEXT), CAST(grace_until AS TEXT) FROM {grant}
       WHERE order_id = (SELECT id FROM o) AND revoked_at IS NULL AND withdrawing_since IS NULL
UNION ALL SELECT 'm', CAST(id AS TEXT), CAST(created_at AS TEXT), NULL, NULL, NULL, NULL, NULL FROM {manifest}
       WHERE order_id = (SELECT id FROM o)
UNION ALL SELECT 'h', CAST(node_id AS TEXT), CAST(MAX(checked_at) AS TEXT), NULL, NULL, NULL, NULL, NULL
       FROM {health} WHERE order_id = (SELECT id FROM o) GROUP BY node_id
UNION ALL SELECT 'k', CAST(id AS TEXT), CAST(applied_at AS TEXT), CAST(LENGTH(error) AS TEXT), NULL, NULL, NULL,
       NULL FROM {key_change} WHERE order_id = (SELECT id FROM o)
ORDER BY 1, 2, 3
"""
# What each kind stands for. `o`: the order (its nonce opens the token check and is left out of the ETag;
# updated_at moves on every full save); `p`, `s`: each payment request; `c`: the transactions shown (on the
# chain and paying the order: dust after settlement is not shown); `n`: the "I have paid" notices; `r`:
# refunds; `e`: extensions; `u`: preparation runs (oldest first); `g`: the access the customer holds (a
# revoked or withdrawn grant leaves these rows); `m`: the manifest; `h`: each node's latest health probe; `k`: the
# SSH key changes (a new key being installed, then installed or refused, is shown on the page).


@lru_cache(maxsize=1)
def version_sql() -> str:
    """VERSION_SQL with the models' table names."""
    models = {
        "order": Order,
        "payment": PaymentRequest,
        "credit": Credit,
        "notice": Notice,
        "refund": Refund,
        "extension": Extension,
        "run": PreparationRun,
        "node": Node,
        "grant": AccessGrant,
        "manifest": Manifest,
        "health": NodeHealth,
        "key_change": SshKeyChange,
    }
    return VERSION_SQL.format(**{name: model._meta.db_table for name, model in models.items()})


class PreparationProgress(TypedDict):
    """One preparation run of the order, as the version query reads it (its `u` rows)."""

    node: str
    status: str
    step: str
    progress: int


@dataclass(frozen=True)
class OrderVersion:
    """What one version query found: the ETag's input and the small parts of the body it already holds."""

    order_id: int
    rows: tuple[tuple[str | None, ...], ...]
    first_payment_id: int | None = None
    notices: dict[int, int] = field(default_factory=dict)
    tx_hashes: dict[int, list[str]] = field(default_factory=dict)
    runs: list[PreparationProgress] = field(default_factory=list)
    kinds: frozenset[str] = frozenset()
    status: str = ""  # the order's

    def has(self, kind: str) -> bool:
        """Whether the order has any rows of that kind: `r` refunds, `e` extensions, `g` access, `m` manifest."""
        return kind in self.kinds

    def deadlines_passed(self, now: dt.datetime) -> int:
        """How many of the order's payment windows have ended by `now`: a page that offers a payment stops
        offering it the moment its window ends, not when the next change or minute renews the kept page."""
        ends = [parse_datetime(row[6]) for row in self.rows if row[0] == "p" and row[6]]
        return sum(1 for end in ends if end is not None and end <= now)  # PostgreSQL's text has the zone

    def etag(self, *variant: str) -> str:
        """A weak validator: the same rows (and the same variant: language, page state) give the same body."""
        digest = hashlib.blake2b(digest_size=16)
        for part in (REPRESENTATION_REVISION, *variant, repr(self.rows)):
            digest.update(part.encode())
            digest.update(b"\x00")
        return f'W/"{digest.hexdigest()}"'

    @classmethod
    def of_new_order(cls, order: Order) -> OrderVersion:
        """A just-placed order: one payment, nothing else yet (its body needs no version query)."""
        return cls(order_id=order.pk, rows=(), first_payment_id=order.payment.pk)


def order_version_read(*, reference: str, token: str | None) -> OrderVersion | None:
    """The order's version if the token opens it; None for a wrong reference or token alike (no oracle)."""
    if not token:
        return None
    # Prepared: planning its eleven small parts cost three times what running them does (1 ms against 0.3 ms).
    rows = prepared_rows(name="shop_order_version", sql=version_sql(), params=[str(reference).upper(), False])
    head = next((row for row in rows if row[0] == "o"), None)
    if head is None or not order_token_opens(Order(reference=str(reference).upper(), access_nonce=head[2]), token):
        return None
    return _version_of(rows)


def _version_of(rows: list[Row]) -> OrderVersion:
    first_payment_id, notices, shown = None, {}, []
    runs: list[PreparationProgress] = []
    tx_hashes: dict[int, list[str]] = {}
    for row in rows:
        kind = row[0]
        if kind == "o":
            order_id, status = int(row[1]), row[3]
            row = (kind, row[1], *row[3:])  # without the nonce
        elif kind == "p" and row[2] is None:
            first_payment_id = int(row[1])
        elif kind == "c":
            tx_hashes.setdefault(int(row[1]), []).append(row[2])
        elif kind == "n":
            notices[int(row[1])] = int(row[2])
        elif kind == "u":
            runs.append({"node": row[3], "status": row[4], "step": row[5], "progress": int(row[6])})
        shown.append(tuple(row))
    return OrderVersion(
        order_id=order_id,
        rows=tuple(shown),
        first_payment_id=first_payment_id,
        notices=notices,
        tx_hashes={payment: sorted(set(hashes)) for payment, hashes in tx_hashes.items()},
        runs=runs,  # oldest first: the runs' rows sort by their created_at
        kinds=frozenset(row[0] for row in rows),
        status=status,
    )


@lru_cache(maxsize=1)
def _order_read() -> CompiledRead[PaymentRequest]:
    return CompiledRead.of(
        PaymentRequest.objects.select_related("order__preparation", "asset__network").filter(pk=0).order_by()
    )


def order_read(version: OrderVersion) -> Order:
    """The order with its first payment, asset, network and preparation: one query, joined by primary keys,
    its SQL built once and prepared (the ORM compiling it was a third of a changed order's read)."""
    read = _order_read()
    (payment,) = read.objects(prepared_rows(name="shop_order_read", sql=read.sql, params=[version.first_payment_id]))
    order = payment.order
    order.payment = payment
    return order
