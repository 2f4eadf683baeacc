"""`/admin/v2/namespaces` routes (namespaces)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/admin/v2/namespaces", tags=["namespaces"])
