"""A subscriber for classic and shard channels, on dedicated connections.

One connection per node (one in all off a Cluster); a thread reads the
notices and hands each to a callback. A connection that fails is made
again, and the callback ``on_connect`` runs after every (re)subscription:
notices sent while it was down are lost, so the owner looks at everything
again then (docs/wire.md, "Arrivals channel").
"""

from __future__ import annotations

import logging
import select
import threading
from typing import Any, Callable, Dict, List, Sequence, Tuple

from . import _raw

log = logging.getLogger("delaystream")

Channel = Tuple[str, bool]  # name, whether it is a shard channel


class Subscriber:
    def __init__(
        self,
        client: Any,
        channels: Sequence[Channel],
        on_message: Callable[[str, bytes], None],
        on_connect: Callable[[], None],
    ) -> None:
        self._client, self._channels = client, list(channels)
        self._on_message, self._on_connect = on_message, on_connect
        self._stop = threading.Event()
        self._conns: List[Any] = []
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="delaystream-subscriber", daemon=True)

    def start(self, timeout: float = 10.0) -> None:
        """Subscribe and start reading; raises what the first subscription met."""
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("delaystream: subscribing timed out")
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._drop()

    def _drop(self) -> None:
        for c in self._conns:
            try:
                c.disconnect()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
        self._conns = []

    def _subscribe(self) -> None:
        by_node: Dict[Tuple[Any, Any], List[Channel]] = {}
        for name, sharded in self._channels:
            kw = _raw.node_client(self._client, name).connection_pool.connection_kwargs
            by_node.setdefault((kw.get("host"), kw.get("port")), []).append((name, sharded))
        for chans in by_node.values():
            conn = _raw.dedicated(self._client, chans[0][0])
            self._conns.append(conn)
            for name, sharded in chans:
                conn.send_command("SSUBSCRIBE" if sharded else "SUBSCRIBE", name)
            # Notices on a channel subscribed first may come before the
            # confirmations of the later ones: handed on as they come.
            waiting = {name for name, _ in chans}
            while waiting:
                reply = conn.read_response()
                kind = _s(reply[0]) if isinstance(reply, list) and reply else ""
                if kind in ("subscribe", "ssubscribe"):
                    waiting.discard(_s(reply[1]))
                elif kind in ("message", "smessage") and len(reply) == 3:
                    self._on_message(_s(reply[1]), reply[2])
                else:
                    raise RuntimeError(f"delaystream: subscribing: unexpected reply {reply!r}")

    def _run(self) -> None:
        delay = 0.1
        while not self._stop.is_set():
            try:
                self._subscribe()
            except Exception as e:  # noqa: BLE001 - retried below
                self._drop()
                if not self._ready.is_set():
                    self._error = e
                    self._ready.set()
                    return
                log.warning("delaystream: subscribing failed, trying again: %s", e)
                self._stop.wait(delay)
                delay = min(delay * 2, 2.0)
                continue
            delay = 0.1
            self._ready.set()
            try:
                self._on_connect()
                self._read()
            except Exception as e:  # noqa: BLE001 - the connection is made again
                if not self._stop.is_set():
                    log.warning("delaystream: subscription lost, subscribing again: %s", e)
            self._drop()

    def _read(self) -> None:
        while not self._stop.is_set():
            for conn in list(self._conns):
                while conn.can_read(timeout=0):
                    msg = conn.read_response()
                    if isinstance(msg, list) and len(msg) == 3 and _s(msg[0]) in ("message", "smessage"):
                        self._on_message(_s(msg[1]), msg[2])
                    elif isinstance(msg, list) and msg and _s(msg[0]) in ("sunsubscribe", "unsubscribe"):
                        # A shard channel's slot moved (a Cluster failover or
                        # resharding): subscribe again where it is now.
                        raise ConnectionError(f"channel {_s(msg[1])!r} unsubscribed by the server")
            socks = [c._sock for c in self._conns if c._sock is not None]
            if len(socks) != len(self._conns):
                raise ConnectionError("connection closed")
            select.select(socks, [], [], 0.2)


def _s(v: Any) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)
