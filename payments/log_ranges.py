"""How many blocks one eth_getLogs may span, learnt from the providers (issue 26): on a range or result-size
refusal the range is split (to the range the provider's message suggests, else halved), the span that worked is
remembered per network and provider (its URL list) for the process, and it grows back slowly after successes, up
to the network's `max_block_range` (an upper bound, not something staff must tune). The scan's cursor still
moves only past ranges that were read in full."""

from __future__ import annotations

import re
import threading

# The refusals providers send for a range or a result too large (QuickNode, Alchemy, Infura, BlockPI, thirdweb,
# Ankr, geth): their own words.
RANGE_REFUSED = re.compile(
    r"block range|range (is )?too (large|wide|big)|limited to|response size|more than \d+ (results|logs)"
    r"|too many (results|logs)|returned more than|exceed(s|ed)? (the )?max(imum)?|query timeout"
    r"|maximum allowed number of requested blocks",
    re.I,
)
SUGGESTED = re.compile(r"\[\s*(0x[0-9a-f]+)\s*,\s*(0x[0-9a-f]+)\s*\]", re.I)
LIMITED_TO = re.compile(
    r"(?:limited to|up to) (?:an? )?(\d[\d,]*) (?:block )?range|maximum block range (\d+)|requested blocks is (\d+)",
    re.I,
)
GROW_AFTER = 8  # successes at a span before it grows by half


def range_refused(message: str) -> bool:
    return bool(RANGE_REFUSED.search(message))


def span_after_refusal(span: int, message: str) -> int:
    """The span to try after `span` was refused with `message`: the provider's suggestion, else half."""
    suggested = SUGGESTED.search(message)
    if suggested:
        return max(1, min(span - 1, int(suggested.group(2), 16) - int(suggested.group(1), 16) + 1))
    limited = LIMITED_TO.search(message)
    if limited:
        return max(1, min(span - 1, int(next(group for group in limited.groups() if group).replace(",", ""))))
    return max(1, span // 2)


Key = tuple[str, tuple[str, ...]]  # (network slug, the provider's URLs): a change of provider starts afresh


class LogSpans:
    """Per network and provider: the span to ask for, and the successes since it last changed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: dict[Key, tuple[int, int]] = {}

    def span(self, key: Key, cap: int) -> int:
        with self._lock:
            return min(cap, self._spans.get(key, (cap, 0))[0])

    def refused(self, key: Key, span: int, message: str) -> int:
        smaller = span_after_refusal(span, message)
        with self._lock:
            self._spans[key] = (smaller, 0)
        return smaller

    def forget(self) -> None:
        """Back to each network's `max_block_range` (tests: what one learnt never reaches the next)."""
        with self._lock:
            self._spans.clear()

    def worked(self, key: Key, span: int, cap: int) -> None:
        with self._lock:
            current, successes = self._spans.get(key, (cap, 0))
            if current >= cap:
                return
            successes += 1
            if successes >= GROW_AFTER:
                current, successes = min(cap, current + max(1, current // 2)), 0
            self._spans[key] = (current, successes)


LOG_SPANS = LogSpans()
