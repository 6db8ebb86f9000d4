"""Real Redis servers for the tests: a throwaway redis-server per session (and a Cluster when asked).

The tests never skip: without redis-server they fail, naming what to install.
REDIS_URL points them at a server of your own instead (it is flushed).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

REPO = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _free_cluster_port() -> int:
    """A port p with p and its Cluster bus port p + 10000 both free (p <= 55535)."""
    for _ in range(200):
        p = random.randint(20000, 45000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", p))
                b.bind(("127.0.0.1", p + 10000))
            return p
        except OSError:
            continue
    raise RuntimeError("no free port pair for a Cluster node")


def _server_bin() -> str:
    path = shutil.which("redis-server")
    if path is None:
        pytest.fail("redis-server (Redis >= 7.0) is required: apt-get install -y redis-server", pytrace=False)
    return path


def _start(port: int, extra=()) -> subprocess.Popen:
    d = tempfile.mkdtemp(prefix="ds-py-redis-")
    proc = subprocess.Popen(
        [_server_bin(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", d, *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            redis.Redis(port=port).ping()
            return proc
        except redis.ConnectionError:
            time.sleep(0.02)
    proc.kill()
    pytest.fail(f"redis-server on port {port} did not start", pytrace=False)


@pytest.fixture(scope="session")
def redis_url():
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    port = _free_port()
    proc = _start(port)
    yield f"redis://127.0.0.1:{port}/0"
    proc.kill()
    proc.wait()


@pytest.fixture
def r(redis_url):
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    yield client
    client.close()


@pytest.fixture(scope="session")
def cluster_nodes():
    """Three masters (no replicas) forming a Redis Cluster."""
    ports = [_free_cluster_port() for _ in range(3)]
    procs = [_start(p, ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{p}.conf", "--cluster-node-timeout", "2000"]) for p in ports]
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.fail("redis-cli is required: apt-get install -y redis-server", pytrace=False)
    subprocess.run([cli, "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports], "--cluster-replicas", "0", "--cluster-yes"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        info = redis.Redis(port=ports[0]).cluster("info")
        ok = info.get("cluster_state") == "ok" if isinstance(info, dict) else b"cluster_state:ok" in info
        if ok:
            break
        time.sleep(0.1)
    yield ports
    for p in procs:
        p.kill()
        p.wait()


@pytest.fixture
def rc(cluster_nodes):
    from redis.cluster import RedisCluster

    client = RedisCluster(host="127.0.0.1", port=cluster_nodes[0])
    client.flushall()
    yield client
    client.close()


def wait_for(cond, timeout=10.0, what="condition"):
    """Poll cond until it is true or the deadline passes (then fail with what)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
