"""An RPC provider between the verifier and a real anvil: a loopback HTTP server that forwards JSON-RPC,
and can go down, come back, or lie the ways real providers do (a head ahead of or behind the chain, a
receipt it does not have). A real network hop, not a mock: the verifier talks to it as to any provider.

It also refuses what real providers refuse, with their error shapes (issue 26): `eth_getLogs` over a block
range (QuickNode's "eth_getLogs is limited to a N block range", or Alchemy's -32602 naming a range that
would work), a batch over a size (geth's single -32600 "batch too large" carrying the first call's id), any
batch at all, answers cut short (a batch answer missing calls), answers over a size (geth's -32003 "response
too large" for the calls past it), and one request in N answered HTTP 429 with `Retry-After`.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections import Counter
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
        # Provider limits, None for none.
        self.log_range_cap: int | None = None
        self.log_range_style = "quicknode"  # or "alchemy": -32602 with "this block range should work: [a, b]"
        self.batch_cap: int | None = None
        self.refuse_batches = False
        self.batch_answers_cap: int | None = None  # a batch answer that lists only its first N calls
        # Bytes of results per answer: geth's --rpc.batch-response-max-size (calls past it get -32003).
        self.response_bytes_cap: int | None = None
        self.too_large = 0  # calls answered "response too large"
        self.largest_answer = 0  # bytes of the largest answer sent
        self.methods: Counter[str] = Counter()  # calls received, by method (a batch of n counts n)
        self.batches = 0  # requests that were batches (Infura bills each batch as one more call)
        self.full_blocks = 0  # eth_getBlockByNumber calls that asked for the transactions
        self.answer_bytes = 0
        self.rate_limit_every: int | None = None  # every Nth HTTP request: 429, Retry-After: 1
        # Methods this provider does not serve: answered in an HTTP 200 with -32601, as a plan without them does.
        self.refused_methods: set[str] = set()
        self.drip_seconds: float | None = None  # each byte of an answer this long after the one before
        self.padding = 0  # bytes of spaces before each answer (valid JSON, as large as a provider's worst)
        self.rate_limited = 0
        self.requests = 0
        self.http_requests = 0
        self._count_lock = threading.Lock()
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
                proxy.count(body)
                proxy.wait_if_held(body)
                status, answer = 200, b""
                if proxy.rate_limited_now():
                    status, answer = 429, b'{"jsonrpc":"2.0","error":{"code":-32005,"message":"Too Many Requests"}}'
                else:
                    answer = json.dumps(proxy.limited_answer(body)).encode()
                    proxy.largest_answer = max(proxy.largest_answer, len(answer))
                proxy.answer_bytes += len(answer)
                time.sleep(proxy.delay)
                answer = b" " * proxy.padding + answer
                try:
                    self.send_response(status)
                    if status == 429:
                        self.send_header("Retry-After", "1")
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    if proxy.drip_seconds is None:
                        self.wfile.write(answer)
                    else:  # a slow point on the way: every byte comes, none fast enough to matter
                        for offset in range(len(answer)):
                            self.wfile.write(answer[offset : offset + 1])
                            self.wfile.flush()
                            time.sleep(proxy.drip_seconds)
                except OSError:
                    pass  # the client is gone (a worker killed while it waited, or it gave up)

            def log_message(self, *args) -> None:
                pass

        self._server = _Server(("127.0.0.1", self.port), Forward)
        # A short poll: stop() waits for serve_forever to notice (0.5 s by default, in every test's teardown).
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def count(self, body) -> None:
        calls = body if isinstance(body, list) else [body]
        with self._count_lock:
            self.methods.update(str(call.get("method")) for call in calls if isinstance(call, dict))
            self.batches += isinstance(body, list)
            self.full_blocks += sum(
                1
                for call in calls
                if isinstance(call, dict)
                and call.get("method") == "eth_getBlockByNumber"
                and (call.get("params") or [None, False])[-1] is True
            )

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

    # What it refuses, as providers do.
    def rate_limited_now(self) -> bool:
        with self._count_lock:
            self.http_requests += 1
            limited = bool(self.rate_limit_every) and self.http_requests % self.rate_limit_every == 0
            self.rate_limited += limited
        return limited

    def limited_answer(self, body):
        if isinstance(body, list):
            if self.refuse_batches:
                return {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32600, "message": "batch requests are not supported"},
                }
            if self.batch_cap is not None and len(body) > self.batch_cap:
                first = body[0].get("id") if body else None
                return {"jsonrpc": "2.0", "id": first, "error": {"code": -32600, "message": "batch too large"}}
        refusals = {}
        for call in body if isinstance(body, list) else [body]:
            refusal = self._method_refusal(call) or self._range_refusal(call)
            if refusal is not None:
                refusals[call.get("id")] = refusal
        allowed = [call for call in (body if isinstance(body, list) else [body]) if call.get("id") not in refusals]
        answers = {a.get("id"): a for a in (self.answer(allowed) if allowed else [])}
        merged = [
            refusals.get(call.get("id")) or answers.get(call.get("id"))
            for call in (body if isinstance(body, list) else [body])
        ]
        merged = self._size_capped(merged)
        if not isinstance(body, list):
            return merged[0]
        return merged[: self.batch_answers_cap] if self.batch_answers_cap is not None else merged

    def _size_capped(self, answers: list[dict]) -> list[dict]:
        """As geth: once the answer passes the size cap, every call after it is answered "response too large"."""
        if self.response_bytes_cap is None:
            return answers
        capped, size = [], 0
        for answer in answers:
            size += len(json.dumps(answer))
            if size > self.response_bytes_cap:
                self.too_large += 1
                error = {"code": -32003, "message": "response too large"}
                answer = {"jsonrpc": "2.0", "id": answer.get("id"), "error": error}
            capped.append(answer)
        return capped

    def _method_refusal(self, call: dict) -> dict | None:
        if call.get("method") not in self.refused_methods:
            return None
        message = f"the method {call.get('method')} does not exist/is not available"
        return {"jsonrpc": "2.0", "id": call.get("id"), "error": {"code": -32601, "message": message}}

    def _range_refusal(self, call: dict) -> dict | None:
        if call.get("method") != "eth_getLogs" or self.log_range_cap is None:
            return None
        window = (call.get("params") or [{}])[0]
        first, last = int(window.get("fromBlock", "0x0"), 16), int(window.get("toBlock", "0x0"), 16)
        if last - first + 1 <= self.log_range_cap:
            return None
        if self.log_range_style == "alchemy":
            message = (
                f"Log response size exceeded. You can make eth_getLogs requests with up to a {self.log_range_cap}"
                f" block range and no limit on the response size, or you can request any block range with a cap"
                f" of 10K logs in the response. Based on your parameters, this block range should work:"
                f" [{hex(first)}, {hex(first + self.log_range_cap - 1)}]"
            )
            return {"jsonrpc": "2.0", "id": call.get("id"), "error": {"code": -32602, "message": message}}
        message = f"eth_getLogs is limited to a {self.log_range_cap} block range"
        return {"jsonrpc": "2.0", "id": call.get("id"), "error": {"code": -32614, "message": message}}

    # What it answers.
    def forward(self, body):
        request = urllib.request.Request(self.target, json.dumps(body).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)

    def answer(self, body):
        """What the provider answers to a list of calls (a list) or one call (an object)."""
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
