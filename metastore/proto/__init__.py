"""BookKeeper's and Pulsar's protobuf records, generated from the `.proto` files beside this
module by `make proto` (checked in; `protobuf` is the only runtime dependency).

- `bookkeeper_formats.proto`: ledger metadata (V3 body), bookie registration, under-replication
  marks, cookies (BookKeeper's `DataFormats.proto`).
- `managed_ledger_formats.proto`: a topic's ledgers and cursors (Pulsar's `MLDataFormats.proto`).
"""

from metastore.proto import bookkeeper_formats_pb2, managed_ledger_formats_pb2

__all__ = ["bookkeeper_formats_pb2", "managed_ledger_formats_pb2"]
