"""What the conformance programs share: the client from the command line."""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import redis  # noqa: E402
from redis.cluster import ClusterNode, RedisCluster  # noqa: E402


def parser(doc: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--addr", required=True, help="host:port of the server, or of one Cluster node with --cluster")
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--prefix", required=True)
    p.add_argument("--queue", required=True)
    p.add_argument("--shards", type=int, default=1)
    return p


def client(args):
    host, port = args.addr.rsplit(":", 1)
    if args.cluster:
        return RedisCluster(startup_nodes=[ClusterNode(host, int(port))])
    return redis.Redis(host=host, port=int(port))
