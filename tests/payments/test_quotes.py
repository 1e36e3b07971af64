"""A USD price becomes an exact amount of the chosen asset, never short, with a payment link and real contracts."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from unittest import mock

import pytest
from Crypto.Hash import keccak
from django.utils import timezone

from payments.checkout import quote_prepare
from payments.models import Asset, Network, Rate
from payments.quotes import QuoteError, UsdRate, eip681_uri, format_units, to_base_units, usd_rate

STABLE = UsdRate(Decimal(1), None)
TO = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"

# Independently checked against the issuers' published addresses.
MAINNET_STABLECOINS = {
    "ethereum": (
        1,
        "ETH",
        {
            "USDC": ("0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48", 6),
            "USDT": ("0xdAC17F958D2ee523a2206206994597C13D831ec7", 6),
        },
    ),
    "arbitrum": (
        42161,
        "ETH",
        {
            "USDC": ("0xaf88d065e77c8cC2239327C5EDb3A432268e5831", 6),
            "USDT": ("0xFd086bC7CD5C481DCC9C85ebE478A1C0b69FCbb9", 6),
        },
    ),
    "base": (
        8453,
        "ETH",
        {
            "USDC": ("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", 6),
            "USDT": ("0xfde4C96c8593536E31F229EA8f37b2ADa2699bb2", 6),
        },
    ),
    "optimism": (
        10,
        "ETH",
        {
            "USDC": ("0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85", 6),
            "USDT": ("0x94b008aA00579c1307B0EF2c499aD98a8ce58e58", 6),
        },
    ),
    "polygon": (
        137,
        "POL",
        {
            "USDC": ("0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359", 6),
            "USDT": ("0xc2132D05D31c914a87C6611C10748AEb04B58e8F", 6),
        },
    ),
    "bsc": (
        56,
        "BNB",
        {
            "USDC": ("0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d", 18),
            "USDT": ("0x55d398326f99059fF775485246999027B3197955", 18),
        },
    ),
}


def is_eip55(address: str) -> bool:
    digits = address[2:]
    digest = keccak.new(digest_bits=256, data=digits.lower().encode()).hexdigest()
    return digits == "".join(c.upper() if int(h, 16) >= 8 else c.lower() for c, h in zip(digits, digest, strict=False))


def test_a_six_decimal_stablecoin_amount_is_exact():
    assert to_base_units(Decimal("1990.00"), STABLE, 6) == 1_990_000_000
    assert to_base_units(Decimal("899.00"), STABLE, 6) == 899_000_000


def test_an_eighteen_decimal_stablecoin_amount_is_exact():
    assert to_base_units(Decimal("1990.00"), STABLE, 18) == 1990 * 10**18
    assert to_base_units(Decimal("7900.00") * 64, STABLE, 18) == 505_600 * 10**18


def test_a_stablecoin_amount_keeps_every_cent_however_many_digits():
    """1:1 amounts are never rounded to six significant digits: 505,600.01 USD is 505600.01 USDC."""
    assert format_units(to_base_units(Decimal("505600.01"), STABLE, 6), 6) == "505600.01"
    assert format_units(to_base_units(Decimal("899.00"), STABLE, 18), 18) == "899"


def test_a_native_coin_amount_is_rounded_up_so_the_quote_never_falls_short():
    rate = UsdRate(Decimal("3000"), timezone.now())

    wei = to_base_units(Decimal("1990.00"), rate, 18)

    assert wei == 663_334 * 10**12  # 0.663333333333333333.33... ETH rounded up to 0.663334 ETH
    assert wei * 3000 >= 1990 * 10**18


@pytest.mark.parametrize(
    ("usd", "usd_per_unit", "decimals", "amount"),
    [
        ("899.00", "3000", 18, "0.299667"),  # 0.29966666666666666666...: what a wallet cannot send exactly
        ("1.23456789", "1.00000001", 18, "1.23457"),  # 1.2345678776543212...: six significant digits, up
        ("1990.00", "3000", 18, "0.663334"),
        ("1000", "4000", 18, "0.25"),  # already short: unchanged
        ("505600.00", "0.00001234", 18, "40972500000"),  # 40,972,447,325.77...: a cheap coin, big amount
        ("0.01", "123456.789", 18, "0.0000000810001"),  # 8.100000737...e-8: small amounts keep six digits too
        ("999.9999", "1.0000001", 18, "1000"),  # 999.99980...: the carry gives fewer digits, never more
        ("1990.00", "3000", 4, "0.6634"),  # never more decimals than the asset has
        ("1990.00", "3000", 0, "1"),
    ],
)
def test_a_rate_priced_amount_is_rounded_up_to_six_significant_digits(usd, usd_per_unit, decimals, amount):
    rate = UsdRate(Decimal(usd_per_unit), timezone.now())

    units = to_base_units(Decimal(usd), rate, decimals)

    assert format_units(units, decimals) == amount
    # Never short of the price, and no more than one step of the sixth digit (or one base unit) over it
    exact = Decimal(usd) / Decimal(usd_per_unit)
    assert Decimal(units).scaleb(-decimals) >= exact
    step = max(Decimal(1).scaleb(exact.adjusted() - 5), Decimal(1).scaleb(-decimals))
    assert Decimal(units).scaleb(-decimals) - exact < step
    digits = str(units).rstrip("0")
    assert len(digits) <= 6


def test_a_native_coin_quote_is_the_rounded_amount_the_link_carries(db):
    """The rounded amount is the quote: what is stored (and the scan compares), shown and put in the link."""
    eth = Asset.objects.get(network__slug="ethereum", symbol="ETH")
    Rate.objects.create(asset=eth, usd_per_unit=Decimal("3000"), as_of=timezone.now(), source="staff")

    with mock.patch("payments.checkout.start_block", return_value=1):
        quote = quote_prepare(asset=eth, amount_usd=Decimal("899.00"))

    assert quote.amount_base_units == 299_667 * 10**12
    assert format_units(quote.amount_base_units, 18) == "0.299667"
    uri = eip681_uri(contract=None, chain_id=1, address=TO, base_units=quote.amount_base_units)
    assert uri == f"ethereum:{TO}@1?value=299667000000000000"


def test_a_stablecoin_quote_stays_exact(db):
    usdc = Asset.objects.get(network__slug="base", symbol="USDC")

    with mock.patch("payments.checkout.start_block", return_value=1):
        quote = quote_prepare(asset=usdc, amount_usd=Decimal("899.00"))

    assert quote.amount_base_units == 899_000_000


def test_amounts_are_written_exactly_in_whole_units():
    assert format_units(663_333_333_333_333_334, 18) == "0.663333333333333334"
    assert format_units(1_990_000_000, 6) == "1990"
    assert format_units(1990 * 10**18, 18) == "1990"
    assert format_units(500_000, 6) == "0.5"
    assert format_units(1, 18) == "0.000000000000000001"
    assert format_units(Decimal("1500000"), 6) == "1.5"


def test_the_largest_order_in_a_cheap_coin_is_written_exactly():
    """64 lots for 30 days in a coin at 0.00001234 USD: a 29-digit amount of base units, shown to the last unit
    (the quote is rounded to six significant digits; a transfer received can have all 29)."""
    wei = 40_972_447_325_769_854_132_901_134_522
    quoted = to_base_units(Decimal("7900.00") * 64, UsdRate(Decimal("0.00001234"), timezone.now()), 18)
    assert quoted == 409_725 * 10**23

    written = format_units(wei, 18)

    whole, _, fraction = written.partition(".")
    assert int(whole) * 10**18 + int(fraction.ljust(18, "0")) == wei
    assert written == f"{str(wei)[:-18]}.{str(wei)[-18:]}".rstrip("0")


def test_amounts_up_to_uint256_are_written_exactly():
    """Base units go up to 2**256 (a 78-digit integer); the written amount must not be rounded."""
    base_units = 2**256 - 1
    digits = str(base_units)

    assert format_units(base_units, 18) == f"{digits[:-18]}.{digits[-18:]}"
    assert format_units(10**40 + 1, 6) == "1" + "0" * 34 + ".000001"  # 10**40 units = 10**34 whole


@pytest.fixture
def ethereum_eth(db):
    return Asset.objects.get(network__slug="ethereum", symbol="ETH")


def test_a_stale_native_coin_rate_is_refused_with_advice_for_the_customer(ethereum_eth, settings):
    now = timezone.now()
    Rate.objects.create(
        asset=ethereum_eth,
        usd_per_unit=Decimal("3000"),
        as_of=now - dt.timedelta(seconds=settings.RATE_MAX_AGE_SECONDS + 1),
    )

    with pytest.raises(QuoteError, match="no up-to-date price for ETH") as refused:
        usd_rate(ethereum_eth, now=now)
    assert "choose a stablecoin" in str(refused.value)


def test_a_native_coin_without_any_rate_is_refused(ethereum_eth):
    with pytest.raises(QuoteError, match="no up-to-date price for ETH"):
        usd_rate(ethereum_eth)


def test_a_fresh_native_coin_rate_is_used_with_its_timestamp(ethereum_eth, settings):
    now = timezone.now()
    as_of = now - dt.timedelta(seconds=settings.RATE_MAX_AGE_SECONDS - 5)
    Rate.objects.create(asset=ethereum_eth, usd_per_unit=Decimal("2500"), as_of=now - dt.timedelta(hours=2))
    Rate.objects.create(asset=ethereum_eth, usd_per_unit=Decimal("3125.5"), as_of=as_of)

    assert usd_rate(ethereum_eth, now=now) == UsdRate(Decimal("3125.5"), as_of)


def test_a_zero_rate_is_never_used(ethereum_eth):
    Rate.objects.create(asset=ethereum_eth, usd_per_unit=Decimal("0"))

    with pytest.raises(QuoteError):
        usd_rate(ethereum_eth)


def test_stablecoins_are_priced_one_to_one_in_usd(db):
    usdc = Asset.objects.get(network__slug="base", symbol="USDC")

    assert usd_rate(usdc) == UsdRate(Decimal(1), None)


def test_the_local_chain_falls_back_to_the_development_rate(db, settings):
    settings.DEV_NATIVE_USD_RATE = "2000"
    local_eth = Asset.objects.get(network__slug="local", symbol="ETH")
    now = timezone.now()

    assert usd_rate(local_eth, now=now) == UsdRate(Decimal("2000"), now)
    assert to_base_units(Decimal("1990.00"), usd_rate(local_eth, now=now), 18) == 995 * 10**15  # 0.995: exact


def test_a_token_payment_link_is_an_eip681_transfer_call():
    uri = eip681_uri(
        contract="0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", chain_id=8453, address=TO, base_units=1_990_000_000
    )

    assert uri == f"ethereum:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913@8453/transfer?address={TO}&uint256=1990000000"


def test_a_native_coin_payment_link_carries_the_value_in_wei():
    uri = eip681_uri(contract=None, chain_id=1, address=TO, base_units=663_333_333_333_333_334)

    assert uri == f"ethereum:{TO}@1?value=663333333333333334"


def test_the_default_data_has_the_real_mainnet_stablecoin_contracts(db):
    for slug, (chain_id, native_symbol, tokens) in MAINNET_STABLECOINS.items():
        network = Network.objects.get(slug=slug)
        assert network.chain_id == chain_id, slug
        assert not network.is_development, slug

        native = Asset.objects.get(network=network, contract__isnull=True)
        assert (native.symbol, native.decimals, native.usd_stable) == (native_symbol, 18, False), slug

        for symbol, (contract, decimals) in tokens.items():
            asset = Asset.objects.get(network=network, symbol=symbol)
            assert asset.contract == contract, f"{symbol} on {slug}"
            assert asset.decimals == decimals, f"{symbol} on {slug}"
            assert asset.usd_stable, f"{symbol} on {slug}"
            assert is_eip55(asset.contract), f"{symbol} on {slug}"


def test_the_local_development_chain_is_anvils(db):
    local = Network.objects.get(slug="local")

    assert (local.chain_id, local.is_development) == (31337, True)
    assert Network.objects.filter(is_development=True).count() == 1
