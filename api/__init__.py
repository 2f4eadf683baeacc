"""The admin REST service: `create_app(settings)` builds it, `python -m api` runs it."""

from api.app import create_app
from api.settings import Settings, SettingsError, load_settings

__all__ = ["Settings", "SettingsError", "create_app", "load_settings"]
