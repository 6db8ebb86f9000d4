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
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            # NOSCRIPT means the call did not run: sending it again is safe.
            return client.eval(self.source, len(keys), *keys, *args)

    async def run_async(self, client: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await client.eval(self.source, len(keys), *keys, *args)


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
