"""Consume one group with the Python consumer, printing a JSON line per event.

Handlers by id prefix: "ok:" returns; "flaky:" fails its first attempt;
"dead:" asks for the dead letters; "slow:" says it started and then runs
until the process is killed. Lines: {"event": "started"|"handled"|"ready",
...}. SIGTERM stops the consumer cleanly.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

from common import client, parser

import delaystream

lock = threading.Lock()


def say(**kw) -> None:
    with lock:
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()


def handler(d: delaystream.Delivery) -> None:
    if d.id.startswith("slow:"):
        say(event="started", id=d.id, entry=d.entry_id, deliveries=d.deliveries)
        time.sleep(3600)
    if d.id.startswith("flaky:") and d.attempt == 1:
        raise RuntimeError("first attempt fails")
    if d.id.startswith("dead:"):
        raise delaystream.DeadLetter("poison message")
    say(event="handled", id=d.id, attempt=d.attempt, deliveries=d.deliveries, payload_hex=d.payload.hex(),
        headers=d.headers, due_ms=d.due_ms, at_ms=int(time.time() * 1000))


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--group", required=True)
    p.add_argument("--name", required=True)
    args = p.parse_args()
    c = delaystream.Consumer(client(args), args.queue, args.group, handler, name=args.name, prefix=args.prefix,
                             shards=args.shards, visibility_timeout=1.0, max_attempts=3,
                             backoff=delaystream.constant_backoff(0.1), concurrency=4)
    signal.signal(signal.SIGTERM, lambda *_: c.stop())
    t = threading.Thread(target=c.run, daemon=True)
    t.start()
    say(event="ready")
    while t.is_alive():
        t.join(0.2)
    say(event="stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
