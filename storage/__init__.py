"""The embedded BookKeeper-like storage engine: bookie processes (`storage.bookie`), the
local supervisor that runs N of them (`storage.supervisor`), the broker-side ledger client
(`storage.ledger`) and topics as managed ledgers (`storage.managed_ledger`), assembled on etcd
by `storage.engine`. Never imports `api`."""

__all__: list[str] = []
