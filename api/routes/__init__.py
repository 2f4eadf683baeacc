"""Routers, one per resource; `ROUTERS` is what the app mounts."""

from api.routes import bookies, brokers

ROUTERS = [bookies.router, brokers.router]

__all__ = ["ROUTERS"]
