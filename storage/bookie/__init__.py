"""A BookKeeper-compatible bookie: V2 protocol, journal, entry logs, index, registration.

Layers (each names its commit point): `format` (bytes, pure), `protocol` (frames, pure),
`journal` (group fdatasync), `entrylog` (batch fdatasync), `index` (one LMDB transaction),
`ledger_storage` (write cache, checkpoint, entry log and index),
`bookie` (admission, fencing, journal), `server` (TCP), `registration` (etcd lease),
`service` (one process). The broker-side client is `storage.bookie_client`.
"""

from storage.bookie.format import package_entry, verify_entry
from storage.bookie.protocol import Flag, OpCode, ResultCode

__all__ = ["Flag", "OpCode", "ResultCode", "package_entry", "verify_entry"]
