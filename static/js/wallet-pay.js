/* "Pay with wallet": the order's exact transfer, prepared in the browser's own wallet.
 *
 * Each `[data-wallet-pay]` block (templates/shop/_wallet_button.html, one per payment) is hidden in the HTML and
 * shown only when the browser has an injected wallet: `window.ethereum` (EIP-1193) or one announced through
 * EIP-6963 (`eip6963:announceProvider`, answered to our `eip6963:requestProvider`). With several announced, the
 * customer picks one by its name and icon. The button asks for an account, switches the wallet to the order's
 * chain (adding it where the page knows the chain's public RPC, on 4902), then asks it to send exactly the quoted
 * amount: the coin's value, or the token's `transfer(address,uint256)`. The hash it answers goes through the
 * "I have paid" form, the same server path as a hash typed in by hand. Amounts are BigInt from end to end.
 * The texts come from data attributes (translated by the template); this file holds none.
 */
(function (root) {
  "use strict";

  const TRANSFER_SELECTOR = "a9059cbb"; // keccak256("transfer(address,uint256)")[:4]
  const USER_REJECTED = 4001;
  const UNKNOWN_CHAIN = 4902;
  const REQUEST_PENDING = -32002;

  function hexQuantity(value) {
    return "0x" + BigInt(value).toString(16);
  }

  function word(hex) {
    return hex.padStart(64, "0");
  }

  /** The ABI-encoded call `transfer(to, amount)`: the selector, the address and the amount as 32-byte words. */
  function encodeTransfer(to, amount) {
    const address = String(to).toLowerCase().replace(/^0x/, "");
    if (!/^[0-9a-f]{40}$/.test(address)) throw new RangeError(`not an address: ${to}`);
    const units = BigInt(amount);
    if (units < 0n || units >= 1n << 256n) throw new RangeError(`not a uint256: ${amount}`);
    return "0x" + TRANSFER_SELECTOR + word(address) + word(units.toString(16));
  }

  /** eth_sendTransaction's object: the coin's value to the address, or the token's transfer call. */
  function transferRequest({ from, to, contract, amount, chainId }) {
    const request = { from, chainId: hexQuantity(chainId) };
    if (contract) {
      return Object.assign(request, { to: contract, value: "0x0", data: encodeTransfer(to, amount) });
    }
    return Object.assign(request, { to, value: hexQuantity(amount) });
  }

  /** The EIP-1193 error code, where wallets put it (MetaMask Mobile wraps its own in an internal error). */
  function errorCode(error) {
    if (!error || typeof error !== "object") return undefined;
    const nested = error.data && error.data.originalError;
    const code = nested && nested.code !== undefined ? nested.code : error.code;
    return typeof code === "string" && /^-?\d+$/.test(code) ? Number(code) : code;
  }

  const helpers = { encodeTransfer, transferRequest, errorCode, hexQuantity };
  if (typeof module === "object" && module.exports) {
    module.exports = helpers;
  }
  if (typeof document === "undefined") return;
  // One run serves every block: the template loads this file once per payment shown.
  if (root.B200WalletPay) return;
  root.B200WalletPay = helpers;

  /* ---- In the browser ---- */

  const announced = new Map(); // EIP-6963 uuid -> { info, provider }

  function fill(template, values) {
    return String(template || "").replace(/\{(\w+)\}/g, (whole, name) =>
      Object.prototype.hasOwnProperty.call(values, name) ? String(values[name]) : whole
    );
  }

  /** The wallets to offer: those announced (EIP-6963), else the one injected as `window.ethereum`. */
  function wallets() {
    if (announced.size) return Array.from(announced.values());
    if (root.ethereum && typeof root.ethereum.request === "function") {
      return [{ info: null, provider: root.ethereum }];
    }
    return [];
  }

  /** The "I have paid" form of the payment's section (else the page's one). */
  function paidForm(block) {
    for (let node = block.parentElement; node; node = node.parentElement) {
      const form = node.querySelector("form.paid-form");
      if (form) return form;
    }
    return null;
  }

  function report(block, hash) {
    const form = paidForm(block);
    const field = form && form.querySelector("[name=tx_hash]");
    if (!field) return false;
    field.value = hash;
    // requestSubmit fires `submit` like a press of the button (order-status.js then waits for the next page).
    if (typeof form.requestSubmit === "function") form.requestSubmit();
    else form.submit();
    return true;
  }

  async function switchChain(provider, block) {
    const data = block.dataset;
    const wanted = BigInt(data.chainId);
    const current = await provider.request({ method: "eth_chainId" });
    if (current !== undefined && current !== null && BigInt(current) === wanted) return true;
    say(block, data.textSwitching);
    try {
      await provider.request({ method: "wallet_switchEthereumChain", params: [{ chainId: hexQuantity(wanted) }] });
      return true;
    } catch (error) {
      if (errorCode(error) !== UNKNOWN_CHAIN) throw error;
    }
    if (!data.addChain) {
      say(block, data.textUnknownChain);
      return false;
    }
    say(block, data.textAdding);
    await provider.request({ method: "wallet_addEthereumChain", params: [JSON.parse(data.addChain)] });
    // Adding a chain usually switches to it too; ask again so that a wallet that did not is switched.
    await provider.request({ method: "wallet_switchEthereumChain", params: [{ chainId: hexQuantity(wanted) }] });
    return true;
  }

  /** A polite announcement in the block's live region; the same text twice is announced twice. */
  function say(block, text) {
    const status = block.querySelector("[data-wallet-status]");
    if (!status) return;
    status.textContent = "";
    window.setTimeout(() => {
      status.textContent = text;
    }, 50);
  }

  // While the wallet is asked, the buttons refuse presses but keep the focus (a disabled button would drop it).
  const busy = new WeakSet();
  function setBusy(block, state) {
    if (state) busy.add(block);
    else busy.delete(block);
    block.querySelectorAll("button").forEach((button) => {
      if (state) button.setAttribute("aria-disabled", "true");
      else button.removeAttribute("aria-disabled");
    });
  }

  async function pay(block, provider) {
    if (busy.has(block)) return;
    const data = block.dataset;
    let reported = false;
    setBusy(block, true);
    try {
      say(block, data.textConnecting);
      const accounts = await provider.request({ method: "eth_requestAccounts" });
      const from = accounts && accounts[0];
      if (!from) throw { code: USER_REJECTED };
      if (!(await switchChain(provider, block))) return;
      say(block, data.textConfirm);
      const hash = await provider.request({
        method: "eth_sendTransaction",
        params: [
          transferRequest({
            from,
            to: data.to,
            contract: data.contract,
            amount: data.amount,
            chainId: data.chainId,
          }),
        ],
      });
      say(block, fill(data.textSent, { hash }));
      reported = report(block, hash);
    } catch (error) {
      const code = errorCode(error);
      if (code === USER_REJECTED) say(block, data.textRejected);
      else if (code === REQUEST_PENDING) say(block, data.textPending);
      else {
        const reason = (error && (error.message || code)) || "?";
        say(block, fill(data.textFailed, { reason }));
      }
    } finally {
      // Once the form is on its way the next page answers: no second transfer from this one meanwhile.
      if (!reported) setBusy(block, false);
    }
  }

  /** The list of announced wallets, one button each (its icon is a data: URI, as EIP-6963 requires). */
  function renderChoices(block) {
    const list = block.querySelector("[data-wallet-list]");
    if (!list) return;
    list.replaceChildren();
    wallets().forEach((wallet, index) => {
      const item = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "button button--secondary wallet-pay__wallet";
      button.id = `${block.id}-wallet-${index + 1}`;
      const icon = wallet.info && wallet.info.icon;
      if (typeof icon === "string" && icon.startsWith("data:image/")) {
        const image = document.createElement("img");
        image.src = icon;
        image.alt = "";
        image.width = 24;
        image.height = 24;
        button.appendChild(image);
      }
      const name = document.createElement("span");
      name.textContent = (wallet.info && wallet.info.name) || String(index + 1);
      button.appendChild(name);
      button.addEventListener("click", () => pay(block, wallet.provider));
      item.appendChild(button);
      list.appendChild(item);
    });
  }

  function refresh() {
    const available = wallets();
    document.querySelectorAll("[data-wallet-pay]").forEach((block) => {
      block.hidden = available.length === 0;
      const choices = block.querySelector("[data-wallet-choices]");
      if (choices && !choices.hidden) renderChoices(block);
    });
  }

  function start() {
    const blocks = document.querySelectorAll("[data-wallet-pay]");
    if (!blocks.length) return;
    blocks.forEach((block) => {
      const button = block.querySelector("[data-wallet-start]");
      if (!button) return;
      button.addEventListener("click", () => {
        if (busy.has(block)) return;
        const available = wallets();
        if (available.length === 1) {
          pay(block, available[0].provider);
          return;
        }
        const choices = block.querySelector("[data-wallet-choices]");
        if (!choices || !available.length) return;
        renderChoices(block);
        choices.hidden = false;
        button.setAttribute("aria-expanded", "true");
        const first = choices.querySelector("button");
        if (first) first.focus();
      });
    });
    root.addEventListener("eip6963:announceProvider", (event) => {
      const detail = event.detail;
      if (!detail || !detail.info || !detail.provider || typeof detail.provider.request !== "function") return;
      announced.set(String(detail.info.uuid || detail.info.rdns || announced.size), detail);
      refresh();
    });
    root.dispatchEvent(new Event("eip6963:requestProvider"));
    // A wallet that injects `window.ethereum` after the page's scripts says so with this event.
    root.addEventListener("ethereum#initialized", refresh, { once: true });
    refresh();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})(typeof window !== "undefined" ? window : globalThis);
