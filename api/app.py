"""Assembly only: `create_app(settings)` builds the FastAPI app, `create_server_app(settings)`
what `python -m api` serves (the app behind the rack-write fast path); nothing happens at
import."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.types import ASGIApp

from api.auth.secrets import install_log_masking
from api.console import install_console
from api.deps import authorize_request
from api.errors import install_error_handlers
from api.http.deadline import RequestDeadline
from api.http.encoded_slash import EncodedSlashes
from api.http.hot_path import RackWriteHotPath
from api.http.rate_limit import WriteRateLimit
from api.http.request_rules import RequestRules, produce_body_limit, require_json_media_type
from api.http.trailing_slash import TrailingSlashes
from api.metrics import install_metrics
from api.openapi.doc import OpenApiApp
from api.openapi.docs_ui import install_docs_ui
from api.openapi.errors import install_error_responses
from api.routes import ROUTERS
from api.services.cluster_metadata import Initialised, keep_initializing
from api.settings import Settings
from api.state import AppState
from metastore.store import MetadataStore, open_metadata_store
from storage import LocalBookies

DESCRIPTION = (
    "Pulsar's admin REST API for bookie and broker isolation (racks, bookie affinity groups, "
    "failure domains, anti-affinity, namespace isolation policies), stored in etcd at Pulsar's "
    "own metadata keys. Operations tagged `extensions` (marked `x-pulsar-extension: true`) "
    "are additions Pulsar does not have; they never change the meaning of a Pulsar path."
)


def create_server_app(settings: Settings, bookies: LocalBookies | None = None) -> ASGIApp:
    """What `python -m api` serves: the request rules (`api.http.request_rules`) in front of
    everything, then the per-client write rate limit (`api.http.rate_limit`, when enabled), then the
    `set-bookie-rack` fast path, then the app. `bookies`: the local
    bookies this process supervises (`--bookies N`), controlled through
    `/admin/v2/storage/bookies`."""
    install_log_masking()
    app = create_app(settings, bookies)
    limit = settings.httpMaxRequestSize if settings.httpMaxRequestSize > 0 else 2**62
    served: ASGIApp = RackWriteHotPath(app, deadline_seconds=request_timeout(settings))
    if settings.httpWriteRequestsPerClientLimitEnabled:
        served = WriteRateLimit(
            served,
            settings.httpWriteRequestsPerClientMaxPerSecond,
            lambda: getattr(app.state, "pulsar", None),
        )
    return RequestRules(served, limit, produce_body_limit(settings.maxMessageSize))


def request_timeout(settings: Settings) -> float:
    return float(settings.metadataStoreOperationTimeoutSeconds)


def start_cluster_metadata(
    store: MetadataStore, settings: Settings
) -> asyncio.Task[Initialised] | None:
    """The first-start metadata of `pulsar standalone` (off with initializeClusterMetadata)."""
    if not settings.initializeClusterMetadata:
        return None
    return asyncio.create_task(keep_initializing(store, settings), name="cluster metadata")


def create_app(settings: Settings, bookies: LocalBookies | None = None) -> FastAPI:
    if not settings.metadataStoreUrl:
        raise ValueError("create_app needs settings.metadataStoreUrl (python -m api starts etcd)")
    timeout = request_timeout(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = open_metadata_store(settings.metadataStoreUrl, timeout * 0.8)
        state = AppState.build(settings, store, bookies)
        await state.start()
        app.state.pulsar = state
        initializing = start_cluster_metadata(store, settings)
        if initializing is not None:  # normally done at once; else it goes on in the background
            await asyncio.wait({initializing}, timeout=timeout)
        try:
            yield
        finally:
            if initializing is not None:
                initializing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await initializing
            await state.stop()

    app = OpenApiApp(
        title="Pulsar Admin REST API",
        version="v2",
        description=DESCRIPTION,
        license_info={
            "name": "Apache 2.0",
            "url": "http://www.apache.org/licenses/LICENSE-2.0.html",
        },
        lifespan=lifespan,
        dependencies=[Depends(authorize_request), Depends(require_json_media_type)],
        docs_url=None,
        redoc_url=None,
    )
    install_docs_ui(app)
    install_console(app)
    install_error_handlers(app)
    install_error_responses(app)
    for router in ROUTERS:
        app.include_router(router)
    install_metrics(app)
    app.add_middleware(RequestDeadline, seconds=timeout)
    app.add_middleware(TrailingSlashes)  # after EncodedSlashes, which rebuilds the path
    app.add_middleware(EncodedSlashes)
    return app
