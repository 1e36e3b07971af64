/* B200 Pairs: progressive enhancement shared by every page (no framework, no inline script: a strict CSP).
 *
 * Every page works without this file. Words shown come from data attributes the templates render
 * (translated): this file holds none. The helpers are `window.B200Shop`, for order-configure.js and
 * order-status.js; tests/js/ runs them under Node.
 */
(function (root) {
  "use strict";

  /** The customer's locale: the page's language, in the regional variant the browser prefers (en-GB, fr-CA). */
  function customerLocale(pageLanguage, preferred) {
    const language = pageLanguage || "en";
    const base = language.toLowerCase().split("-")[0];
    for (const candidate of preferred || []) {
      if (candidate && candidate.toLowerCase().split("-")[0] === base) {
        try {
          return Intl.getCanonicalLocales(candidate)[0];
        } catch (error) {
          break;
        }
      }
    }
    return language;
  }

  /** `{name}` placeholders filled from `values`; an unknown placeholder stays as it is. */
  function fill(template, values) {
    return String(template || "").replace(/\{(\w+)\}/g, (whole, name) =>
      Object.prototype.hasOwnProperty.call(values, name) ? String(values[name]) : whole
    );
  }

  /* Numbers are written with the server's separators for the page's language (`<html data-number-format>`,
   * Django's), not the browser's Intl: Intl's Spanish leaves "1990" ungrouped and its French groups with a
   * narrow space, so a number the script rewrote would differ from the same number after a reload. */
  const PLAIN_NUMBERS = { decimal: ".", group: ",", grouping: 3 };

  /** The page's number format ({decimal, group, grouping}); the plain English one where there is none. */
  function numberFormatOf(text) {
    const format = jsonData(text) || {};
    return {
      decimal: typeof format.decimal === "string" ? format.decimal : PLAIN_NUMBERS.decimal,
      group: typeof format.group === "string" ? format.group : PLAIN_NUMBERS.group,
      grouping: Number.isInteger(format.grouping) && format.grouping > 0 ? format.grouping : PLAIN_NUMBERS.grouping,
    };
  }

  /** A plain decimal string ("-1990.5", as the server computes it) with the page's separators, every digit
   * kept and the whole part grouped, as Django's number_format(force_grouping=True) writes it. */
  function localizeDecimal(text, numbers) {
    const format = numbers || PLAIN_NUMBERS;
    const match = /^(-?)(\d+)(?:\.(\d+))?$/.exec(String(text).trim());
    if (!match) return String(text);
    const [, sign, whole, fraction] = match;
    const groups = [];
    for (let end = whole.length; end > 0; end -= format.grouping) {
      groups.unshift(whole.slice(Math.max(0, end - format.grouping), end));
    }
    return sign + groups.join(format.group) + (fraction !== undefined ? format.decimal + fraction : "");
  }

  function formatInteger(value, numbers) {
    return localizeDecimal(String(Math.trunc(value)), numbers);
  }

  /** An amount in cents (an integer), shown with two decimals in the page's number format. */
  function formatCents(cents, numbers) {
    const sign = cents < 0 ? "-" : "";
    const whole = Math.abs(Math.round(cents));
    return localizeDecimal(`${sign}${Math.floor(whole / 100)}.${String(whole % 100).padStart(2, "0")}`, numbers);
  }

  /** "1990.00" (a decimal string, as the server writes it) -> 199000 cents, in integers only. */
  function parseCents(text) {
    const match = /^\s*(\d+)(?:\.(\d{0,2})\d*)?\s*$/.exec(String(text));
    if (!match) return NaN;
    return Number(match[1]) * 100 + Number((match[2] || "").padEnd(2, "0"));
  }

  /** The plural form (`{"one": "{n} lot", "other": "{n} lots"}`) for n (the locale's plural rules), with n
   * in the page's number format. */
  function pluralText(forms, count, locale, numbers) {
    let category = "other";
    try {
      category = new Intl.PluralRules(locale).select(count);
    } catch (error) {
      /* an unknown locale: "other" */
    }
    const form = forms[category] !== undefined ? forms[category] : forms.other;
    return fill(form, { n: formatInteger(count, numbers) });
  }

  /** Base units (an integer string) as an exact decimal string in whole units, like the server's format_units. */
  function formatUnits(baseUnits, decimals) {
    let units = BigInt(baseUnits);
    const sign = units < 0n ? "-" : "";
    if (units < 0n) units = -units;
    const scale = 10n ** BigInt(decimals);
    let text = sign + (units / scale).toString();
    const fraction = units % scale;
    if (decimals > 0 && fraction > 0n) {
      text += "." + fraction.toString().padStart(decimals, "0").replace(/0+$/, "");
    }
    return text;
  }

  /** Milliseconds since the epoch of an ISO 8601 time (Python writes microseconds: kept to milliseconds). */
  function parseIso(text) {
    return Date.parse(String(text || "").replace(/(\.\d{3})\d+/, "$1"));
  }

  /** Seconds left as a clock: "29:41", "1:02:03", with the locale's digits. */
  function formatClock(seconds, locale) {
    const total = Math.max(0, Math.floor(seconds));
    const two = new Intl.NumberFormat(locale, { minimumIntegerDigits: 2, useGrouping: false });
    const one = new Intl.NumberFormat(locale, { useGrouping: false });
    const hours = Math.floor(total / 3600);
    const minutes = Math.floor((total % 3600) / 60);
    const rest = total % 60;
    if (hours > 0) return `${one.format(hours)}:${two.format(minutes)}:${two.format(rest)}`;
    return `${one.format(minutes)}:${two.format(rest)}`;
  }

  /** Date and time in the customer's time zone and locale, with the zone named. */
  function formatDateTime(milliseconds, locale, timeZone) {
    const options = {
      year: "numeric",
      month: "short",
      day: "numeric",
      hour: "numeric",
      minute: "2-digit",
      timeZoneName: "short",
    };
    if (timeZone) options.timeZone = timeZone;
    return new Intl.DateTimeFormat(locale, options).format(new Date(milliseconds));
  }

  /** Parse a JSON data attribute; an empty object when it is missing or broken. */
  function jsonData(text) {
    try {
      return JSON.parse(text || "{}");
    } catch (error) {
      return {};
    }
  }

  const helpers = {
    customerLocale,
    fill,
    numberFormatOf,
    localizeDecimal,
    formatInteger,
    formatCents,
    parseCents,
    pluralText,
    formatUnits,
    parseIso,
    formatClock,
    formatDateTime,
    jsonData,
  };

  if (typeof module === "object" && module.exports) {
    module.exports = helpers;
  }
  if (typeof document === "undefined") return;

  /* ---- In the browser ---- */

  function locale() {
    return customerLocale(document.documentElement.lang, navigator.languages || [navigator.language]);
  }

  /** The number format the server wrote the page in (Django's separators for its language). */
  function numberFormat() {
    return numberFormatOf(document.documentElement.dataset.numberFormat);
  }

  /** One polite live region for short announcements ("Copied"), made at start so that it is announced. */
  let announcer = null;
  function makeAnnouncer() {
    announcer = document.createElement("p");
    announcer.className = "visually-hidden";
    announcer.setAttribute("role", "status");
    announcer.setAttribute("aria-live", "polite");
    announcer.id = "js-announcer";
    document.body.appendChild(announcer);
  }
  function announce(text) {
    if (!announcer) makeAnnouncer();
    announcer.textContent = "";
    // A new node after a tick, so that the same text twice is announced twice.
    window.setTimeout(() => {
      announcer.textContent = text;
    }, 50);
  }

  /** `<time datetime>` inside `[data-local-times]`: the server's UTC text becomes the customer's local time. */
  function localTimes() {
    const where = locale();
    document.querySelectorAll("[data-local-times] time[datetime]").forEach((element) => {
      const value = element.getAttribute("datetime");
      if (!value.includes("T")) return; // a date alone has no time zone to convert
      const milliseconds = parseIso(value);
      if (Number.isNaN(milliseconds)) return;
      if (!element.title) element.title = element.textContent.trim();
      element.textContent = formatDateTime(milliseconds, where);
    });
  }

  function labelIdOf(field) {
    if (field.dataset.copyLabelledby) return field.dataset.copyLabelledby;
    const label = field.labels && field.labels[0];
    if (!label) return "";
    if (!label.id) label.id = `${field.id || "copy"}-label`;
    return label.id;
  }

  function selectContents(field) {
    if (typeof field.select === "function") {
      field.focus();
      field.select();
    } else {
      const range = document.createRange();
      range.selectNodeContents(field);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
    }
    try {
      return document.execCommand("copy");
    } catch (error) {
      return false;
    }
  }

  function copyValue(field) {
    // data-copy-value: what a wallet accepts ("899.00", the address without its gaps) where the page shows
    // the text for people (the locale's "899,00", the address in groups).
    const shown = field.tagName === "INPUT" || field.tagName === "TEXTAREA" ? field.value : field.textContent.trim();
    const text = field.dataset.copyValue || shown;
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).then(
        () => true,
        () => selectContents(field)
      );
    }
    return Promise.resolve(selectContents(field));
  }

  /** A "Copy" button beside each `[data-copy]` field; the result is announced politely. */
  function copyButtons() {
    const texts = document.querySelector("[data-text-copy]");
    if (!texts) return;
    const { textCopy, textCopied, textCopyFailed } = texts.dataset;
    document.querySelectorAll("[data-copy]").forEach((field, index) => {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "button button--small copy-button";
      button.id = `copy-button-${index + 1}`;
      button.textContent = textCopy;
      const labelId = labelIdOf(field);
      if (labelId) button.setAttribute("aria-labelledby", `${button.id} ${labelId}`);
      if (field.tagName === "INPUT") {
        const row = document.createElement("div");
        row.className = "copy-row";
        field.parentNode.insertBefore(row, field);
        row.appendChild(field);
        row.appendChild(button);
      } else {
        button.classList.add("copy-button--inline");
        field.after(button);
      }
      let restore = null;
      button.addEventListener("click", () => {
        copyValue(field).then((copied) => {
          announce(copied ? textCopied : textCopyFailed);
          if (!copied) return;
          button.textContent = textCopied;
          window.clearTimeout(restore);
          restore = window.setTimeout(() => {
            button.textContent = textCopy;
          }, 2000);
        });
      });
    });
  }

  root.B200Shop = Object.assign({}, helpers, { locale, numberFormat, announce });

  function start() {
    localTimes();
    copyButtons();
    if (document.querySelector("[data-text-copy]")) makeAnnouncer();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})(typeof window !== "undefined" ? window : globalThis);
