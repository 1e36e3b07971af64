"""The API's JSON parser (DEFAULT_PARSER_CLASSES): DRF's, but a body nested too deeply is a 400, not a crash."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from typing import IO

from django.utils.translation import gettext as _
from rest_framework import parsers
from rest_framework.exceptions import ParseError

MAX_JSON_DEPTH = 64  # our bodies are two levels deep; nothing legitimate comes near this
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_A_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))


def json_nesting_exceeds(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when `body` nests arrays/objects deeper than about `limit` (or its brackets do not pair up).

    Checked before parsing: json's C decoder recurses once per level, and where the recursion limit has been
    raised (as test tools do) `[[[[...` 100,000 deep overflows the C stack and kills the process. Each round
    below removes the innermost level at C speed, so the check costs at most `limit` passes over the body.
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_A_BRACKET)
    for _level in range(limit):
        inner = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if not inner:
            return False
        if inner == brackets:  # nothing pairs up: not JSON, and the parser must not recurse into it
            return True
        brackets = inner
    return True


class JSONParser(parsers.JSONParser):
    def parse(
        self,
        stream: IO[bytes] | None,
        media_type: str | None = None,
        parser_context: Mapping[str, object] | None = None,
    ) -> dict[str, object]:
        body = stream.read() if stream is not None else b""
        if json_nesting_exceeds(body):
            raise ParseError(_("JSON parse error: the body is nested too deeply."))
        try:
            return super().parse(io.BytesIO(body), media_type, parser_context)
        except RecursionError:  # a lower recursion limit than the depth check allows for
            raise ParseError(_("JSON parse error: the body is nested too deeply.")) from None
