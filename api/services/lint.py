"""`bookies lint`: the rules are pure (`placement.lint`); this reads their inputs from the live
topology snapshot and every namespace's local policies. Nothing is written."""

from __future__ import annotations

from metastore.errors import MetastoreError
from metastore.readers import read_all_local_policies, read_policies
from metastore.store import MetadataStore
from metastore.topology import TopologySnapshot
from placement import default_request
from placement.lint import LintWarning, NamespaceGroups, lint


class LintService:
    def __init__(self, store: MetadataStore, snapshot: TopologySnapshot) -> None:
        self.store = store
        self.snapshot = snapshot
        self.config = snapshot.config

    async def lint(self) -> list[LintWarning]:
        view = await self.snapshot.current()
        namespaces = []
        for name, local in sorted((await read_all_local_policies(self.store)).items()):
            if local.bookie_affinity is None:
                continue
            tenant, namespace = name.split("/")
            try:
                policies = await read_policies(self.store, tenant, namespace)
                persistence = policies.persistence_request
            except MetastoreError:  # absent or unreadable: the broker defaults
                persistence = None
            size = default_request(persistence, self.config).ensemble_size
            namespaces.append(NamespaceGroups(name, local.bookie_affinity, size))
        return lint(view.topology, view.rack_map, view.registrations.all, self.config,
                    namespaces=namespaces)  # fmt: skip
