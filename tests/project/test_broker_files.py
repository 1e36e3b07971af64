"""`make run`'s server-less broker (config/broker_files.py): a message being written is never read. kombu's own
filesystem transport writes in place, and a worker that listed the folder meanwhile read an empty file and died
(the newcomer's journey test saw it under load)."""

from __future__ import annotations

from queue import Empty

import pytest
from kombu import Connection


@pytest.fixture
def channel(tmp_path):
    folders = {"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path), "store_processed": False}
    with Connection("filesystem://", transport="config.broker_files:Transport", transport_options=folders) as conn:
        yield conn.channel(), tmp_path


def test_a_message_still_being_written_is_skipped_and_a_written_one_is_read_whole(channel):
    channel, folder = channel
    # Given a message another process is still writing (its partial name, empty so far)
    (folder / "1_0b1e.celery.msg.part").write_bytes(b"")

    # Then the worker does not take it
    with pytest.raises(Empty):
        channel._get("celery")

    # When a message is put, then it is read whole, and it left no partial file of its own
    channel._put("celery", {"body": "hello", "properties": {}})
    assert channel._get("celery") == {"body": "hello", "properties": {}}
    assert sorted(path.name for path in folder.iterdir()) == ["1_0b1e.celery.msg.part"]
