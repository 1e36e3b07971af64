"""A small HTTP load generator, run as its own process by bench/load.py: N threads, one keep-alive-capable
connection each (gunicorn's sync workers close every connection: the client reconnects, as browsers do),
a warm-up, then a fixed measuring window. Prints one JSON line: requests/s, p50 and p99 latency.

    python bench/loadgen.py --port 8000 --path / [--method POST --body '{...}'] [--connections 8]
"""

from __future__ import annotations

import argparse
import http.client
import json
import threading
import time


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def worker(args, headers: dict[str, str], body: bytes | None, start: float, stop: float, out: dict) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", args.port, timeout=30)
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    errors = 0
    while True:
        began = time.perf_counter()
        if began >= stop:
            break
        try:
            connection.request(args.method, args.path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            if response.getheader("Connection", "").lower() == "close":
                connection.close()  # the next request opens a new connection
        except (OSError, http.client.HTTPException):
            connection.close()
            errors += 1
            continue
        ended = time.perf_counter()
        if began >= start:  # the warm-up's requests are not counted
            latencies.append(ended - began)
            statuses[response.status] = statuses.get(response.status, 0) + 1
    connection.close()
    out.update(latencies=latencies, statuses=statuses, errors=errors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--method", default="GET")
    parser.add_argument("--body", default=None, help="a JSON body (sent as application/json)")
    parser.add_argument("--header", action="append", default=[], help="Name: value")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--duration", type=float, default=5.0)
    args = parser.parse_args()

    headers = {"Host": "127.0.0.1", "Accept-Encoding": "identity"}
    for line in args.header:
        name, _sep, value = line.partition(":")
        headers[name.strip()] = value.strip()
    body = args.body.encode() if args.body is not None else None
    if body is not None:
        headers["Content-Type"] = "application/json"

    start = time.perf_counter() + args.warmup
    stop = start + args.duration
    outputs: list[dict] = [{} for _ in range(args.connections)]
    threads = [
        threading.Thread(target=worker, args=(args, headers, body, start, stop, outputs[i]), daemon=True)
        for i in range(args.connections)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=args.warmup + args.duration + 60)

    latencies = sorted(value for output in outputs for value in output.get("latencies", []))
    statuses: dict[str, int] = {}
    for output in outputs:
        for status, count in output.get("statuses", {}).items():
            statuses[str(status)] = statuses.get(str(status), 0) + count
    print(
        json.dumps(
            {
                "requests": len(latencies),
                "seconds": args.duration,
                "rps": len(latencies) / args.duration,
                "p50_ms": percentile(latencies, 0.50) * 1000,
                "p99_ms": percentile(latencies, 0.99) * 1000,
                "statuses": statuses,
                "errors": sum(output.get("errors", 0) for output in outputs),
                "connections": args.connections,
            }
        )
    )


if __name__ == "__main__":
    main()
