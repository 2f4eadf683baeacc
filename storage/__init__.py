"""The embedded BookKeeper-like storage engine: bookie processes (`storage.bookie`) and the
local supervisor that runs N of them (`storage.cluster`). Never imports `api`."""

__all__: list[str] = []
