"""The bookie's cookie, as BookKeeper's: written on first start to `/ledgers/cookies/{bookieId}`
and to `current/VERSION` of the journal and ledger directories, checked on every start; a bookie
whose directories do not match its cookie refuses to start with upstream's message."""

from __future__ import annotations

import subprocess
from pathlib import Path

from javaformats.cookie import Cookie
from metastore.embedded import EmbeddedEtcd
from metastore.paths import bookie_cookie
from tests.storage.bookie.conftest import BookieFactory
from tests.storage.bookie.support import BookieProcess
from tests.support import REPO, RawEtcd

REFUSED = 2  # ExitCode.SERVER_EXCEPTION


def version_files(data_dir: Path) -> list[Path]:
    return [data_dir / "journal" / "current" / "VERSION",
            data_dir / "ledgers" / "current" / "VERSION"]


def refused(bookie: BookieProcess) -> str:
    """Start the bookie's command and expect it to exit on its own; its output."""
    done = subprocess.run(bookie.command(), cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == REFUSED, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_cookie_written_and_checked_on_restart(start_bookie: BookieFactory,
                                               raw_etcd: RawEtcd) -> None:
    bookie = start_bookie()
    stored = raw_etcd.get(bookie_cookie(bookie.bookie_id))
    assert stored is not None
    cookie = Cookie.parse(stored.decode())
    instance = raw_etcd.get("/ledgers/INSTANCEID")
    assert cookie == Cookie.generate(bookie.bookie_id, [str(bookie.data_dir / "journal")],
                                     [str(bookie.data_dir / "ledgers")],
                                     None if instance is None else instance.decode())
    assert [path.read_bytes() for path in version_files(bookie.data_dir)] == [stored, stored]

    bookie.stop()
    bookie.start()  # the same directories: the cookie matches
    assert raw_etcd.get(bookie_cookie(bookie.bookie_id)) == stored
    bookie.stop()

    # a journal directory from another bookie (its VERSION names other directories)
    journal_version, ledgers_version = version_files(bookie.data_dir)
    other = Cookie.generate(bookie.bookie_id, ["/elsewhere/journal"],
                            [str(bookie.data_dir / "ledgers")], cookie.instance_id)
    journal_version.write_text(other.encode())
    out = refused(bookie)
    assert f"Cookie [{stored.decode()}] is not matching with [{other.encode()}]" in out, out

    # a directory without its cookie beside a stored one
    journal_version.write_bytes(stored)
    ledgers_version.unlink()
    out = refused(bookie)
    assert ("There are directories without a cookie, and this is neither a new environment, "
            f"nor is storage expansion enabled. Empty directories are "
            f"[{ledgers_version.parent}]") in out, out

    # the store lost the cookie while the directories keep theirs
    ledgers_version.write_bytes(stored)
    raw_etcd.delete(bookie_cookie(bookie.bookie_id))
    out = refused(bookie)
    assert "Cookie for this bookie is not stored in metadata store. Bookie failing to come up" \
        in out, out


def test_new_bookie_on_used_directories_refused(etcd: EmbeddedEtcd, raw_etcd: RawEtcd,
                                                tmp_path: Path) -> None:
    data_dir = tmp_path / "used"
    (data_dir / "journal" / "current").mkdir(parents=True)
    (data_dir / "journal" / "current" / "1.txn").write_bytes(b"\0" * 16)
    bookie = BookieProcess(raw_etcd, etcd.url, data_dir)
    out = refused(bookie)
    assert ("Not all the new directories are empty. New directories that are not empty are: "
            f"[{data_dir / 'journal' / 'current'}]") in out, out
    assert raw_etcd.get(bookie_cookie(bookie.bookie_id)) is None
