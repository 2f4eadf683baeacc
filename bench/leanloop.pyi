"""Types of the lean generator's compiled closed loop (bench/leanloop.pyx)."""

def run(fd: int, frames: list[list[bytes]], seconds: float, base: int
        ) -> tuple[int, float, list[float]]: ...
