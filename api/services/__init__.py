"""Business rules, one module per area; routers call these and nothing else."""

__all__: list[str] = []
