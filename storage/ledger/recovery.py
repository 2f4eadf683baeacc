"""Opening a ledger for recovery: fence it, find its last entry, re-write the tail, close it.

BookKeeper's `ReadOnlyLedgerHandle.recover` + `LedgerRecoveryOp` + `ReadLastConfirmedOp`:
1. CLOSED metadata: nothing to do. Otherwise CAS the state OPEN -> IN_RECOVERY (a writer's
   ensemble change or close now fails: it is being recovered).
2. Fence: a fencing read of entry -1 (DO_FENCING + master key) to every bookie of the LAST
   ensemble. The answers must cover every write set: in each of the E write sets at least
   Qw - Qa + 1 bookies answered (an entry, or "no such entry/ledger"), so no write set keeps
   Qa unfenced bookies and the old writer can never complete another add. Start point =
   max(highest piggy-backed LAC answered, last segment start - 1).
3. Read forward from there: each entry from any replica of its write set; an entry is absent
   once Qw - Qa + 1 replicas say so (then the loop stops). Every entry found is re-written to
   its full write set with RECOVERY_ADD (bypasses fencing), needing Qa acks, so the recovered
   tail is at least as replicated as the writer promised.
4. CAS IN_RECOVERY -> CLOSED with lastEntryId and length of the last entry found. Concurrent
   recoverers converge: both read the same entries, and the CAS finds the other's close.

Differences from upstream: a bookie failing during the re-writes is not replaced at close
(the write needs Qa acks of the existing write set; the auditor repairs the rest), and reads
go one entry at a time (`recoveryReadBatchSize` = 1, upstream's default).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from placement import write_set
from storage.bookie.errors import BookieError, NoEntry, NoLedger
from storage.bookie.format import verify_entry
from storage.ledger.client import LedgerClient
from storage.ledger.errors import NoSuchEntry, ReadFailed, RecoveryFailed
from storage.ledger.handle import ReadableLedger, master_key
from storage.ledger.metadata import LedgerMetadata, LedgerState, closed

NOT_ANSWERED = None


async def _mark_in_recovery(client: LedgerClient, ledger_id: int) -> LedgerMetadata:
    async def change(current: LedgerMetadata) -> LedgerMetadata | None:
        if current.state != LedgerState.OPEN:
            return None
        return replace(current, state=LedgerState.IN_RECOVERY)

    return await client.update_metadata(ledger_id, change)


async def _fence_one(ledger: ReadableLedger, bookie: str, key: bytes) -> int | None:
    """The bookie's piggy-backed LAC (-1: it has no entry), None when it did not answer."""
    try:
        connection = await ledger.bookies.get(bookie)
        packaged = await connection.read(ledger.ledger_id, -1, fence=True, master_key=key)
        header = verify_entry(packaged, ledger.ledger_id)
    except (NoEntry, NoLedger):
        return -1
    except (TimeoutError, BookieError, OSError):
        return NOT_ANSWERED
    return header.last_add_confirmed


def covered(answered: set[int], ensemble_size: int, write_quorum: int, ack_quorum: int) -> bool:
    """Every write set has at least Qw - Qa + 1 answers (`RRQuorumCoverageSet`)."""
    need = write_quorum - ack_quorum + 1
    return all(
        sum(1 for i in write_set(first, ensemble_size, write_quorum) if i in answered) >= need
        for first in range(ensemble_size)
    )


async def fence(ledger: ReadableLedger) -> int:
    """Fence the ledger on its last ensemble; the highest LAC the answers carry.
    RecoveryFailed when the answers do not cover every write set."""
    md = ledger.metadata
    ensemble = md.current_ensemble
    key = master_key(md.password or b"")
    answers = await asyncio.gather(*(_fence_one(ledger, b, key) for b in ensemble))
    answered = {i for i, lac in enumerate(answers) if lac is not NOT_ANSWERED}
    if not covered(answered, md.ensemble_size, md.write_quorum_size, md.ack_quorum_size):
        silent = [ensemble[i] for i in range(len(ensemble)) if i not in answered]
        raise RecoveryFailed(md.ledger_id, f"could not fence enough bookies: no answer "
                                           f"from {silent}")
    return max((lac for lac in answers if lac is not None), default=-1)


async def _rewrite(ledger: ReadableLedger, entry_id: int, packaged: bytes) -> None:
    """Recovery-add the entry to its whole write set; Qa acks needed."""
    md = ledger.metadata
    ensemble = md.ensemble_for(entry_id)
    key = master_key(md.password or b"")

    async def one(bookie: str) -> bool:
        try:
            connection = await ledger.bookies.get(bookie)
            await connection.add(md.ledger_id, entry_id, key, packaged, recovery=True)
        except (TimeoutError, BookieError, OSError):
            return False
        return True

    targets = [ensemble[i] for i in write_set(entry_id, md.ensemble_size, md.write_quorum_size)]
    acks = await asyncio.gather(*(one(b) for b in targets))
    if sum(acks) < md.ack_quorum_size:
        raise RecoveryFailed(md.ledger_id, f"re-write of entry {entry_id} reached "
                                           f"{sum(acks)} of {md.ack_quorum_size} bookies")


async def recover(client: LedgerClient, ledger_id: int) -> LedgerMetadata:
    """Fence, find the last entry, re-write the tail, close: the CLOSED metadata."""
    metadata = await _mark_in_recovery(client, ledger_id)
    if metadata.is_closed:
        return metadata
    ledger = ReadableLedger(metadata, client.bookies)
    lac = await fence(ledger)
    start = max(lac, max(metadata.ensembles) - 1)
    last, length = -1, 0
    if start >= 0:
        try:
            _, header = await ledger.read_packaged(start)
        except (NoSuchEntry, ReadFailed) as exc:
            raise RecoveryFailed(ledger_id, f"the confirmed entry {start}: {exc}") from exc
        last, length = start, header.length
    while True:
        try:
            packaged, header = await ledger.read_packaged(last + 1)
        except NoSuchEntry:
            break
        except ReadFailed as exc:
            raise RecoveryFailed(ledger_id, str(exc)) from exc
        await _rewrite(ledger, last + 1, packaged)
        last, length = last + 1, header.length
    return await _close_recovered(client, ledger_id, last, length)


async def _close_recovered(client: LedgerClient, ledger_id: int, last: int,
                           length: int) -> LedgerMetadata:
    async def change(current: LedgerMetadata) -> LedgerMetadata | None:
        if current.state == LedgerState.CLOSED:
            return None  # another recoverer closed it (it read the same entries)
        return closed(current, last, length)

    return await client.update_metadata(ledger_id, change)
