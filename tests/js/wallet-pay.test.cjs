// The transfer static/js/wallet-pay.js asks a wallet to send, under Node's own test runner. The expected
// call data are eth_abi's encoding of transfer(address,uint256) (what payments/devnet.py sends).
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const wallet = require("../../static/js/wallet-pay.js");

const TO = "0x52908400098527886E0F7030069857D2E4169EE7";
const FROM = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
const TOKEN = "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48";

test("a token payment is the token's transfer of the exact base units to the order's address, with no value", () => {
  const request = wallet.transferRequest({ from: FROM, to: TO, contract: TOKEN, amount: "1500000", chainId: "31337" });

  assert.deepEqual(request, {
    from: FROM,
    chainId: "0x7a69",
    to: TOKEN,
    value: "0x0",
    data:
      "0xa9059cbb" +
      "00000000000000000000000052908400098527886e0f7030069857d2e4169ee7" +
      "000000000000000000000000000000000000000000000000000000000016e360",
  });
});

test("a coin payment sends the exact base units as the value to the order's address, with no data", () => {
  // 0.663333333333333334 ETH: more than a double holds exactly
  const request = wallet.transferRequest({ from: FROM, to: TO, contract: "", amount: "663333333333333334", chainId: "1" });

  assert.deepEqual(request, { from: FROM, chainId: "0x1", to: TO, value: "0x934a226f5025556" });
  assert.equal(BigInt(request.value), 663333333333333334n);
});

test("the largest uint256 is encoded whole, and what is not an amount or an address is refused", () => {
  assert.ok(wallet.encodeTransfer(TO, (1n << 256n) - 1n).endsWith("f".repeat(64)));
  assert.throws(() => wallet.encodeTransfer(TO, 1n << 256n), RangeError);
  assert.throws(() => wallet.encodeTransfer(TO, -1n), RangeError);
  assert.throws(() => wallet.encodeTransfer("0x1234", 1n), RangeError);
});

test("the wallet's error code is found where wallets put it", () => {
  assert.equal(wallet.errorCode({ code: 4001 }), 4001);
  // MetaMask Mobile: an internal error wrapping the wallet's own
  assert.equal(wallet.errorCode({ code: -32603, data: { originalError: { code: 4902 } } }), 4902);
  assert.equal(wallet.errorCode({ data: { originalError: { code: 4902 } } }), 4902);
  assert.equal(wallet.errorCode({ code: "4001" }), 4001);
  assert.equal(wallet.errorCode(undefined), undefined);
});
