"""BookKeeper's V3 wire protocol (`BookkeeperProtocol.proto`, the part our bookies speak),
generated from the `.proto` file beside this module by `make proto` (checked in)."""

from storage.bookie.proto import bookkeeper_protocol_pb2

__all__ = ["bookkeeper_protocol_pb2"]
