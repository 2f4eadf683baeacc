"""`/admin/v2/tenants` routes (tenants)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/admin/v2/tenants", tags=["tenants"])
