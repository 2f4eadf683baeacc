"""The bookie's cookie check at start-up, as BookKeeper's `LegacyCookieValidation.checkCookies`
(with `allowStorageExpansion=false`, its default).

The cookie (`javaformats.cookie`) is made from the bookie id, the journal and ledger directories
(`<data-dir>/journal`, `<data-dir>/ledgers`) and the cluster's `/ledgers/INSTANCEID`. It is kept
at `/ledgers/cookies/{bookieId}` and in `current/VERSION` of each directory:

- no cookie anywhere: a new bookie; its `current` directories must be empty, then the cookie is
  written to each directory and to the store;
- every copy present: each must match the one made from the settings;
- a copy missing beside a stored cookie, or the stored cookie missing beside the copies, or any
  copy not matching: the bookie refuses to start (`InvalidCookie`, upstream's message).

A bookie that finds the ledgers root not yet set up sets it up first (create-if-absent, as the
service's first start does: `metastore.ledger_layout.set_up_ledgers_root`), so every cookie
carries the cluster's instance id. Upstream's bookie refuses to start there ("BookKeeper cluster
not initialized"); here bookies may start before the service formats the store, and a cookie
stamped without an instance id would refuse the bookie's next start once the store is formatted.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from javaformats import Cookie, InvalidCookie, java_to_string
from metastore.errors import AlreadyExists
from metastore.ledger_layout import set_up_ledgers_root
from metastore.paths import bookie_cookie
from metastore.versioned_keys import VersionedKeys

log = logging.getLogger(__name__)

VERSION_FILE = "VERSION"
INVALID_COOKIE = "Invalid environment cookie found"  # BookieException's text for the code


def _parse(text: str) -> Cookie:
    try:
        return Cookie.parse(text)
    except InvalidCookie:
        raise
    except ValueError as exc:
        raise InvalidCookie(str(exc)) from exc


def _write_file(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


async def check_cookies(keys: VersionedKeys, bookie_id: str, journal_dirs: list[Path],
                        ledger_dirs: list[Path]) -> Cookie:
    """Verify (or, for a new bookie, stamp) the cookie; the bookie's cookie, or InvalidCookie."""
    directories = [directory / "current" for directory in [*journal_dirs, *ledger_dirs]]
    for directory in directories:
        directory.mkdir(parents=True, exist_ok=True)
    master = Cookie.generate(bookie_id, [str(d) for d in journal_dirs],
                             [str(d) for d in ledger_dirs], await set_up_ledgers_root(keys))
    stored = await keys.read(bookie_cookie(bookie_id))
    if stored is not None:
        master.verify(_parse(stored.value.decode("utf-8", errors="replace")))
    missing = []
    for directory in directories:
        try:
            text = (directory / VERSION_FILE).read_text(encoding="utf-8")
        except FileNotFoundError:
            missing.append(directory)
            continue
        master.verify(_parse(text))
    if not missing:
        if stored is None:
            log.error("Cookie for this bookie is not stored in metadata store. "
                      "Bookie failing to come up")
            raise InvalidCookie(INVALID_COOKIE)
        return master
    if stored is not None:
        log.error("There are directories without a cookie, and this is neither a new "
                  "environment, nor is storage expansion enabled. Empty directories are %s",
                  java_to_string([str(p) for p in missing]))
        raise InvalidCookie(INVALID_COOKIE)
    non_empty = [directory for directory in directories if any(directory.iterdir())]
    if non_empty:
        log.error("Not all the new directories are empty. New directories that are not empty "
                  "are: %s", java_to_string([str(p) for p in non_empty]))
        raise InvalidCookie(INVALID_COOKIE)
    log.info("Stamping new cookies on all dirs %s", java_to_string([str(p) for p in directories]))
    text = master.encode()
    for directory in directories:
        _write_file(directory / VERSION_FILE, text)
    try:
        await keys.create(bookie_cookie(bookie_id), text.encode("utf-8"))
    except AlreadyExists:
        log.error("Cookie already exists for %s", bookie_id)
        raise InvalidCookie("Cookie already exists") from None
    return master
