"""Order-domain fixtures: the orders themselves are built (tests/stored_rows.py: `an_order`), without a chain; the
API's client reads them as a customer does. A test whose subject is placing an order asks for `anvil` itself."""

from __future__ import annotations

from tests.placing import api_client  # noqa: F401 - the API's own fixture, shared
