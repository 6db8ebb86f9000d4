"""Schedule n messages, one call at a time or in batches, and print the time and CPU it took (JSON).

The bench's "clients" scenario runs it beside the Go and Node.js producers
(bench/clients.go): messages due in 1 h, generated ids, payloads of a given
size, nothing else on the queue.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import redis  # noqa: E402

import delaystream  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--addr", required=True)
    p.add_argument("--queue", default="bench")
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--mode", choices=("one", "batch"), required=True)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--payload", type=int, default=128)
    a = p.parse_args()
    host, port = a.addr.rsplit(":", 1)
    q = delaystream.Queue(redis.Redis(host=host, port=int(port)), a.queue)
    payload = b"x" * a.payload
    q.get("warm-up")  # the queue's record, checked once before the clock starts
    t0, c0 = time.perf_counter(), time.process_time()
    if a.mode == "one":
        for _ in range(a.n):
            q.schedule(payload, after=3600)
    else:
        for i in range(0, a.n, a.batch):
            q.schedule_batch([delaystream.Message(payload, after=3600) for _ in range(min(a.batch, a.n - i))])
    print(json.dumps({"elapsed_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
