"""The broker side of the bookie protocol: `BookieClient`, one pipelined connection to one bookie.

Its compiled part (`addacks`) builds a writer's add frames once for a whole write set, counts
the acknowledgements per entry in a ring and routes each read's add answers to it.

It speaks the frames of `storage.bookie.protocol` and `storage.bookie.protocol_v3` and raises
`storage.bookie.errors`; the bookie server does not import it.
"""

from storage.bookie_client.addacks import AckListener, AckRing, Answers, encode_add_frame
from storage.bookie_client.client import BookieClient, error_for

__all__ = ["AckListener", "AckRing", "Answers", "BookieClient", "encode_add_frame", "error_for"]
