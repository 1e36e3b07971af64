"""What the staff walks (test_staff.py) check on each page beyond checks.py: no English left on a Spanish or French
page, no word broken inside a link, amounts shown whole on a phone.

English is found two ways. Each Spanish or French page is opened again in English, in a browser context with the
same cookies (the same person signed in, the same rows), and every text segment the two share that reads as two
English words or more is reported: whatever was not translated is identical in both. And the English the issue saw
(the admin's header, role and model names, node states, steps) must not appear at all, even where the English page
happens to differ."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# Every text a person meets on the page, one segment per text node, attribute or control: what is read (text shown
# or hidden for screen readers, a cell's label a phone shows with ::before), what is heard (aria-label, title,
# alt) and what is pressed (a submit input's value), and the document's title.
TEXT_SEGMENTS = """() => {
  const segments = [document.title];
  const shown = el => el.closest("option, optgroup") || el.checkVisibility();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (el && !el.closest("script, style, template, noscript") && shown(el)) segments.push(node.textContent);
  }
  const named = "[aria-label], [title], [alt], [placeholder], [data-label], input[type=submit], input[type=button]";
  for (const el of document.body.querySelectorAll(named)) {
    for (const name of ["aria-label", "title", "alt", "placeholder", "data-label"]) {
      if (el.hasAttribute(name)) segments.push(el.getAttribute(name));
    }
    if (el.matches("input[type=submit], input[type=button]")) segments.push(el.value);
  }
  return segments.map(text => text.replace(/\\s+/g, " ").trim()).filter(Boolean);
}"""
# A word as English writes it (letters, an apostrophe, punctuation around it): references, hashes, addresses,
# node names ("staff-node-1"), numbers and symbols written in capitals (USDC, UTC) are not words here.
WORD = re.compile(r"[(\"“]?[A-Za-z][a-z]+(?:'[a-z]+)?[)\"”,.;:!?]*")
# What the issue saw in English on Spanish and French staff pages, matched as whole words. (Words French or Spanish
# share with English, "maintenance", "lot", "total", are not listed.)
ISSUE_ENGLISH = (
    "Django administration",
    "Moves to a spare node",
    "running the GPU preflight",
    "Payment reviewers",
    "Treasurers",
    "Operators",
    "available",
    "days",
    "received",
    "after the deadline",
    "Handle",
    "Ledger",
    "Payment requests",
    "Preparation runs",
    "Background jobs",
    "Provisioning",
    "Payments",
    "Refunds",
    "Nodes",
    "Orders",
    "Shop",
    "Validated PyTorch stack for Blackwell",
)


def english_words(segment: str) -> int:
    return sum(1 for token in segment.split() if WORD.fullmatch(token))


def unwritten(segment: str, written: list[str]) -> str:
    """The segment without what was written as it is (the longest first), whole or cut short with an ellipsis (a
    page that truncates a long reason)."""
    for words in written:
        segment = segment.replace(words, " ")
        start = segment.find(words[:30]) if len(words) > 30 else -1
        if start >= 0:
            shown = segment[start:].split("…", 1)[0]
            if words.startswith(shown):
                segment = segment[:start] + " " + segment[start + len(shown) + 1 :]
    return segment


def bare(segment: str) -> str:
    """A segment without the colon a label ends with (French writes " :", with a no-break space)."""
    return re.sub(r"[\s\u00a0\u202f]*:$", "", segment)


@dataclass
class EnglishLeft:
    """English found on one language's staff pages, page by page, over a walk: reported once at its end, so a
    red run names every page at once. `as_written` gives what stays as it was written in every language, read
    when each page is checked: what people typed (reasons, a customer's hypothesis), records the system keeps
    (events' reasons and actors, a node's log), the names of chains."""

    language: str
    as_written: Callable[[], Iterable[str]] = tuple
    found: dict[str, list[str]] = field(default_factory=dict)  # page name -> English segments

    def check(self, page, name: str) -> None:
        if self.language == "en":
            return
        segments = [bare(segment) for segment in page.evaluate(TEXT_SEGMENTS)]
        english = {bare(segment) for segment in self._english_twin(page)}
        written = sorted(filter(None, self.as_written()), key=len, reverse=True)
        shared = [s for s in segments if s in english and english_words(unwritten(s, written)) >= 2]
        text = "\n".join(unwritten(segment, written) for segment in segments)
        named = [words for words in ISSUE_ENGLISH if re.search(rf"(?<![\w-]){re.escape(words)}(?![\w-])", text)]
        left = sorted(set(shared)) + [f"(named by the issue) {words}" for words in named]
        if left:
            self.found[f"{name} ({page.url})"] = left

    def _english_twin(self, page) -> list[str]:
        """The same URL in English, in a context of its own with the same cookies (the same person signed in)."""
        context = page.context.browser.new_context(
            storage_state=page.context.storage_state(), locale="en", extra_http_headers={"Accept-Language": "en"}
        )
        try:
            twin = context.new_page()
            twin.goto(page.url)
            assert twin.locator("html").get_attribute("lang") == "en", "the twin page is not in English"
            return twin.evaluate(TEXT_SEGMENTS)
        finally:
            context.close()

    def report(self) -> str:
        return "\n".join(
            f"{page}:\n" + "\n".join(f"    {segment}" for segment in segments) for page, segments in self.found.items()
        )


# Words broken across lines inside links: each word of each link's text, measured as a range (one box per line).
LINK_WORDS_BROKEN = """(root) => {
  const broken = [];
  for (const link of document.querySelectorAll(root + " a")) {
    const walker = document.createTreeWalker(link, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.textContent.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(`${word[0]} (on ${lines.size} lines, in ${link.getAttribute("href")})`);
      }
    }
  }
  return broken;
}"""

# The top of the page's first element matching the selector and its bottom, in the page (not the viewport).
PLACE = """(selector) => {
  const box = document.querySelector(selector).getBoundingClientRect();
  return {top: box.top + scrollY, bottom: box.bottom + scrollY};
}"""

# Each amount cell of the ledger as a phone shows it: its text, whether the text fits its cell, and whether the
# cell lies inside the viewport (the page does not scroll sideways, and no box hides it).
AMOUNT_CELLS = """(selector) => [...document.querySelectorAll(selector)].map(cell => {
  const box = cell.getBoundingClientRect();
  return {
    text: cell.innerText.trim(),
    fits: cell.scrollWidth <= cell.clientWidth,
    inside: box.left >= 0 && box.right <= document.documentElement.clientWidth,
    width: Math.round(box.width),
    right: Math.round(box.right),
  };
})"""
