"""The broker side of the bookie protocol: `BookieClient`, one pipelined connection to one bookie.

It speaks the frames of `storage.bookie.protocol` and `storage.bookie.protocol_v3` and raises
`storage.bookie.errors`; the bookie server does not import it.
"""

from storage.bookie_client.client import BookieClient

__all__ = ["BookieClient"]
