/* The configure step: the summary follows the form as the customer changes it (lots, duration, preparation).
 *
 * Without JavaScript the "Update summary" button recomputes it on the server; the server stays the
 * authority on price and availability when the form is sent. Numbers come from data attributes
 * (`data-price-per-lot` on each duration, `data-gpus-per-lot` on the summary), words from the
 * templates' translated plural forms (`data-*-forms`).
 */
(function () {
  "use strict";

  const shop = window.B200Shop;
  const summary = document.querySelector("[data-summary]");
  const form = document.querySelector("form[data-summary-form]");
  if (!shop || !summary || !form) return;

  const locale = shop.locale();
  const numbers = shop.numberFormat();
  const gpusPerLot = Number.parseInt(summary.dataset.gpusPerLot, 10);
  const forms = {
    cards: shop.jsonData(summary.dataset.cardsForms),
    lots: shop.jsonData(summary.dataset.lotsForms),
    days: shop.jsonData(summary.dataset.daysForms),
    rental: shop.jsonData(summary.dataset.rentalForms),
  };

  function field(name) {
    return summary.querySelector(`[data-summary-field="${name}"]`);
  }

  /** A field's new text; `data-template` (as "{amount} USD") wraps the value where the field has one. */
  function show(name, value) {
    const element = field(name);
    if (!element) return;
    const text = element.dataset.template ? shop.fill(element.dataset.template, { amount: value }) : value;
    if (element.textContent !== text) element.textContent = text;
  }

  /** The lots typed, or null while the field holds no whole number within its bounds. */
  function lotsChosen() {
    const input = form.elements.namedItem("lots");
    if (!input || !/^\s*\d+\s*$/.test(input.value)) return null;
    const lots = Number.parseInt(input.value, 10);
    const max = Number.parseInt(input.max, 10);
    if (lots < 1 || (max && lots > max)) return null;
    return lots;
  }

  function update() {
    const lots = lotsChosen();
    const duration = form.querySelector('input[name="duration_days"]:checked');
    if (lots === null || !duration || !Number.isInteger(gpusPerLot)) return;
    const days = Number.parseInt(duration.value, 10);
    const pricePerLot = shop.parseCents(duration.dataset.pricePerLot);
    if (!Number.isInteger(days) || Number.isNaN(pricePerLot)) return;
    const cards = lots * gpusPerLot;

    show("lots", shop.formatInteger(lots, numbers));
    show("cards", shop.pluralText(forms.cards, cards, locale, numbers));
    show("lots-detail", shop.pluralText(forms.lots, lots, locale, numbers));
    show("duration", shop.pluralText(forms.days, days, locale, numbers));
    show("gpu-hours", shop.formatInteger(cards * days * 24, numbers));
    show("price-per-lot", shop.formatCents(pricePerLot, numbers));
    show("total", shop.formatCents(pricePerLot * lots, numbers));
    show("rental", shop.pluralText(forms.rental, days, locale, numbers));

    const purpose = document.getElementById(duration.getAttribute("aria-describedby") || "");
    if (purpose) show("purpose", purpose.textContent.trim());
    const preparation = form.querySelector('input[name="preparation"]:checked');
    const title = preparation && preparation.labels[0] && preparation.labels[0].querySelector(".choice__title");
    if (title) show("preparation", title.textContent.trim());
  }

  form.addEventListener("input", update);
  form.addEventListener("change", update);
  update();
})();
