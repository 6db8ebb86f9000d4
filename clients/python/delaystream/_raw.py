"""Commands redis-py would parse lossily, sent on a connection of the key's node.

redis-py's XAUTOCLAIM reply parser drops the third element Redis 7 returns
(the ids of pending entries deleted from the stream), which a consumer must
dead-letter; and redis-py 4.3 has no SSUBSCRIBE. Both are sent here as
plain commands on a connection of the node that serves the key.
"""

from __future__ import annotations

from typing import Any


def is_cluster(client: Any) -> bool:
    return hasattr(client, "get_node_from_key") and hasattr(client, "nodes_manager")


def node_client(client: Any, key: str) -> Any:
    """The client of the node serving ``key`` (``client`` itself off a Cluster)."""
    if is_cluster(client):
        node = client.get_node_from_key(key)
        if node.redis_connection is None:
            client.nodes_manager.initialize()
            node = client.get_node_from_key(key)
        return node.redis_connection
    return client


def command(client: Any, key: str, *args: Any) -> Any:
    """Send one command unparsed on a pooled connection of ``key``'s node."""
    nc = node_client(client, key)
    pool = nc.connection_pool
    conn = pool.get_connection(args[0])
    try:
        conn.send_command(*args)
        return conn.read_response()
    except BaseException as e:
        conn.disconnect()
        if is_cluster(client) and _topology_changed(e):
            client.nodes_manager.initialize()
        raise
    finally:
        pool.release(conn)


def _topology_changed(e: BaseException) -> bool:
    from redis.exceptions import ConnectionError as RConnectionError
    from redis.exceptions import TimeoutError as RTimeoutError

    return isinstance(e, (RConnectionError, RTimeoutError)) or str(e).startswith(("MOVED", "CLUSTERDOWN"))


def dedicated(client: Any, key: str) -> Any:
    """A new connection of ``key``'s node, not from its pool, connected (for subscriptions)."""
    conn = node_client(client, key).connection_pool.make_connection()
    conn.connect()
    return conn
