"""Bookie rack placement: the `/bookies` document (Pulsar's BookiesRackConfiguration).

A bookie lives in exactly one group; moving it removes it from the old group, and a group
left empty disappears. Both levels are kept sorted by key, as Pulsar's TreeMap writes them.
Reads come from the watch-fed cache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pydantic import ValidationError

from api.errors import InvalidInput, NotFound, PreconditionFailed, validation_reason
from api.naming import require_free_name
from api.settings import Settings
from api.shapes.models import BookieInfo
from javaformats import hash_set_order
from metastore.cache import CachedDocument, WatchedRange
from metastore.codec import dump_json, load_json
from metastore.documents import RackConfig, decode_rack_config
from metastore.repositories import RackConfiguration, Repositories
from metastore.store import MetadataStore

INVALID_RACK_REASON = (
    "Bookie 'rack' parameter is invalid, When `RackawareEnsemblePlacementPolicy` is enabled, "
    "the rack name is not allowed to contain slash (`/`) except for the beginning and end of "
    "the rack name string. When `RegionawareEnsemblePlacementPolicy` is enabled, the rack name "
    "can only contain one slash (`/`) except for the beginning and end of the rack name string."
)
MISSING_GROUP_REASON = "Bookie 'group' parameters is missing"


def is_valid_rack_name(rack: str | None, *, region_aware: bool) -> bool:
    """Pulsar's rule: inner slashes after stripping all outer ones: 0 for racks, 1 for
    `/region/rack`."""
    inner_slashes = (rack or "").strip("/").count("/")
    return inner_slashes == (1 if region_aware else 0)


def validate_rack(rack: str | None, settings: Settings) -> None:
    if not settings.bookkeeperClientRackawarePolicyEnabled:
        return
    if not is_valid_rack_name(rack, region_aware=settings.bookkeeperClientRegionawarePolicyEnabled):
        raise PreconditionFailed(INVALID_RACK_REASON)


def sorted_config(config: RackConfig) -> RackConfig:
    """Groups in key order (BookiesRackConfiguration is a TreeMap of groups); the bookies of a
    group in their stored order (Jackson reads each group as a LinkedHashMap). Runs once per
    write batch; a map whose groups are still in order is returned as is."""
    return config if _in_order(config) else {g: config[g] for g in _java_sorted(config)}


def _java_sorted(keys: Iterable[str]) -> list[str]:
    """In `String.compareTo` order: by UTF-16 code unit (code point order differs only when
    a character beyond the BMP meets one from U+E000 to U+FFFF)."""
    found = list(keys)
    if all(key.isascii() for key in found):
        return sorted(found)
    return sorted(found, key=lambda key: key.encode("utf-16-be"))


def _in_order(mapping: dict[str, Any]) -> bool:
    keys = list(mapping)
    return keys == _java_sorted(keys)


def parse_rack_write(body: bytes) -> BookieInfo:
    """The body of a rack write (`POST /admin/v2/bookies/racks-info/{bookie}`) as a
    `BookieInfo`: the one parse the route and the rack-write fast path share. No body or JSON
    `null` is an empty `BookieInfo` (the group then comes from the query alone); anything but
    a JSON object of that shape is `InvalidInput` with FastAPI's validation wording."""
    if not body.strip():
        return BookieInfo()
    try:
        document = load_json(body)
    except ValueError as exc:
        raise InvalidInput(f"Invalid request: {exc}") from None
    if document is None:
        return BookieInfo()
    try:
        return BookieInfo.model_validate(document)
    except ValidationError as exc:
        raise InvalidInput(validation_reason(exc.errors())) from None


def put_bookie(config: RackConfig, bookie: str, group: str, info: BookieInfo) -> RackConfig:
    """Place `bookie` in `group` (in place), as `BookiesRackConfiguration.updateBookie` does:
    taken out of its group first, then added last to `group`."""
    remove_bookie(config, bookie)
    config.setdefault(group, {})[bookie] = info.dump()
    return config


def remove_bookie(config: RackConfig, bookie: str) -> RackConfig:
    """Take `bookie` out of its group (in place); a group left empty disappears."""
    located = find_bookie(config, bookie)
    if located is not None:
        group = located[0]
        del config[group][bookie]
        if not config[group]:
            del config[group]
    return config


def find_bookie(config: RackConfig, bookie: str) -> tuple[str, dict[str, Any]] | None:
    for group, bookies in config.items():
        if bookie in bookies:
            return group, bookies[bookie]
    return None


def not_found_reason(bookie: str) -> str:
    return f"Bookie rack placement configuration not found: {bookie}"


class RackService:
    def __init__(self, store: MetadataStore, settings: Settings, watched: WatchedRange) -> None:
        self.store = store
        self.settings = settings
        self.watched = watched
        self.rack_config = RackConfiguration(store)
        # Both decoded once per change of `/bookies`, not once per request.
        self.config: CachedDocument[RackConfig] = CachedDocument(
            watched, lambda raw: sorted_config(decode_rack_config(raw))
        )
        self.document: CachedDocument[bytes] = CachedDocument(
            watched, lambda raw: dump_json(sorted_config(decode_rack_config(raw)))
        )

    async def racks_info_json(self) -> bytes:
        """The whole rack map, serialised once per change (it can hold 10,000s of bookies)."""
        body, _ = await self.document.read()
        return body

    async def racks_info(self) -> RackConfig:
        """The rack map; shared between readers, so never mutated."""
        config, _ = await self.config.read()
        return config

    async def get_bookie(self, bookie: str) -> BookieInfo:
        located = find_bookie(await self.racks_info(), bookie)
        if located is None:
            raise NotFound(not_found_reason(bookie))
        return BookieInfo.from_stored(RackConfiguration.path, located[1])

    async def set_bookie(self, bookie: str, group: str | None, info: BookieInfo) -> None:
        if group is None:
            raise PreconditionFailed(MISSING_GROUP_REASON)
        validate_rack(info.rack, self.settings)  # upstream's own check, before our name rules
        require_free_name("Bookie id", bookie)
        require_free_name("Bookie group name", group)
        await self._update(lambda config: put_bookie(config, bookie, group, info))

    async def delete_bookie(self, bookie: str) -> None:
        def remove(config: RackConfig) -> RackConfig:
            if find_bookie(config, bookie) is None:
                raise NotFound(not_found_reason(bookie))
            return remove_bookie(config, bookie)

        await self._update(remove)

    async def _update(self, change: Callable[[RackConfig], RackConfig]) -> None:
        await self.rack_config.update(
            lambda doc: change(doc if isinstance(doc, dict) else {}),
            finalize=sorted_config,
        )


async def all_bookies(store: MetadataStore) -> list[str]:
    """`GET /admin/v2/bookies/all`: every bookie of the cluster, running or not, as Pulsar's
    `BookiesBase.getAllBookies` lists them: the ids of BookKeeper's cookies (its registration
    client's `getAllBookies`), read in key order (as from etcd) into a `HashSet<BookieId>` one by
    one and answered in that set's iteration order (a `BookieId` hashes as its id string)."""
    return hash_set_order(sorted(await Repositories(store).bookies.with_cookies()))
