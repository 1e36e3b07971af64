"""The shop on a phone (390×844) and in dark mode: the home page, the fit advisor with its verdict, the four steps
of the order and the order page placed from them. On the phone no page scrolls sideways, every control is a
44 px touch target, and the home page's price table scrolls inside its own box, which a keyboard can reach;
`page_checks` screenshots and runs axe-core on each page at 1280 px, at 390 px and at 390 px in dark mode.
The languages are the journey's (test_journey.py): this module stays in English."""

from __future__ import annotations

import re

import pytest

from tests.browser.checks import PHONE, axe_clean

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

TARGET_PX = 44  # WCAG 2.5.5: the bar for every control on a phone
# Every control a finger presses: buttons, links styled as buttons, disclosure summaries, selects and inputs;
# a radio button or a checkbox is pressed through its label too, so its hit area is the taller of the two.
# Plain text links inside sentences are exempt (WCAG 2.5.8's inline exception).
SMALL_TARGETS = """(target) => {
  const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
    + [...el.classList].map(c => "." + c).join("") + (el.name ? `[name=${el.name}]` : "");
  const small = [];
  const controls = "button, a.button, summary, select, textarea, input:not([type=hidden])";
  for (const el of document.querySelectorAll(controls)) {
    const box = el.getBoundingClientRect();
    if (!box.width || !box.height || getComputedStyle(el).visibility === "hidden") continue;
    let height = box.height;
    if (el.type === "radio" || el.type === "checkbox") {
      for (const label of el.labels) height = Math.max(height, label.getBoundingClientRect().height);
    }
    if (height < target - 0.5) small.push(`${name(el)}: ${Math.round(box.width)}×${Math.round(height)} px`);
  }
  return small;
}"""
PAGE_WIDTH = "() => document.documentElement.scrollWidth"


def on_a_phone(page, name: str, page_checks) -> None:
    """What every page must pass on the phone, then the screenshots and axe-core in the three variants."""
    assert page.viewport_size == PHONE
    width = page.evaluate(PAGE_WIDTH)
    assert width <= PHONE["width"] + 1, f"{name}: the page is {width} px wide on a {PHONE['width']} px phone"
    small = page.evaluate(SMALL_TARGETS, TARGET_PX)
    assert not small, f"{name}: controls under {TARGET_PX} px high on a phone:\n" + "\n".join(small)
    page_checks(page, name)


@pytest.fixture
def phone(open_context):
    """A customer's browser on a phone, in English."""
    page = open_context("en").new_page()
    page.set_viewport_size(PHONE)
    return page


def test_on_a_phone_the_home_pages_price_table_scrolls_in_its_own_box_reachable_by_keyboard(
    phone, page_checks, no_other_networks
):
    # Given the home page on a phone
    phone.goto("/")
    table = phone.locator(".table-wrap", has=phone.locator("table.price-table"))

    # Then the table is wider than its box, which is a named region in the tab order
    assert table.evaluate("box => box.scrollWidth > box.clientWidth"), "the price table fits: nothing to scroll"
    assert table.get_attribute("role") == "region" and table.get_attribute("tabindex") == "0"
    assert table.evaluate("box => document.getElementById(box.getAttribute('aria-labelledby')).textContent")

    # When a keyboard user tabs to it and presses the right arrow
    for _ in range(40):
        phone.keyboard.press("Tab")
        if table.evaluate("box => box === document.activeElement"):
            break
    else:
        pytest.fail("Tab never reaches the price table")
    phone.keyboard.press("ArrowRight")

    # Then the table scrolls, and the page itself does not
    phone.wait_for_function("() => document.querySelector('.table-wrap[role=region]').scrollLeft > 0")
    on_a_phone(phone, "en-phone-01-home", page_checks)


@pytest.mark.parametrize("language", ["en", "es", "fr"])
def test_on_a_phone_the_home_pages_order_button_is_on_the_first_screen_in_each_language(open_context, language):
    page = open_context(language).new_page()
    page.set_viewport_size(PHONE)

    # Given the home page on a phone, in a language whose words are longer than English ones
    page.goto("/")

    # Then its "Order lots" button is on the first screen (issue 40: 1,061 px down in Spanish)
    button = page.locator(".hero .button--primary").bounding_box()
    assert button and button["y"] + button["height"] <= PHONE["height"], f"the button ends at {button}"

    # And the header's links are touch targets of 44 px (they were the 20 px of their line)
    heights = page.locator(".site-nav a").evaluate_all("links => links.map(a => a.getBoundingClientRect().height)")
    assert heights and min(heights) >= TARGET_PX - 0.5, heights
    header = page.locator(".site-header").bounding_box()
    assert header["height"] <= 160, f"the header takes {header['height']} px of an 844 px screen"


def test_on_a_phone_the_advisors_formulas_never_break_inside_a_number(phone, page_checks, no_other_networks):
    # Given the advisor's verdict for 13B parameters on a phone
    phone.goto("/advisor/")
    on_a_phone(phone, "en-phone-02-advisor", page_checks)
    phone.locator("#id_parameters").fill("13B")
    phone.locator("input[name=precision][value=bf16_mixed]").check()
    phone.locator("input[name=optimizer][value=adamw]").check()
    phone.locator("input[name=strategy][value=sharded]").check()
    phone.locator("form[action$='/advisor/'] button[type=submit]").click()
    phone.locator("#result-title").wait_for()

    # Then each number of the formulas (with its unit) is on one line
    numbers = phone.locator(".formula .formula__number")
    assert "13,000,000,000" in numbers.all_inner_texts()
    broken = numbers.evaluate_all(
        "spans => spans.filter(span => span.getClientRects().length > 1).map(span => span.textContent)"
    )
    assert not broken, f"numbers broken across lines: {broken}"
    breakdown = phone.locator(".advisor-result .table-wrap")
    assert breakdown.evaluate("box => box.scrollWidth <= box.clientWidth"), "the breakdown scrolls on a phone"
    on_a_phone(phone, "en-phone-03-advisor-verdict", page_checks)


def test_on_a_phone_a_customer_orders_through_the_four_steps_and_sees_the_order_page(phone, page_checks, shop):
    # Given the order's first step on a phone
    phone.goto("/order/")
    on_a_phone(phone, "en-phone-04-configure", page_checks)
    phone.locator("input[name=preparation][value='pytorch-blackwell']").check()
    phone.locator("button[name=continue]").click()
    phone.wait_for_url("**/order/contact/")

    # When the customer fills each step
    phone.locator("#id_first_name").fill("Ada")
    phone.locator("#id_last_name").fill("Lovelace")
    phone.locator("#id_email").fill("ada@example.org")
    phone.locator("#id_ssh_public_key").fill(shop.customer_public_key)
    phone.locator("input[name=hypothesis_kind][value=make_possible]").check()
    phone.locator("#id_terms").check()
    on_a_phone(phone, "en-phone-05-contact", page_checks)
    phone.locator("form.form button[type=submit]").click()
    phone.wait_for_url("**/order/payment/")

    # (the choices come before what to know about them: the first is on the first screen)
    first = phone.locator("fieldset.network-group .choice").first.bounding_box()
    assert first and first["y"] + first["height"] <= PHONE["height"], f"the first choice ends at {first}"
    phone.locator("input[name=payment_option][value='local:USDC']").check()
    on_a_phone(phone, "en-phone-06-payment", page_checks)
    phone.locator("form.form button[type=submit]").click()
    phone.wait_for_url("**/order/review/")

    # Then the review names the network as customers know it, and the placed order's page works on the phone
    from payments.models import Network

    payment = phone.locator("section[aria-labelledby=review-payment]").inner_text()
    assert Network.objects.get(slug="local").name in payment and "USDC" in payment
    # and it says each thing once: no summary beside the sections that already list it (issue 40)
    assert phone.locator("[data-summary], .summary").count() == 0
    assert phone.get_by_text("Price per lot", exact=True).count() == 1
    on_a_phone(phone, "en-phone-07-review", page_checks)
    phone.locator("form.form--place button[type=submit]").click()
    phone.wait_for_url(re.compile(r"/o/B2-[A-Z0-9-]+/[^/]+/$"))
    phone.locator("#pay-address").wait_for()
    on_a_phone(phone, "en-phone-08-order", page_checks)


def test_axe_core_finds_no_serious_or_critical_violation_on_a_phone_or_in_dark_mode(page_checks):
    """axe-core ran on every page above at 1280 px, at 390 px and at 390 px in dark mode; this reports it."""
    axe_clean(page_checks, "the page checks")
