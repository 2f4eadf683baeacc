"""The PySpark placement audit (a later issue); nothing public yet."""

__all__: list[str] = []
