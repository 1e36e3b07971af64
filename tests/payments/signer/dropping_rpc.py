"""An RPC that drops mid-run: a loopback HTTP proxy in front of a real anvil that forwards JSON-RPC until the
N-th `eth_sendRawTransaction`, forwards that one too (the transaction is in), then closes the connection without
an answer and refuses every connection after it: the signer cannot know whether its last transfer went out.

`before_send(n)` runs before the n-th transaction is forwarded: the chain changing between the signer's checks
and its transfer (a recipient that starts refusing coin)."""

from __future__ import annotations

import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.servers import free_port


class DroppingRpc:
    def __init__(self, target: str, *, sends_before_drop: int = 10**9, before_send=None) -> None:
        self.target, self.left, self.before_send, self.sends = target, sends_before_drop, before_send, 0
        self.url = f"http://127.0.0.1:{free_port()}"
        proxy = self

        class Forward(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                answer, drop = proxy.forward(body)
                if drop:
                    self.close_connection = True
                    threading.Thread(target=proxy.stop, daemon=True).start()
                    return  # no answer at all: the connection closes
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", int(self.url.rsplit(":", 1)[1])), Forward)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.lock = threading.Lock()

    def forward(self, body: bytes) -> tuple[bytes, bool]:
        calls = json.loads(body)
        sends = sum(
            1
            for call in (calls if isinstance(calls, list) else [calls])
            if call.get("method") == "eth_sendRawTransaction"
        )
        with self.lock:
            if self.left <= 0:
                return b"", True
            self.left -= sends
            drop = self.left <= 0
            for _ in range(sends):
                self.sends += 1
                if self.before_send is not None:
                    self.before_send(self.sends)
        request = urllib.request.Request(self.target, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.read(), drop

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
