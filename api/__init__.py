"""The admin REST service: `create_app(settings)` builds it, `python -m api` runs it.

    app.py, __main__.py   the app's assembly and the server's command line
    settings.py, state.py broker.conf-style settings; what the lifespan starts and stops
    deps.py, errors.py    route dependencies; the one error table ({"reason": ...})
    routes/, services/    thin routers per resource; the rules they call
    http/                 ASGI layers: request rules, rate limit, deadline, encoded slash, hot path
    auth/                 authentication, authorisation, tokens, secrets, client certificates
    openapi/              the OpenAPI document and its pages (`openapi_export.py` prints it)
    shapes/               Pulsar JSON models, response shapes, path and query parameters
"""

from api.app import create_app
from api.settings import Settings, SettingsError, load_settings

__all__ = ["Settings", "SettingsError", "create_app", "load_settings"]
