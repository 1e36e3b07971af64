"""Mainnet USDC/USDT contracts and native coins of the networks we accept, plus the local dev chain.

A network is offered at checkout only when CHAIN_RPC_URLS_<SLUG> is set (local has a default).
"""

from django.db import migrations

# slug, name, chain id, confirmations, explorer, native (symbol, name), tokens [(symbol, name, contract, decimals)]
NETWORKS = [
    ("ethereum", "Ethereum", 1, 12, "https://etherscan.io/tx/{tx}", ("ETH", "Ether"), [
        ("USDC", "USD Coin", "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48", 6),
        ("USDT", "Tether USD", "0xdAC17F958D2ee523a2206206994597C13D831ec7", 6),
    ]),
    ("arbitrum", "Arbitrum One", 42161, 20, "https://arbiscan.io/tx/{tx}", ("ETH", "Ether"), [
        ("USDC", "USD Coin", "0xaf88d065e77c8cC2239327C5EDb3A432268e5831", 6),
        ("USDT", "Tether USD", "0xFd086bC7CD5C481DCC9C85ebE478A1C0b69FCbb9", 6),
    ]),
    ("base", "Base", 8453, 20, "https://basescan.org/tx/{tx}", ("ETH", "Ether"), [
        ("USDC", "USD Coin", "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", 6),
        ("USDT", "Tether USD (bridged)", "0xfde4C96c8593536E31F229EA8f37b2ADa2699bb2", 6),
    ]),
    ("optimism", "OP Mainnet", 10, 20, "https://optimistic.etherscan.io/tx/{tx}", ("ETH", "Ether"), [
        ("USDC", "USD Coin", "0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85", 6),
        ("USDT", "Tether USD", "0x94b008aA00579c1307B0EF2c499aD98a8ce58e58", 6),
    ]),
    ("polygon", "Polygon PoS", 137, 64, "https://polygonscan.com/tx/{tx}", ("POL", "Polygon Ecosystem Token"), [
        ("USDC", "USD Coin", "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359", 6),
        ("USDT", "Tether USD", "0xc2132D05D31c914a87C6611C10748AEb04B58e8F", 6),
    ]),
    ("bsc", "BNB Smart Chain", 56, 15, "https://bscscan.com/tx/{tx}", ("BNB", "BNB"), [
        ("USDC", "USD Coin (BEP-20)", "0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d", 18),
        ("USDT", "Tether USD (BEP-20)", "0x55d398326f99059fF775485246999027B3197955", 18),
    ]),
]


def create_networks(apps, schema_editor):
    Network = apps.get_model("payments", "Network")
    Asset = apps.get_model("payments", "Asset")
    for position, (slug, name, chain_id, confirmations, explorer, native, tokens) in enumerate(NETWORKS, start=1):
        network, _ = Network.objects.get_or_create(
            slug=slug,
            defaults={"name": name, "chain_id": chain_id, "confirmations_required": confirmations,
                      "explorer_tx_url": explorer, "position": position},
        )
        Asset.objects.get_or_create(network=network, symbol=native[0],
                                    defaults={"name": native[1], "decimals": 18, "contract": None})
        for symbol, token_name, contract, decimals in tokens:
            Asset.objects.get_or_create(
                network=network, symbol=symbol,
                defaults={"name": token_name, "decimals": decimals, "contract": contract, "usd_stable": True},
            )
    # The local development chain (anvil). Its test USDC/USDT are deployed by `manage.py devnet setup`.
    # It mines only when a transaction arrives, so an old head is not a stale one there.
    local, _ = Network.objects.get_or_create(
        slug="local",
        defaults={"name": "Local development chain", "chain_id": 31337, "confirmations_required": 2,
                  "is_development": True, "position": 100, "max_head_age_seconds": 0, "max_block_range": 5000},
    )
    Asset.objects.get_or_create(network=local, symbol="ETH",
                                defaults={"name": "Ether (local)", "decimals": 18, "contract": None})


class Migration(migrations.Migration):
    dependencies = [("payments", "0001_initial")]
    operations = [migrations.RunPython(create_networks, migrations.RunPython.noop)]
