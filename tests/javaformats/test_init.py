import pathlib
import re

import javaformats


def test_package_is_pure() -> None:
    """No import of ours and no I/O: every layer and the CLI can use it."""
    forbidden = {"api", "cli", "storage", "metastore", "pipeline", "placement", "httpx", "aetcd",
                 "asyncio", "logging", "os", "time", "threading", "socket", "pathlib"}
    root = pathlib.Path(javaformats.__file__).parent
    files = sorted(root.glob("*.py"))
    assert len(files) >= 7
    for path in files:
        for line in path.read_text().splitlines():
            m = re.match(r"\s*(?:from|import)\s+([\w]+)", line)
            if m:
                assert m.group(1) not in forbidden, (path.name, line)
