"""Errors of the bookie engine and its client.

BookieError                      any failure of a bookie operation
├── CorruptEntry                 stored bytes fail their digest or ids (reported, never returned)
├── MalformedFrame               bytes that are not a V2 or V3 frame (the connection is closed)
├── ResponseError                a bookie answered with an error code (`code`: ResultCode)
│   ├── NoLedger / NoEntry / BadRequest / IOFailure / Unauthorized
│   └── Fenced / ReadOnly / TooManyRequests / BadVersion / UnknownLedgerState
├── BookieTimeout                no answer within the client's timeout
└── ConnectionLost               the connection closed with requests outstanding
"""

from __future__ import annotations


class BookieError(Exception):
    pass


class CorruptEntry(BookieError):
    pass


class MalformedFrame(BookieError):
    pass


class BookieTimeout(BookieError):
    pass


class ConnectionLost(BookieError):
    pass


class ResponseError(BookieError):
    """`code` is the upstream result code (`protocol.ResultCode`)."""

    def __init__(self, code: int, ledger_id: int, entry_id: int) -> None:
        super().__init__(f"error code {code} for ledger {ledger_id} entry {entry_id}")
        self.code = code
        self.ledger_id = ledger_id
        self.entry_id = entry_id


class NoLedger(ResponseError):
    pass


class NoEntry(ResponseError):
    pass


class BadRequest(ResponseError):
    pass


class IOFailure(ResponseError):
    pass


class Unauthorized(ResponseError):
    pass


class BadVersion(ResponseError):
    pass


class Fenced(ResponseError):
    pass


class ReadOnly(ResponseError):
    pass


class TooManyRequests(ResponseError):
    pass


class UnknownLedgerState(ResponseError):
    pass
