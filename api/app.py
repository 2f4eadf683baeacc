"""Assembly only: `create_app(settings)` builds the FastAPI app, `create_server_app(settings)`
what `python -m api` serves (the app behind the rack-write fast path); nothing happens at
import."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.types import ASGIApp

from api.deadline import RequestDeadline
from api.deps import authorize_request
from api.encoded_slash import EncodedSlashes
from api.errors import install_error_handlers
from api.hot_path import RackWriteHotPath
from api.routes import ROUTERS
from api.settings import Settings
from api.state import AppState
from metastore.store import MetadataStore, parse_metadata_store_url

DESCRIPTION = (
    "Pulsar's admin REST API for bookie and broker isolation (racks, bookie affinity groups, "
    "failure domains, anti-affinity, namespace isolation policies), stored in etcd at Pulsar's "
    "own metadata keys. Operations tagged `extensions` (marked `x-pulsar-extension: true`) "
    "are additions Pulsar does not have; they never change the meaning of a Pulsar path."
)


def create_server_app(settings: Settings) -> ASGIApp:
    """What `python -m api` serves: the app behind the `set-bookie-rack` fast path."""
    app = create_app(settings)
    return RackWriteHotPath(app, deadline_seconds=request_timeout(settings))


def request_timeout(settings: Settings) -> float:
    return float(settings.metadataStoreOperationTimeoutSeconds)


def create_app(settings: Settings) -> FastAPI:
    if not settings.metadataStoreUrl:
        raise ValueError("create_app needs settings.metadataStoreUrl (python -m api starts etcd)")
    timeout = request_timeout(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = MetadataStore(parse_metadata_store_url(settings.metadataStoreUrl), timeout * 0.8)
        state = AppState.build(settings, store)
        await state.start()
        app.state.pulsar = state
        try:
            yield
        finally:
            await state.stop()

    app = FastAPI(
        title="Pulsar Admin REST API",
        version="v2",
        description=DESCRIPTION,
        license_info={
            "name": "Apache 2.0",
            "url": "http://www.apache.org/licenses/LICENSE-2.0.html",
        },
        lifespan=lifespan,
        dependencies=[Depends(authorize_request)],
    )
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    app.add_middleware(RequestDeadline, seconds=timeout)
    app.add_middleware(EncodedSlashes)
    return app
