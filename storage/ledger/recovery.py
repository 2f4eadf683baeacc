"""Closing a ledger its writer left OPEN (the service was killed): a stand-in for issue 14.

What it does, following BookKeeper's `LedgerRecoveryOp` without its fencing and rewriting:
1. ask every bookie of the last ensemble for its last entry of the ledger (entry id -1) and
   take the highest LAC their headers carry (the writer piggy-backs its LAC on each entry);
2. read forward from LAC + 1, each entry from any replica of its write set, until an entry is
   declared absent (Qw - Qa + 1 replicas say they do not have it, as upstream);
3. compare-and-swap the metadata to CLOSED at the last entry found, with its length.

Every acknowledged entry reached Qa bookies of its write set, so step 2 finds it as long as
fewer than Qa of them are lost. What it does not do (issue 14): fence the ledger first (safe
here only because the writer is gone: one owner per topic, and that process died), mark the
ledger IN_RECOVERY, or re-replicate entries that reached fewer than Qw bookies.
"""

from __future__ import annotations

import asyncio

from storage.bookie.errors import BookieError
from storage.bookie.format import verify_entry
from storage.ledger.client import LedgerClient
from storage.ledger.errors import NoSuchEntry
from storage.ledger.handle import ReadableLedger
from storage.ledger.metadata import LedgerMetadata


async def _last_lac(ledger: ReadableLedger, ensemble: tuple[str, ...]) -> int:
    async def ask(bookie: str) -> int:
        try:
            connection = await ledger.bookies.get(bookie)
            packaged = await connection.read(ledger.ledger_id, -1)
            header = verify_entry(packaged, ledger.ledger_id)
        except (TimeoutError, BookieError, OSError):
            return -1
        return header.last_add_confirmed

    answers = await asyncio.gather(*(ask(b) for b in ensemble))
    return max(answers, default=-1)


async def close_abandoned(client: LedgerClient, ledger_id: int) -> LedgerMetadata:
    """Close an OPEN ledger at its last readable entry; a closed one is returned as it is."""
    metadata = await client.read_metadata(ledger_id)
    if metadata.is_closed:
        return metadata
    ledger = ReadableLedger(metadata, client.bookies)
    last_segment = max(metadata.ensembles)
    lac = await _last_lac(ledger, tuple(metadata.ensembles[last_segment]))
    last, length = -1, 0
    if lac >= 0:
        entry = await ledger.read_unchecked(lac)
        last, length = lac, entry.length
    while True:
        try:
            entry = await ledger.read_unchecked(last + 1)
        except NoSuchEntry:
            break
        last, length = entry.entry_id, entry.length
    return await client.close_metadata(ledger_id, last, length)
