import pathlib
import re

import placement


def test_every_exported_name_exists() -> None:
    for name in placement.__all__:
        assert hasattr(placement, name), name


def test_all_is_sorted_and_unique() -> None:
    assert list(placement.__all__) == sorted(set(placement.__all__))


def test_package_is_pure() -> None:
    forbidden = {"api", "cli", "storage", "metastore", "pipeline", "httpx", "aetcd", "asyncio",
                 "logging", "os", "time", "threading", "socket"}
    root = pathlib.Path(placement.__file__).parent
    files = sorted(root.glob("*.py"))
    assert len(files) > 10
    for path in files:
        for line in path.read_text().splitlines():
            m = re.match(r"\s*(?:from|import)\s+([\w]+)", line)
            if m:
                assert m.group(1) not in forbidden, (path.name, line)
