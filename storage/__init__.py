"""The embedded BookKeeper-like storage engine (a later issue); nothing public yet."""

__all__: list[str] = []
