"""The broker-side ledger client: create, open, close and delete ledgers.

Create (BookKeeper's `LedgerCreateOp`): an ensemble from `placement.new_ensemble` on the live
topology with the namespace's affinity groups (strict included), a ledger id from the
metadata driver's generator, then the metadata (OPEN, one segment from entry 0, CRC32C) created
at the ledger's key by create-if-absent; an id already taken is retried with a new id.

Close and every later metadata change are compare-and-swap loops on the key's version
(`MetadataUpdateLoop`): re-read on conflict, stop when the change is no longer needed.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from placement import AffinityGroups, EnsembleRequest, Placement, PlacementConfig, Topology
from placement import new_ensemble as place_ensemble
from storage.ledger.bookies import BookiePool
from storage.ledger.ensemble import replacements
from storage.ledger.errors import (
    ClientClosed,
    LedgerClosed,
    LedgerFenced,
    MetadataConflict,
    NoSuchLedger,
)
from storage.ledger.handle import ChangeEnsemble, ReadableLedger, WriteHandle
from storage.ledger.metadata import LedgerMetadata, LedgerState, closed

MAX_CAS_ATTEMPTS = 20


class VersionConflict(Exception):
    """The metadata store's compare-and-swap lost (raised by `MetadataBackend.write`)."""


class MetadataBackend(Protocol):
    """Ledger metadata at its key, with compare-and-swap on the key's store version."""

    async def next_ledger_id(self) -> int: ...

    async def create(self, metadata: LedgerMetadata) -> int | None:
        """Create if absent: the new version, None when the id is taken."""

    async def read(self, ledger_id: int) -> tuple[LedgerMetadata, int] | None:
        """The metadata and its version; None when the ledger does not exist."""

    async def write(self, metadata: LedgerMetadata, version: int) -> int:
        """Replace the value if it is still at `version`: the new version, else
        VersionConflict."""

    async def delete(self, ledger_id: int) -> bool:
        """Delete the key; False when it was already absent."""

    async def close(self) -> None:
        """Release what the backend holds (the id generator's session lease)."""


TopologySource = Callable[[], Awaitable[Topology]]


@dataclass(frozen=True)
class LedgerSpec:
    """What a new ledger needs: sizes, custom metadata, the namespace's groups."""

    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    custom_metadata: Mapping[str, bytes]
    affinity: AffinityGroups | None = None
    password: bytes = b""


class LedgerClient:
    def __init__(
        self,
        metadata: MetadataBackend,
        bookies: BookiePool,
        topology: TopologySource,
        config: PlacementConfig,
        rng: random.Random | None = None,
    ) -> None:
        self.metadata = metadata
        self.bookies = bookies
        self.topology = topology
        self.config = config
        self.rng = rng or random.Random()

    async def place(self, spec: LedgerSpec) -> Placement:
        request = EnsembleRequest(spec.ensemble_size, spec.write_quorum, spec.ack_quorum)
        request.validate()
        return place_ensemble(await self.topology(), request, self.config, self.rng,
                              affinity=spec.affinity)

    async def create(self, spec: LedgerSpec) -> WriteHandle:
        """A new OPEN ledger placed for `spec`; NotEnoughBookies when the policy cannot,
        ClientClosed once the client is closed (no ledger is created then)."""
        if self.bookies.closed:
            raise ClientClosed()
        placement = await self.place(spec)
        for _ in range(MAX_CAS_ATTEMPTS):
            ledger_id = await self.metadata.next_ledger_id()
            draft = LedgerMetadata(
                ledger_id=ledger_id,
                ensemble_size=spec.ensemble_size,
                write_quorum_size=spec.write_quorum,
                ack_quorum_size=spec.ack_quorum,
                ensembles={0: tuple(placement.ensemble)},
                password=spec.password,
                custom_metadata=dict(spec.custom_metadata),
            )
            if await self.metadata.create(draft) is not None:
                return WriteHandle(draft, self.bookies, self._closer(ledger_id),
                                   self._changer(ledger_id))
        raise MetadataConflict("could not find a free ledger id")

    def _closer(self, ledger_id: int) -> Callable[[int, int], Awaitable[LedgerMetadata]]:
        async def close(last_entry_id: int, length: int) -> LedgerMetadata:
            return await self.close_metadata(ledger_id, last_entry_id, length)

        return close

    def _changer(self, ledger_id: int) -> ChangeEnsemble:
        async def change(failed: frozenset[str], start: int) -> LedgerMetadata:
            return await self.change_ensemble(ledger_id, failed, start)

        return change

    async def change_ensemble(self, ledger_id: int, failed: Collection[str],
                              start: int) -> LedgerMetadata:
        """Replace `failed` bookies of the last ensemble with a segment starting at `start`
        (LAC + 1), by CAS (`LedgerHandle.ensembleChangeLoop`): the predicate is "still OPEN and
        a failed bookie is still in the last ensemble"; a last segment that already starts at
        `start` is replaced in place. Replacements follow the ledger's recorded policy
        (`storage.ledger.ensemble`); NotEnoughBookies when it allows none."""
        async def change(current: LedgerMetadata) -> LedgerMetadata | None:
            if current.state == LedgerState.CLOSED:
                raise LedgerClosed(ledger_id)
            if current.state == LedgerState.IN_RECOVERY:
                raise LedgerFenced(ledger_id, "(metadata IN_RECOVERY)")
            ensemble = current.current_ensemble
            still = [b for b in ensemble if b in failed]
            if not still:
                return None
            chosen = replacements(await self.topology(), current, self.config, self.rng,
                                  ensemble, still)
            new = tuple(chosen.get(i, b) for i, b in enumerate(ensemble))
            segments = {k: v for k, v in current.ensembles.items() if k < start}
            segments[start] = new
            return replace(current, ensembles=segments)

        return await self.update_metadata(ledger_id, change)

    async def update_metadata(
        self,
        ledger_id: int,
        change: Callable[[LedgerMetadata], Awaitable[LedgerMetadata | None]],
    ) -> LedgerMetadata:
        """BookKeeper's metadata update loop: read, `change` (None: nothing to write, the
        current metadata stands; an exception stops the loop), write if the version is still
        the one read, else read again; MetadataConflict after MAX_CAS_ATTEMPTS."""
        for _ in range(MAX_CAS_ATTEMPTS):
            current, version = await self.read_versioned(ledger_id)
            target = await change(current)
            if target is None:
                return current
            try:
                await self.metadata.write(target, version)
            except VersionConflict:
                continue
            return target
        raise MetadataConflict(f"too many concurrent changes of ledger {ledger_id}")

    async def read_versioned(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        found = await self.metadata.read(ledger_id)
        if found is None:
            raise NoSuchLedger(ledger_id)
        return found

    async def read_metadata(self, ledger_id: int) -> LedgerMetadata:
        return (await self.read_versioned(ledger_id))[0]

    async def open(self, ledger_id: int) -> ReadableLedger:
        """A reader of the ledger as its metadata stands (a closed ledger reads to its end)."""
        return ReadableLedger(await self.read_metadata(ledger_id), self.bookies)

    async def close_metadata(self, ledger_id: int, last_entry_id: int,
                             length: int) -> LedgerMetadata:
        """CAS the metadata to CLOSED (LedgerHandle.doAsyncCloseInternal's rules)."""

        async def change(current: LedgerMetadata) -> LedgerMetadata | None:
            if current.state == LedgerState.CLOSED:
                if current.last_entry_id == last_entry_id:
                    return None
                raise MetadataConflict(
                    f"ledger {ledger_id} was closed by someone else at entry "
                    f"{current.last_entry_id}, not {last_entry_id}")
            if current.state == LedgerState.IN_RECOVERY:
                raise MetadataConflict(f"ledger {ledger_id} is being recovered")
            return closed(current, last_entry_id, length)

        return await self.update_metadata(ledger_id, change)

    async def delete(self, ledger_id: int) -> None:
        """Delete the ledger's metadata; bookies drop its entries in their garbage
        collection (as upstream: a bookie deletes ledgers whose metadata is gone)."""
        if not await self.metadata.delete(ledger_id):
            raise NoSuchLedger(ledger_id)

    async def close(self) -> None:
        await self.bookies.close()
        await self.metadata.close()
