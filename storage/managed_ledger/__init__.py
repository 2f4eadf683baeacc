"""Topics as Pulsar managed ledgers: ledgers rolled over by Pulsar's settings and listed in
`ManagedLedgerInfo` at `/managed-ledgers/{tenant}/{ns}/persistent/{encoded topic}`."""

from storage.managed_ledger.config import ManagedLedgerConfig, RolloverPolicy
from storage.managed_ledger.errors import (
    InvalidPosition,
    ManagedLedgerClosed,
    ManagedLedgerError,
    ManagedLedgerFenced,
    ManagedLedgerNotFound,
    NamespaceNotWritable,
)
from storage.managed_ledger.factory import ManagedLedgerFactory
from storage.managed_ledger.managed_ledger import (
    InfoBackend,
    InfoVersionConflict,
    LedgerInfo,
    ManagedLedger,
    Position,
)
from storage.managed_ledger.message import (
    COMPRESSION_NAMES,
    COMPRESSION_NONE,
    MessageFormatError,
    MessageMetadata,
    decode_message,
    encode_message,
    message_size,
)
from storage.managed_ledger.names import (
    codec_decode,
    codec_encode,
    managed_ledger_name,
    managed_ledger_path,
)

__all__ = [
    "COMPRESSION_NAMES",
    "COMPRESSION_NONE",
    "InfoBackend",
    "InfoVersionConflict",
    "InvalidPosition",
    "LedgerInfo",
    "ManagedLedger",
    "ManagedLedgerClosed",
    "ManagedLedgerConfig",
    "ManagedLedgerError",
    "ManagedLedgerFactory",
    "ManagedLedgerFenced",
    "ManagedLedgerNotFound",
    "MessageFormatError",
    "MessageMetadata",
    "NamespaceNotWritable",
    "Position",
    "RolloverPolicy",
    "codec_decode",
    "codec_encode",
    "decode_message",
    "encode_message",
    "managed_ledger_name",
    "managed_ledger_path",
    "message_size",
]
