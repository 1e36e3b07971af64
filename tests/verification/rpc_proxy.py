"""An RPC provider between the verifier and a real anvil: a loopback HTTP server that forwards JSON-RPC,
and can go down, come back, or lie the ways real providers do (a head ahead of or behind the chain, a
receipt it does not have). A real network hop, not a mock: the verifier talks to it as to any provider.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.servers import free_port


class _Server(ThreadingHTTPServer):
    allow_reuse_address = True  # down() then up() binds the same port again
    daemon_threads = True  # a request held open never keeps the test process alive


class RpcProxy:
    def __init__(self, target: str, *, delay: float = 0.0) -> None:
        self.target = target
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.head_shift = 0  # added to the latest block this provider reports (negative: it lags behind)
        self.drop_receipts: set[str] = set()  # tx hashes whose receipt it answers with null
        self.delay = delay  # seconds before each answer: a healthy but distant provider
        self.trace_value_factor = 1  # call traces show every value multiplied by this: a tracer that lies
        self.refused_tags: set[str] = set()  # block tags it answers with an error ("safe", "finalized")
        # While `hold` is set, a request for a receipt waits until `release` is set: a real slow point.
        self.hold, self.release, self.receipt_requested = threading.Event(), threading.Event(), threading.Event()
        self.requests = 0
        self._server: ThreadingHTTPServer | None = None
        self.up()

    # Going down and coming back: the port stops listening (connection refused), then listens again.
    def up(self) -> None:
        if self._server is not None:
            return
        proxy = self

        class Forward(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                proxy.wait_if_held(body)
                answer = json.dumps(proxy.answer(body)).encode()
                time.sleep(proxy.delay)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                except OSError:
                    pass  # the client is gone (a worker killed while it waited)

            def log_message(self, *args) -> None:
                pass

        self._server = _Server(("127.0.0.1", self.port), Forward)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def wait_if_held(self, body) -> None:
        calls = body if isinstance(body, list) else [body]
        if self.hold.is_set() and any(call.get("method") == "eth_getTransactionReceipt" for call in calls):
            self.receipt_requested.set()
            self.release.wait(30)

    def down(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._server = None

    def stop(self) -> None:
        self.release.set()
        self.down()

    # What it answers.
    def forward(self, body):
        request = urllib.request.Request(self.target, json.dumps(body).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)

    def answer(self, body):
        self.requests += 1
        calls = body if isinstance(body, list) else [body]
        lagging = None
        if self.head_shift < 0:  # a lagging node: its "latest" is an older block, and it knows nothing newer
            real = int(self.forward(_call("eth_blockNumber", []))["result"], 16)
            lagging = max(0, real + self.head_shift)
            calls = [_latest_as(call, hex(lagging)) for call in calls]
        forwarded = [call for call in calls if not (lagging is not None and call.get("method") == "eth_blockNumber")]
        by_id = {answer.get("id"): answer for answer in (self.forward(forwarded) if forwarded else [])}
        answers = []
        for call in calls:
            if call.get("method") == "eth_blockNumber" and lagging is not None:
                answers.append({"jsonrpc": "2.0", "id": call.get("id"), "result": hex(lagging)})
            else:
                answers.append(self._lie(call, by_id.get(call.get("id"), {}), lagging))
        return answers if isinstance(body, list) else answers[0]

    def _lie(self, call: dict, answer: dict, lagging: int | None) -> dict:
        method, params, result = call.get("method"), call.get("params") or [], answer.get("result")
        if method == "eth_getBlockByNumber" and params and params[0] in self.refused_tags:
            return {"jsonrpc": "2.0", "id": call.get("id"), "error": {"code": -32602, "message": "unknown block"}}
        if method == "eth_getTransactionReceipt" and result is not None:
            if params[0].lower() in self.drop_receipts:
                return {**answer, "result": None}
            if lagging is not None and int(result["blockNumber"], 16) > lagging:
                return {**answer, "result": None}
        if method in ("debug_traceTransaction", "debug_traceBlockByNumber") and self.trace_value_factor != 1:
            return {**answer, "result": _scaled_values(result, self.trace_value_factor)}
        if self.head_shift > 0 and result is not None:  # a node that claims blocks the chain does not have
            if method == "eth_blockNumber":
                return {**answer, "result": hex(int(result, 16) + self.head_shift)}
            if method == "eth_getBlockByNumber" and params and params[0] == "latest":
                return {**answer, "result": {**result, "number": hex(int(result["number"], 16) + self.head_shift)}}
        return answer


def _call(method: str, params: list) -> dict:
    return {"jsonrpc": "2.0", "id": 0, "method": method, "params": params}


def _latest_as(call: dict, number: str) -> dict:
    return {**call, "params": [number if param == "latest" else param for param in call.get("params") or []]}


def _scaled_values(trace, factor: int):
    """A call trace (or a block's list of them) with every frame's value multiplied by `factor`."""
    if isinstance(trace, list):
        return [_scaled_values(item, factor) for item in trace]
    if not isinstance(trace, dict):
        return trace
    scaled = {key: _scaled_values(value, factor) for key, value in trace.items()}
    if isinstance(trace.get("value"), str) and trace["value"].startswith("0x"):
        scaled["value"] = hex(int(trace["value"], 16) * factor)
    return scaled
