"""The repository of under-replication marks and ledger locks at BookKeeper's keys, in its
text formats (`ZkLedgerUnderreplicationManager`, kept by Pulsar's
`PulsarLedgerUnderreplicationManager`):

- `/ledgers/underreplication/ledgers/<hhhh>/<hhhh>/<hhhh>/<hhhh>/urL<%010d>`: the missing
  replicas (`replica: "<bookie>"` lines) and the mark time (`ctime`); marking again merges the
  replica list (CAS on the key's version; a new replica sets `ctime` to now, as upstream), and
  a worker removes the mark only at the version it took (a mark changed meanwhile stays);
- `/ledgers/underreplication/locks/urL<%010d>`: ephemeral (on the worker's lease), the
  holder's id in `LockDataFormat`;
- `/ledgers/underreplication/lostBookieRecoveryDelay`: the delay as decimal text; rewriting it
  (even with the same value) is how upstream's `triggerAudit` asks the auditor for an audit.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass

from metastore import paths
from metastore.errors import AlreadyExists, BadVersion, NotFound
from metastore.underreplication_marks import (
    UnderreplicatedLedger,
    decode_underreplicated_ledger,
    encode_lock_data,
    encode_underreplicated_ledger,
)
from metastore.versioned_keys import VersionedKeys

LOST_BOOKIE_RECOVERY_DELAY = f"{paths.UNDERREPLICATION}/lostBookieRecoveryDelay"
AUDITOR_LEADER = f"{paths.UNDERREPLICATION}/leader"
_SCAN_PAGE = 500


@dataclass(frozen=True)
class Mark:
    ledger_id: int
    replicas: tuple[str, ...]
    ctime: int | None
    version: int


class UnderReplication:
    """The marks, the locks and the audit trigger, over one etcd connection."""

    def __init__(self, keys: VersionedKeys) -> None:
        self.keys = keys

    async def mark(self, ledger_id: int, missing: Iterable[str]) -> None:
        """Mark the ledger under-replicated, merging `missing` into an existing mark."""
        path = paths.underreplicated_ledger(ledger_id)
        wanted = tuple(sorted(set(missing)))
        for _ in range(20):
            found = await self.keys.read(path)
            if found is None:
                value = UnderreplicatedLedger(wanted, int(time.time() * 1000))
                try:
                    await self.keys.create(path, encode_underreplicated_ledger(value))
                except AlreadyExists:
                    continue
                return
            current = decode_underreplicated_ledger(found.value)
            merged = tuple(sorted(set(current.replicas) | set(wanted)))
            if merged == current.replicas:
                return
            try:  # a replica added: the mark time is now, as upstream
                await self.keys.put_at_version(
                    path, encode_underreplicated_ledger(
                        UnderreplicatedLedger(merged, int(time.time() * 1000))),
                    found.version)
            except (BadVersion, NotFound):
                continue
            return

    async def marks(self) -> list[Mark]:
        """Every mark, by ledger id."""
        start = paths.UNDERREPLICATED_LEDGERS + "/"
        end = paths.UNDERREPLICATED_LEDGERS + "0"
        found: list[Mark] = []
        while True:
            page = await self.keys.scan(start, end, limit=_SCAN_PAGE)
            for key, value, version in page.items:
                name = key.rsplit("/", 1)[-1]
                if not name.startswith("urL") or not name[3:].isdigit():
                    continue
                mark = decode_underreplicated_ledger(value)
                found.append(Mark(int(name[3:]), mark.replicas, mark.ctime, version))
            if not page.more or not page.items:
                return found
            start = page.items[-1][0] + "\0"

    async def get(self, ledger_id: int) -> Mark | None:
        found = await self.keys.read(paths.underreplicated_ledger(ledger_id))
        if found is None:
            return None
        mark = decode_underreplicated_ledger(found.value)
        return Mark(ledger_id, mark.replicas, mark.ctime, found.version)

    async def unmark(self, ledger_id: int, version: int | None = None) -> bool:
        """Mark replicated: delete the marker (absent already is fine). With `version` (the
        mark's version when the worker took the ledger, as upstream's `markLedgerReplicated`
        deletes at its lock's znode version), a mark that was merged or made again since is
        kept for the next round: False then."""
        try:
            await self.keys.delete(paths.underreplicated_ledger(ledger_id), version)
        except NotFound:
            return True
        except BadVersion:
            return False
        return True

    async def lock(self, ledger_id: int, lease: int, holder: str) -> bool:
        """Take the ledger's ephemeral lock; False when another worker holds it."""
        try:
            await self.keys.create(paths.underreplication_lock(ledger_id),
                                   encode_lock_data(holder), lease)
        except AlreadyExists:
            return False
        return True

    async def unlock(self, ledger_id: int) -> None:
        with contextlib.suppress(NotFound):
            await self.keys.delete(paths.underreplication_lock(ledger_id))

    async def lost_bookie_recovery_delay(self) -> tuple[int, int] | None:
        """The stored delay (seconds) and its version; None when not stored yet."""
        found = await self.keys.read(LOST_BOOKIE_RECOVERY_DELAY)
        if found is None:
            return None
        return int(found.value.decode().strip() or 0), found.version

    async def init_lost_bookie_recovery_delay(self, seconds: int) -> None:
        with contextlib.suppress(AlreadyExists):
            await self.keys.create(LOST_BOOKIE_RECOVERY_DELAY, str(seconds).encode())

    async def trigger_audit(self, default_delay: int = 0) -> None:
        """Upstream's `BookKeeperAdmin.triggerAudit`: write the delay back as it is, which the
        auditor sees as a change and answers with an audit."""
        found = await self.lost_bookie_recovery_delay()
        await self.keys.put(LOST_BOOKIE_RECOVERY_DELAY,
                            str(default_delay if found is None else found[0]).encode())

    async def auditor(self) -> str | None:
        """The elected auditor's id (the JSON string at the leader key), None if none."""
        found = await self.keys.read(AUDITOR_LEADER)
        if found is None:
            return None
        value = json.loads(found.value.decode() or "null")
        return value if isinstance(value, str) else None
