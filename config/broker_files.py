"""kombu's filesystem transport with messages that appear whole: `make run`'s server-less broker.

kombu writes a message file in place (locked, but its reader takes no lock): a worker that lists the folder while
a message is being written moves and reads an empty file, and dies on the JSON error (seen under load by the
newcomer's journey test, issue 38). Here each message is written under a name the reader skips, then renamed into
place in one step.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

PARTIAL = ".part"  # the reader takes only names that end in ".<queue>.msg"


class Channel(filesystem.Channel):
    # kombu's filesystem channel takes **kwargs (its fanout passes them), its own base class does not
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        try:
            with open(final + PARTIAL, "wb") as handle:
                handle.write(str_to_bytes(dumps(payload)))
            os.replace(final + PARTIAL, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
