"""The API's body parsers: DRF's, except that a JSON body nested too deeply is a 400, not a 500."""

from __future__ import annotations

from django.utils.translation import gettext as _
from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            # `[[[[...` a few thousand deep exhausts Python's stack inside json.loads: DRF only turns a
            # ValueError into a 400, so this one escaped as a server error.
            raise ParseError(_("JSON parse error: the body is nested too deeply.")) from None


PARSERS = [JSONParser, parsers.FormParser, parsers.MultiPartParser]
