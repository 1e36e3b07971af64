/* The operator console (/ops/) follows what it shows without reloading itself under an operator's hand.
 *
 * Every data-poll-seconds (5 s while a preparation, a move or a recheck runs, 30 s otherwise) it fetches its own
 * URL and compares what the new page says with what this one said when it was opened, leaving out what changes
 * with the clock alone (the ages, marked data-clock). When they differ, it stops looking and shows the notice of
 * #console-changed-notice (its words are the page's, in the operator's language) with a "Reload" button in the
 * #console-changed status region: the operator reloads when they are ready, a form half filled or a text selected
 * stays as it is. It looks only while the page is visible. Without JavaScript the console is a plain page.
 */
(function () {
  "use strict";

  const root = document.querySelector("[data-poll-seconds]");
  const status = document.getElementById("console-changed");
  const notice = document.getElementById("console-changed-notice");
  if (!root || !status || !notice || !window.fetch || !window.DOMParser) return;
  const delay = (Number(root.dataset.pollSeconds) || 30) * 1000;

  // What a console says: its text without the clock's ages and without the notice itself.
  function said(page) {
    const copy = page.cloneNode(true);
    copy.querySelectorAll("[data-clock], #console-changed, template").forEach((el) => el.remove());
    return copy.textContent.replace(/\s+/g, " ").trim();
  }

  const opened = said(root);
  let timer = null;
  let changed = false;

  function tell() {
    changed = true;
    status.replaceChildren(notice.content.cloneNode(true));
    status.querySelector("button").addEventListener("click", () => window.location.reload());
  }

  async function look() {
    timer = null;
    try {
      const answer = await fetch(window.location.pathname + window.location.search, {
        credentials: "same-origin",
        cache: "no-store",
        headers: { Accept: "text/html" },
      });
      // Signed out meanwhile (a redirect to the login) or a server error: nothing to compare; look again later.
      if (answer.ok && !answer.redirected) {
        const page = new DOMParser().parseFromString(await answer.text(), "text/html");
        const now = page.querySelector("[data-poll-seconds]");
        if (now && said(now) !== opened) {
          tell();
          return;
        }
      }
    } catch (error) {
      // The network dropped for a moment: the next look tries again.
    }
    schedule();
  }

  function schedule() {
    if (!changed && !document.hidden && timer === null) timer = window.setTimeout(look, delay);
  }

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      window.clearTimeout(timer);
      timer = null;
    } else {
      schedule();
    }
  });
  schedule();
})();
