"""A plan's refunds as the treasurer sees them before anything is sent, the run's caps on them, and the question.

Amounts are shown in the asset's own units, with the symbol and decimals the token contract answers on the
treasurer's RPC (a plan could label 899 USDC as 0.000000000899 of something); the chain's coin has 18 decimals.
What the caps count (each set on the treasurer's side, 0 = no refund of that kind):
- `--max-refunds-usd`: every refund in a USD stablecoin (a token whose own symbol is one of STABLECOINS) at 1:1,
  summed across tokens. A worthless token that calls itself USDC is counted too, which only errs on the safe side.
- `--max-refunds-native`: the refunds in the chain's coin, in whole coins (the plan carries no price for it).
- `--max-refunds-token CONTRACT=AMOUNT`: any other token, per contract, in whole tokens (base units when the token
  answers no decimals). A refund in a token with no cap is refused.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from payments.signer.chain import Chain
from payments.signer.pins import Pins
from payments.signer.plan import Plan, PlanError, PlanItem, PlanRefund

STABLECOINS = frozenset(
    {"USDC", "USDT", "DAI", "USDS", "PYUSD", "USDP", "TUSD", "FDUSD", "GUSD", "USDC.E", "USDT.E", "USDBC", "USDT0"}
)
NATIVE_DECIMALS = 18  # every EVM chain's coin
NATIVE_SYMBOLS = {1: "ETH", 10: "ETH", 8453: "ETH", 42161: "ETH", 11155111: "ETH", 31337: "ETH", 137: "POL", 56: "BNB"}


@dataclass(frozen=True)
class Shown:
    """One refund as the treasurer is shown it."""

    item: PlanItem
    refund: PlanRefund
    symbol: str
    decimals: int | None  # None: the token answers no decimals; the amount is shown in base units
    usd: bool  # a USD stablecoin: counted 1:1 against --max-refunds-usd

    @property
    def whole(self) -> Fraction:
        return Fraction(self.refund.amount, 10 ** (self.decimals or 0))

    def line(self) -> str:
        asset = self.symbol or "tokens"
        where = "native coin" if self.item.is_native else f"token {self.item.contract}"
        units = "" if self.decimals is not None else " base units of"
        return (
            f"refund {self.refund.to_address} {decimal_text(self.whole)}{units} {asset} order {self.item.order} "
            f"(from {self.item.address}, {where})"
        )


def decimal_text(value: Fraction) -> str:
    """An exact amount in plain digits, no exponent and no trailing zeros (1990, 2.5, 0.000001)."""
    whole, rest = divmod(value.numerator, value.denominator)
    digits = ""
    while rest and len(digits) < 80:  # base units over a power of ten: the expansion ends within 78 digits
        rest *= 10
        digits += str(rest // value.denominator)
        rest %= value.denominator
    return f"{whole}.{digits}" if digits else str(whole)


def shown_refunds(plan: Plan, chain: Chain) -> list[Shown]:
    tokens: dict[str, tuple[str, int | None]] = {}
    shown = []
    for item in plan.items:
        if not item.refunds:
            continue
        decimals: int | None
        if item.contract is None:  # item.is_native
            symbol, decimals = NATIVE_SYMBOLS.get(plan.chain_id, "native coin"), NATIVE_DECIMALS
        else:
            if item.contract not in tokens:
                tokens[item.contract] = chain.token_metadata(item.contract)
            symbol, decimals = tokens[item.contract]
        usd = not item.is_native and decimals is not None and symbol.upper() in STABLECOINS
        shown += [Shown(item, refund, symbol, decimals, usd) for refund in item.refunds]
    return shown


def check_caps(shown: list[Shown], pins: Pins) -> None:
    """Refused whole when one kind of refund sums above its cap: nothing is sent."""
    usd = sum((entry.whole for entry in shown if entry.usd), Fraction(0))
    if usd > Fraction(pins.max_refunds_usd):
        raise PlanError(
            f"the refunds total {decimal_text(usd)} USD, above the cap of {pins.max_refunds_usd} USD "
            "(--max-refunds-usd)"
        )
    native = sum((entry.whole for entry in shown if entry.item.is_native), Fraction(0))
    if native > Fraction(pins.max_refunds_native):
        raise PlanError(
            f"the refunds in the chain's coin total {decimal_text(native)}, above the cap of "
            f"{pins.max_refunds_native} (--max-refunds-native)"
        )
    others: dict[str, Fraction] = defaultdict(Fraction)
    for entry in shown:
        if not entry.usd and entry.item.contract is not None:  # not entry.item.is_native
            others[entry.item.contract] += entry.whole
    for contract, total in others.items():
        cap = pins.max_refunds_token.get(contract, Decimal(0))
        if total > Fraction(cap):
            raise PlanError(
                f"the refunds in token {contract} total {decimal_text(total)}, above the cap of {cap} "
                f"(--max-refunds-token {contract}=AMOUNT)"
            )


def confirmed(shown: list[Shown], ask: Callable[[str], str] = input) -> bool:
    """The treasurer's yes to the refunds just listed; no answer (end of input, no terminal) is a no."""
    try:
        answer = ask(f"Send these {len(shown)} refunds? [y/N] ")
    except EOFError:
        print()
        return False
    return answer.strip().lower() in ("y", "yes")
