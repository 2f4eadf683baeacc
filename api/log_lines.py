"""The server's log lines at a per-request cost: `LineFormatter` is `logging.Formatter` with
the time stamp's date and clock formatted once per second (the milliseconds per line), and
`AccessLog` is what uvicorn's request cycle logs its access line through: the same record to
the same handlers as `logging.getLogger("uvicorn.access").info(...)`, without the search of
the call stack for the caller's file and line (which no line prints). The lines are the
same, byte for byte, as the standard formatter's and logger's."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

LINE_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class LineFormatter(logging.Formatter):
    def __init__(self, fmt: str = LINE_FORMAT) -> None:
        super().__init__(fmt)
        self._second: tuple[int, str] = (-1, "")  # one tuple: replaced whole, never half

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        cached, stamp = self._second
        if cached != second:
            stamp = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = (second, stamp)
        msec_format = self.default_msec_format
        return msec_format % (stamp, record.msecs) if msec_format else stamp


class AccessLog:
    """The `info` and `hasHandlers` of `logger` that uvicorn's protocol uses for its access
    line; the record's file and line are logging's "(unknown file)", 0.

    uvicorn logs the line as the response starts, before its bytes are written; on an event
    loop the line is written in the loop's next turn instead, so the response leaves first
    and the line's record and write (~30 µs) are no longer between a request and its answer.
    The lines keep their order (the loop runs its callbacks in the order they came)."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self.name = logger.name

    def hasHandlers(self) -> bool:
        return self.logger.hasHandlers()

    def isEnabledFor(self, level: int) -> bool:
        return self.logger.isEnabledFor(level)

    def info(self, msg: str, *args: Any) -> None:
        if not self.logger.isEnabledFor(logging.INFO):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._write(msg, args)
        else:
            loop.call_soon(self._write, msg, args)

    def _write(self, msg: str, args: tuple[Any, ...]) -> None:
        logger = self.logger
        logger.handle(logger.makeRecord(self.name, logging.INFO, "(unknown file)", 0, msg, args,
                                        None))
