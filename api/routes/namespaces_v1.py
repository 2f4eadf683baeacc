"""`/admin/namespaces` routes (namespaces_v1)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/admin/namespaces", tags=["namespaces"])
