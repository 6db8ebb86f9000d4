"""The Lua scripts, composed from the Go module's files as Go composes them.

``lua/`` is the Go module's ``internal/scripts`` (a link in the repository,
the files themselves in a built package): one source for every language.
``lua/manifest.json``, checked against Go by that package's tests, says which
files make each script and the SHA1 Go sends, so this client shares the
server's script cache with Go processes (docs/wire.md, "Loading the scripts").
"""

from __future__ import annotations

import hashlib
import json
import weakref
from importlib import resources
from typing import Any, Dict, Sequence

from redis.exceptions import NoScriptError

_DIR = resources.files(__package__) / "lua"


def _read(name: str) -> bytes:
    return (_DIR / name).read_bytes()


class Script:
    """One script: its source and SHA1, sent with EVALSHA and EVAL on NOSCRIPT."""

    __slots__ = ("name", "source", "sha")

    def __init__(self, name: str, source: bytes, sha: str) -> None:
        self.name, self.source, self.sha = name, source, sha

    def __call__(self, client: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        if hasattr(client, "nodes_manager"):
            self._preload(client)
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            # NOSCRIPT means the call did not run: sending it again is safe.
            return client.eval(self.source, len(keys), *keys, *args)

    def _preload(self, client: Any) -> None:
        # redis-py's Cluster client logs every error reply at ERROR level, so
        # a Cluster client gets every script with SCRIPT LOAD (sent to all
        # primaries) before its first EVALSHA; a node that lost them later
        # (a restart, a failover) answers NOSCRIPT once, and EVAL loads it.
        seen = _loaded.setdefault(client, set())
        if self.sha not in seen:
            client.script_load(self.source)
            seen.add(self.sha)

    async def run_async(self, client: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await client.eval(self.source, len(keys), *keys, *args)


_loaded: "weakref.WeakKeyDictionary[Any, set]" = weakref.WeakKeyDictionary()


def _load() -> Dict[str, Script]:
    manifest = json.loads(_read("manifest.json"))
    out: Dict[str, Script] = {}
    for name, spec in manifest["scripts"].items():
        source = b"".join(_read(f) for f in spec["files"])
        sha = hashlib.sha1(source).hexdigest()
        if sha != spec["sha1"]:
            raise RuntimeError(f"delaystream: script {name} does not match its manifest (a damaged install)")
        out[name] = Script(name, source, sha)
    return out


SCRIPTS = _load()
SCHEDULE = SCRIPTS["schedule.lua"]
SCHEDULE_GENERATED = SCRIPTS["schedule_generated.lua"]
CANCEL = SCRIPTS["cancel.lua"]
RESCHEDULE = SCRIPTS["reschedule.lua"]
GET = SCRIPTS["get.lua"]
LOCATE = SCRIPTS["locate.lua"]
META = SCRIPTS["meta.lua"]
PROMOTE = SCRIPTS["promote.lua"]
RELEASE = SCRIPTS["release.lua"]
RETRY = SCRIPTS["retry.lua"]
DEAD = SCRIPTS["dead.lua"]
ACK = SCRIPTS["ack.lua"]
EXTEND = SCRIPTS["extend.lua"]
TRIM = SCRIPTS["trim.lua"]
DELCONSUMER = SCRIPTS["delconsumer.lua"]
STATS = SCRIPTS["stats.lua"]
