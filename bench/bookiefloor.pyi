"""Types of the compiled bookie floor (bench/bookiefloor.pyx)."""

MIN_JOURNAL: int

def serve(
    listener: int, journal: int, journal_size: int, handoff: bool = False
) -> tuple[int, int, float, str]: ...
