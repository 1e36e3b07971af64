// The pure helpers of static/js/site.js, under Node's own test runner (`node --test tests/js/`).
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const shop = require("../../static/js/site.js");

test("the customer's locale is the page's language in the variant the browser prefers", () => {
  assert.equal(shop.customerLocale("en", ["fr-FR", "en-GB", "en-US"]), "en-GB");
  assert.equal(shop.customerLocale("fr", ["fr-CA"]), "fr-CA");
  assert.equal(shop.customerLocale("es", ["en-US"]), "es");
  assert.equal(shop.customerLocale("", []), "en");
});

test("placeholders are filled and unknown ones left alone", () => {
  assert.equal(shop.fill("{a} of {b}", { a: 1, b: 2 }), "1 of 2");
  assert.equal(shop.fill("{a} {missing}", { a: "x" }), "x {missing}");
});

test("prices are read as integer cents", () => {
  assert.equal(shop.parseCents("1990.00"), 199000);
  assert.equal(shop.parseCents("899"), 89900);
  assert.equal(shop.parseCents("0.5"), 50);
  assert.ok(Number.isNaN(shop.parseCents("abc")));
});

// What the server writes in <html data-number-format> (Django's formats for en, es and fr).
const EN = shop.numberFormatOf('{"decimal": ".", "group": ",", "grouping": 3}');
const ES = shop.numberFormatOf('{"decimal": ",", "group": "\\u00a0", "grouping": 3}');
const FR = ES;

test("amounts are written with the page's separators, as the server writes them", () => {
  assert.equal(shop.formatCents(597000, EN), "5,970.00");
  assert.equal(shop.formatCents(89900, FR), "899,00");
  // Intl's Spanish leaves 1990 ungrouped; the server (and so a reload) writes "1 990,00"
  assert.equal(shop.formatCents(199000, ES), "1\u00a0990,00");
  assert.equal(shop.formatInteger(1990, ES), "1\u00a0990");
  assert.equal(shop.formatInteger(1234567, EN), "1,234,567");
  assert.equal(shop.formatCents(5, EN), "0.05");
});

test("an exact amount keeps every digit and only its separators change", () => {
  assert.equal(shop.localizeDecimal("0.663334", FR), "0,663334");
  assert.equal(shop.localizeDecimal("4740.000001", ES), "4\u00a0740,000001");
  assert.equal(shop.localizeDecimal("-12345.5", EN), "-12,345.5");
  assert.equal(shop.localizeDecimal("not a number", EN), "not a number");
});

test("a page with no number format, or a broken one, is written the plain English way", () => {
  const plain = shop.numberFormatOf("");
  assert.equal(shop.formatCents(123456, plain), "1,234.56");
  assert.equal(shop.formatInteger(1000, shop.numberFormatOf("null")), "1,000");
  assert.equal(shop.formatInteger(1000, shop.numberFormatOf('{"grouping": 0}')), "1,000");
});

test("plural forms follow the language's rules and format the number", () => {
  const forms = { one: "{n} lot", other: "{n} lots" };
  assert.equal(shop.pluralText(forms, 1, "en", EN), "1 lot");
  assert.equal(shop.pluralText(forms, 3, "en", EN), "3 lots");
  // French: 0 and 1 take the singular
  assert.equal(shop.pluralText({ one: "{n} carte", other: "{n} cartes" }, 0, "fr", FR), "0 carte");
  assert.equal(shop.pluralText({ one: "{n} hora", other: "{n} horas" }, 1440, "es", ES), "1\u00a0440 horas");
  // A category the template did not render falls back to "other"
  assert.equal(shop.pluralText({ other: "{n} x" }, 1, "en", EN), "1 x");
});

test("base units become the same exact decimal string as the server's format_units", () => {
  assert.equal(shop.formatUnits("1500000", 6), "1.5");
  assert.equal(shop.formatUnits("663333333333333334", 18), "0.663333333333333334");
  assert.equal(shop.formatUnits("1000000000000000000", 18), "1");
  assert.equal(shop.formatUnits("0", 18), "0");
  assert.equal(shop.formatUnits("115792089237316195423570985008687907853269984665640564039457584007913129639935", 6),
    "115792089237316195423570985008687907853269984665640564039457584007913129.639935");
});

test("ISO times with microseconds (as Python writes them) are parsed", () => {
  assert.equal(shop.parseIso("2026-12-02T13:39:46.867231+00:00"), Date.UTC(2026, 11, 2, 13, 39, 46, 867));
  assert.equal(shop.parseIso("2026-12-02T13:39:46+00:00"), Date.UTC(2026, 11, 2, 13, 39, 46));
  assert.ok(Number.isNaN(shop.parseIso("")));
});

test("the countdown reads as a clock", () => {
  assert.equal(shop.formatClock(1781, "en"), "29:41");
  assert.equal(shop.formatClock(59, "en"), "0:59");
  assert.equal(shop.formatClock(3723, "en"), "1:02:03");
  assert.equal(shop.formatClock(-5, "en"), "0:00");
});

test("dates are shown in the customer's time zone, with the zone named", () => {
  const at = Date.UTC(2026, 11, 2, 13, 39);
  assert.match(shop.formatDateTime(at, "en-GB", "Europe/Paris"), /2 Dec 2026, 14:39 CET/);
  assert.match(shop.formatDateTime(at, "en-US", "America/New_York"), /Dec 2, 2026, 8:39\sAM EST/);
});

test("a broken JSON data attribute gives an empty object", () => {
  assert.deepEqual(shop.jsonData('{"one": "a"}'), { one: "a" });
  assert.deepEqual(shop.jsonData("{oops"), {});
  assert.deepEqual(shop.jsonData(undefined), {});
});
