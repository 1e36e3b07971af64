/* The order's page: a countdown to the payment deadline, and live status from the API.
 *
 * Without JavaScript the page reloads itself (a meta refresh inside <noscript>; the server answers 304 while
 * nothing changed). With it, this polls GET /api/v1/orders/<reference>/ (header X-Order-Token) with the last
 * answer's ETag in If-None-Match: while nothing changed the server answers 304 with no body, at the cost of
 * one small query. The first poll comes 2 s after the page; each unchanged answer waits 1.5 times longer,
 * up to 20 s; any change brings it back to 2 s, and coming back to the page (focus) polls at once. The
 * payment's confirmations change in place; when the order itself moves on (paid, preparing, active, expired...),
 * the payment's status changes or more money is seen (the card gives way, or asks for what is missing), the page
 * reloads so that the server renders the new sections and instructions; so does an extension whose status or payment moved (an
 * active rental's page follows its open extension to "applied"). Polling stops once nothing can change by itself.
 */
(function () {
  "use strict";

  const shop = window.B200Shop;
  const page = document.querySelector("[data-order-live]");
  if (!shop || !page) return;

  // While one of these holds, the order can still move without anyone acting on this page.
  const LIVE_ORDER_STATUSES = ["awaiting_payment", "payment_reported", "paid", "preparing"];
  const LIVE_PAYMENT_STATUSES = ["pending", "detected"];
  const BACKOFF = 1.5; // each unchanged answer: wait this much longer
  const QUIET_DELAY_MS = 20 * 1000; // the longest wait while the server answers
  const MAX_DELAY_MS = 60 * 1000; // the longest wait while it does not

  const data = page.dataset;
  const locale = shop.locale();
  const numbers = shop.numberFormat();
  const labels = shop.jsonData(data.paymentLabels);
  const decimals = Number.parseInt(data.paymentDecimals, 10) || 0;
  const serverNow = shop.parseIso(data.serverNow);
  // The server's clock minus this device's, so that the countdown ends when the quote does. A page the
  // browser kept (a 304) carries an older clock: each answer's Date header corrects it.
  let skew = Number.isNaN(serverNow) ? 0 : serverNow - Date.now();

  function clockFrom(response) {
    const date = Date.parse(response.headers.get("Date") || "");
    if (Number.isNaN(date)) return;
    const measured = date + 500 - Date.now(); // the header counts whole seconds
    if (Math.abs(measured - skew) > 1500) skew = measured;
  }

  let orderStatus = data.orderStatus;
  let paymentStatus = data.paymentStatus;
  const receivedShown = data.paymentReceived || "0";
  // Each extension's status and its payment's, as the page shows them: {id: [status, payment status]}.
  const extensionStates = JSON.stringify(shop.jsonData(data.extensionStates) || {});
  const LIVE_EXTENSION_STATUSES = ["awaiting_payment", "payment_reported"];

  /* ---- Countdown ---- */

  /** A countdown under each payment card's deadline. When it ends, the card stops offering the payment at
   * once (no address or QR to send to a closed quote) and says what happens next; the server shows the
   * order's new state on the next answer. */
  function countdowns() {
    document.querySelectorAll("[data-countdown-to]").forEach(countdown);
  }

  function windowEnded(holder) {
    const card = holder.closest("[data-pay-card]");
    if (!card) return;
    const payable = card.querySelector(".pay-card__payable");
    const ended = card.querySelector(".pay-card__ended");
    if (payable) payable.hidden = true;
    if (ended) ended.hidden = false;
  }

  function countdown(holder, index) {
    const deadline = shop.parseIso(holder.dataset.countdownTo);
    if (Number.isNaN(deadline)) return;
    const timer = document.createElement("p");
    timer.className = "countdown";
    timer.id = index ? `payment-countdown-${index + 1}` : "payment-countdown";
    timer.setAttribute("role", "timer"); // not announced every second; the text is there when asked for
    holder.after(timer);

    function tick() {
      const left = deadline - (Date.now() + skew);
      if (left <= 0) {
        timer.textContent = holder.dataset.countdownEnded;
        timer.classList.add("countdown--ended");
        windowEnded(holder);
        return;
      }
      timer.textContent = shop.fill(holder.dataset.countdownText, {
        time: shop.formatClock(Math.ceil(left / 1000), locale),
      });
      timer.classList.toggle("countdown--soon", left < 5 * 60 * 1000);
      window.setTimeout(tick, left % 1000 || 1000);
    }
    tick();
  }

  /* ---- Live status ---- */

  function isLive(order, payment) {
    return LIVE_ORDER_STATUSES.includes(order) || LIVE_PAYMENT_STATUSES.includes(payment) || extensionOpen();
  }

  /** An extension still waiting for its money can move by itself (seen, applied, expired), as the order can. */
  function extensionOpen() {
    const states = shop.jsonData(data.extensionStates) || {};
    return Object.values(states).some(([status]) => LIVE_EXTENSION_STATUSES.includes(status));
  }

  function extensionStatesOf(order) {
    const states = {};
    (order.extensions || []).forEach((extension) => {
      states[String(extension.id)] = [extension.status, (extension.payment || {}).status];
    });
    return JSON.stringify(states);
  }

  function setText(element, text) {
    if (element && element.textContent !== text) element.textContent = text;
  }

  /** The payment's status, confirmations "n of N" and the amount seen, in place. */
  function showPayment(payment) {
    const status = document.getElementById("payment-status");
    if (status) {
      setText(status, labels[payment.status] || payment.status);
      status.className = `status status--${payment.status}`;
    }
    const numbers = {
      // never "4 of 2": blocks keep coming while a payment waits on a person
      confirmations: shop.formatInteger(
        Math.min(payment.confirmations || 0, payment.confirmations_required || Number.POSITIVE_INFINITY),
        numbers,
      ),
      required: shop.formatInteger(payment.confirmations_required || 0, numbers),
      received: shop.localizeDecimal(shop.formatUnits(payment.received_base_units || "0", decimals), numbers),
    };
    const confirmations = document.getElementById("payment-confirmations");
    if (confirmations && payment.status !== "pending") {
      setText(confirmations, `(${shop.fill(confirmations.dataset.template, numbers)})`);
    }
    // The "we see it arriving" story counts the confirmations in place (any other story is the server's alone).
    const state = document.getElementById("payment-state");
    const notice = state && state.querySelector("[data-story=detected] [data-live-notice]");
    if (notice && payment.status === "detected") setText(notice, shop.fill(state.dataset.detectedTemplate, numbers));
  }

  /** The timeline moves on to the confirmations once the transfer is seen (the page does not reload for it). */
  function showTimeline(payment) {
    if (payment.status !== "detected") return;
    const seen = document.querySelector("#order-timeline [data-step=seen]");
    const confirmations = document.querySelector("#order-timeline [data-step=confirmations]");
    if (!seen || !confirmations || !seen.classList.contains("timeline__step--current")) return;
    seen.classList.replace("timeline__step--current", "timeline__step--done");
    seen.removeAttribute("aria-current");
    confirmations.classList.replace("timeline__step--todo", "timeline__step--current");
    confirmations.setAttribute("aria-current", "step");
  }

  /** The preparation's progress bars; false when the runs on the page are not the API's any more. */
  function showProgress(runs) {
    const bars = document.querySelectorAll("#preparation-progress progress");
    if (bars.length !== runs.length) return runs.length === 0;
    runs.forEach((run, index) => {
      const bar = document.getElementById(`run-${index + 1}`);
      const label = document.getElementById(`run-${index + 1}-label`);
      if (!bar) return;
      bar.value = run.progress;
      setText(bar, `${run.progress} %`);
      setText(label, `${run.node}: ${run.step || run.status}`);
    });
    return true;
  }

  // A form on its way (the customer pressed "I have paid"): its answer is the next page, no reload.
  let submitting = false;
  document.addEventListener("submit", () => {
    submitting = true;
  });

  /** The page this order lives at: after the "I have paid" form failed, the URL is the form's. */
  function reloadPage() {
    if (submitting) return;
    const here = window.location.pathname;
    const home = data.pageUrl;
    if (home && here !== home) window.location.replace(home);
    else window.location.reload();
  }

  /** Reload, but not under the customer's fingers: wait while they type in a field. */
  function reloadWhenIdle() {
    const active = document.activeElement;
    const typing = active && active.matches("input:not([readonly]):not([type=radio]):not([type=checkbox]), textarea");
    if (typing && active.value !== active.defaultValue) {
      // Leaving the field may be pressing the form's button: let its submit event come first.
      active.addEventListener("blur", () => window.setTimeout(reloadWhenIdle, 300), { once: true });
      return;
    }
    reloadPage();
  }

  /** Apply one API answer; false when polling should stop. */
  function apply(order) {
    const payment = order.payment || {};
    // Money seen (or more of it) is a new story: the server decides whether the card goes (the whole amount) or
    // asks for what is missing, so the page comes back from it.
    const paymentMovedOn = payment.status !== paymentStatus || (payment.received_base_units || "0") !== receivedShown;
    const extensionsMoved = order.extensions !== undefined && extensionStatesOf(order) !== extensionStates;
    if (order.status !== orderStatus || paymentMovedOn || extensionsMoved) {
      reloadWhenIdle();
      return false;
    }
    paymentStatus = payment.status;
    showPayment(payment);
    showTimeline(payment);
    if (!showProgress(order.preparation_progress || [])) {
      reloadWhenIdle();
      return false;
    }
    return isLive(orderStatus, paymentStatus);
  }

  function poll() {
    if (!isLive(orderStatus, paymentStatus)) return;
    const base = (Number.parseInt(data.pollSeconds, 10) || 2) * 1000;
    let quiet = base; // the wait after the last answer, growing while nothing changes
    let failures = 0;
    let etag = "";
    let lastAnswer = "";
    let timer = null;
    let inFlight = false;
    let stopped = false;

    function delay() {
      if (failures) return Math.min(quiet * 2 ** Math.min(failures, 2), MAX_DELAY_MS); // busy or restarting
      return quiet;
    }

    function schedule() {
      window.clearTimeout(timer);
      if (!stopped) timer = window.setTimeout(once, delay());
    }

    function unchanged() {
      quiet = Math.min(quiet * BACKOFF, QUIET_DELAY_MS);
    }

    function once() {
      if (stopped || inFlight) return;
      if (document.hidden) return; // resumed by visibilitychange
      inFlight = true;
      const headers = { Accept: "application/json", "X-Order-Token": data.orderToken };
      if (etag) headers["If-None-Match"] = etag;
      // A conditional request of the script's own: the browser passes the 304 through instead of its copy.
      fetch(data.apiUrl, { headers, credentials: "same-origin", cache: "no-store" })
        .then((response) => {
          clockFrom(response);
          if (response.status === 404) {
            stopped = true; // the link no longer opens the order: nothing to follow
            return null;
          }
          if (response.status === 304) {
            failures = 0;
            unchanged();
            return null;
          }
          if (!response.ok) throw new Error(`HTTP ${response.status}`);
          etag = response.headers.get("ETag") || "";
          return response.json();
        })
        .then((order) => {
          if (!order) return;
          failures = 0;
          const answer = JSON.stringify([order.status, order.payment, order.preparation_progress, order.extensions]);
          if (answer !== lastAnswer) {
            quiet = lastAnswer ? base : quiet * BACKOFF; // the first answer is the page itself
            lastAnswer = answer;
          } else {
            unchanged();
          }
          if (!apply(order)) stopped = true;
        })
        .catch(() => {
          failures += 1; // the network or the server hiccuped: try again, less often
        })
        .finally(() => {
          inFlight = false;
          schedule();
        });
    }

    function now() {
      if (!document.hidden && !stopped) {
        window.clearTimeout(timer);
        once();
      }
    }

    document.addEventListener("visibilitychange", now);
    window.addEventListener("focus", now);
    schedule();
  }

  /** A form that failed ("I have paid" with a bad hash) answers at the form's URL: the address bar goes back to
   * the page's own, so that a reload reads the page instead of posting the form again. */
  function forgetTheFormsPost() {
    const home = data.pageUrl;
    if (home && window.location.pathname !== home && window.history.replaceState) {
      window.history.replaceState(null, "", home + window.location.hash);
    }
  }

  forgetTheFormsPost();
  countdowns();
  poll();
})();
