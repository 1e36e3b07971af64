"""/healthz tells an operator whether the database, the broker and each offered network answer."""

from __future__ import annotations

from tests.servers import free_port


def test_health_reports_the_database_and_the_local_chains_height(anvil, client, db, only_local_network):
    anvil.mine(2)
    height = anvil.block_number()

    response = client.get("/healthz")

    assert response.status_code == 200
    report = response.json()
    assert report["ok"] is True
    assert report["database"] == {"ok": True}
    assert report["broker"]["ok"] is True
    assert report["networks"]["local"]["ok"] is True
    assert height <= report["networks"]["local"]["block"] <= height + 1


def test_health_reports_a_network_whose_rpc_does_not_answer(anvil, client, db, only_local_network, monkeypatch):
    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", f"http://127.0.0.1:{free_port()}")

    response = client.get("/healthz")

    report = response.json()
    assert report["database"]["ok"] is True
    assert report["networks"]["local"]["ok"] is False
    assert "block" not in report["networks"]["local"]
    assert report["networks"]["local"]["error"]


def test_health_reports_a_network_answering_with_another_chain_id(anvil, client, db, only_local_network):
    from payments.models import Network

    Network.objects.filter(slug="local").update(chain_id=31338)

    report = client.get("/healthz").json()

    assert report["networks"]["local"]["ok"] is False


def test_health_still_reports_a_network_the_verifier_took_off_checkout(
    anvil, client, db, only_local_network, monkeypatch
):
    """The operator must see why a network is no longer offered, not lose it from the report."""
    from payments.models import Network

    monkeypatch.setenv("CHAIN_RPC_URLS_LOCAL", f"http://127.0.0.1:{free_port()}")
    Network.objects.filter(slug="local").update(rpc_ok=False, rpc_error="no RPC URL answered")

    report = client.get("/healthz").json()

    assert "local" in report["networks"], report
    assert report["networks"]["local"]["ok"] is False
