"""`/admin/v2/clusters` routes (clusters)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/admin/v2/clusters", tags=["clusters"])
