"""The server's log lines: the same bytes as the standard formatter and logger write."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
from collections.abc import Iterator

from api.auth.secrets import install_log_masking, mask_text
from api.log_lines import LINE_FORMAT, AccessLog, LineFormatter

ACCESS = ('%s - "%s %s HTTP/%s" %d', "127.0.0.1:43210", "POST",
          "/admin/v2/bookies/racks-info/10.0.0.1:3181?group=default", "1.1", 204)


def record(created: float, msg: str = "a line") -> logging.LogRecord:
    made = logging.LogRecord("api", logging.INFO, __file__, 1, msg, None, None)
    made.created = created
    made.msecs = int((created - int(created)) * 1000) + 0.0
    return made


def test_line_formatter_writes_what_the_standard_formatter_writes() -> None:
    standard, cached = logging.Formatter(LINE_FORMAT), LineFormatter()
    # within one second, across seconds, back in time, across a day
    for created in (1_700_000_000.001, 1_700_000_000.999, 1_700_000_001.5, 1_700_000_000.25,
                    1_700_086_399.999, 1_700_086_400.0):
        assert cached.format(record(created)) == standard.format(record(created))
    assert cached.formatTime(record(1_700_000_000.5), "%H") == standard.formatTime(
        record(1_700_000_000.5), "%H")


@contextlib.contextmanager
def captured(name: str, line_format: str) -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """Logger `name` at INFO, its lines (in `line_format`) written to the StringIO only."""
    logger = logging.getLogger(name)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter(line_format))
    logger.addHandler(handler)
    try:
        yield logger, out
    finally:
        logger.removeHandler(handler)


def test_access_log_sends_the_logger_s_line_to_its_handlers() -> None:
    install_log_masking()
    with captured("test.access.lines", "%(levelname)s %(name)s %(message)s") as (logger, out):
        logger.info(*ACCESS)
        access = AccessLog(logger)
        assert access.hasHandlers()
        access.info(*ACCESS)
        access.info('%s - "%s %s HTTP/%s" %d', "c", "GET", "/x?token=abc&a=1", "1.1", 200)
        logger.setLevel(logging.WARNING)  # accessLogEnabled=false
        access.info(*ACCESS)
    lines = out.getvalue().splitlines()
    assert lines[0] == lines[1] == (
        'INFO test.access.lines 127.0.0.1:43210 - "POST '
        '/admin/v2/bookies/racks-info/10.0.0.1:3181?group=default HTTP/1.1" 204')
    assert lines[2] == 'INFO test.access.lines c - "GET /x?token=******&a=1 HTTP/1.1" 200'
    assert len(lines) == 3


def test_masking_finds_sensitive_words_in_any_case_and_script() -> None:
    assert mask_text("GET /x?Token=abc&a=1") == "GET /x?Token=******&a=1"
    assert mask_text("PASSWORD=hunter2 b=c") == "PASSWORD=****** b=c"
    assert mask_text("\u017fecret=5") == "\u017fecret=******"  # long s: case-blind "s"
    assert mask_text("authParams=x é") == "authParams=****** é"
    assert mask_text("group=default a=1") == "group=default a=1"


def test_on_an_event_loop_the_access_line_is_written_in_the_loop_s_next_turn_in_order() -> None:
    """uvicorn logs as a response starts: on the loop the line waits until the response's
    bytes are written (the callback that logged it has returned), and lines keep their order."""
    async def respond(access: AccessLog, out: io.StringIO) -> list[str]:
        seen: list[str] = []
        for status in (200, 204):
            access.info('%s - "%s %s HTTP/%s" %d', "c", "GET", "/x", "1.1", status)
            seen.append(out.getvalue())  # the response is written here
        await asyncio.sleep(0)
        seen.append(out.getvalue())
        return seen

    with captured("test.access.deferred", "%(message)s") as (logger, out):
        during, _, after = asyncio.run(respond(AccessLog(logger), out))
    assert during == ""
    assert after.splitlines() == ['c - "GET /x HTTP/1.1" 200', 'c - "GET /x HTTP/1.1" 204']
