"""Schedule a fixed set of messages into a queue, and print what must be delivered (JSON).

Named and generated ids, single calls and a batch, after and at, msgpack,
JSON and raw payloads, headers, cancelled messages (never delivered) and
rescheduled ones. Each expected message: id, payload (hex), headers, and
not_before_ms, the earliest time it may be delivered (Redis clock, from the
scripts' replies).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone

from common import client, parser

import delaystream


def main() -> int:
    args = parser(__doc__).parse_args()
    q = delaystream.Queue(client(args), args.queue, prefix=args.prefix, shards=args.shards)
    out, cancelled = [], []

    def expect(res, payload_bytes, headers):
        out.append({"id": res.id, "payload_hex": payload_bytes.hex(), "headers": headers, "not_before_ms": res.due_ms})

    for i in range(8):
        h = {"lang": "python", "n": str(i)}
        res = q.schedule(f"named {i}".encode(), id=f"py:named:{i}", after=0.3, headers=h)
        expect(res, f"named {i}".encode(), h)
    at = datetime.now(timezone.utc) + timedelta(milliseconds=500)
    for i in range(8):
        res = q.schedule({"n": i}, at=at)  # msgpack, the queue's default codec
        expect(res, delaystream.producer.encode_payload({"n": i}, "msgpack"), {})
    batch = [delaystream.Message(json.dumps({"b": i}).encode(), id=f"py:batch:{i}" if i % 2 else None, after=0.2,
                                 headers={"batch": "1"}) for i in range(20)]
    for m, res in zip(batch, q.schedule_batch(batch)):
        expect(res, m.payload, {"batch": "1"})
    for i in range(5):
        res = q.schedule(b"never", id=f"py:cancel:{i}", after=0.4)
        if not q.cancel(res.id):
            print(f"cancel {res.id}: not waiting", file=sys.stderr)
            return 1
        cancelled.append(res.id)
    gen = q.schedule(b"never either", after=0.4)
    q.cancel(gen.id)
    cancelled.append(gen.id)
    for i in range(5):
        mid = f"py:resched:{i}"
        q.schedule(b"moved", id=mid, after=3600)
        due = q.reschedule(mid, after=0.3)
        out.append({"id": mid, "payload_hex": b"moved".hex(), "headers": {}, "not_before_ms": int(due.timestamp() * 1000)})
    # A duplicate kept: delivered once, with the first payload.
    q.schedule(b"second", id="py:named:0", after=0.3)
    json.dump({"expected": out, "cancelled": cancelled}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
