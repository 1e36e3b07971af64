"""`python -m payments.signer.xpub --mnemonic-file FILE`: the treasurer's first step. Prints the account-level
public key (m/44'/60'/0') to set as the server's PAYMENTS_XPUB, and the gas account it implies; the mnemonic
stays on this machine (the file is checked as the signer checks it). Exit 2 on a refused file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bip_utils import Bip39SeedGenerator, Bip44, Bip44Coins

from payments.signer.keys import derive, read_mnemonic
from payments.signer.plan import GAS_ACCOUNT_PATH, PlanError


def account_xpub(mnemonic: str) -> str:
    seed = Bip39SeedGenerator(mnemonic).Generate()
    xpub: str = Bip44.FromSeed(seed, Bip44Coins.ETHEREUM).Purpose().Coin().Account(0).PublicKey().ToExtended()
    return xpub


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m payments.signer.xpub", description=__doc__.split("\n")[0])
    parser.add_argument("--mnemonic-file", required=True, type=Path, help="the mnemonic, in a file of mode 600")
    args = parser.parse_args(argv)
    try:
        mnemonic = read_mnemonic(args.mnemonic_file)
        gas_account = derive(mnemonic, GAS_ACCOUNT_PATH).address
    except PlanError as error:
        print(f"refused: {error}", file=sys.stderr)
        return 2
    print(f"PAYMENTS_XPUB={account_xpub(mnemonic)}")
    print(f"gas account ({GAS_ACCOUNT_PATH}): {gas_account}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
