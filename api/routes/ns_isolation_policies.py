"""`/admin/v2/clusters` routes (ns_isolation_policies)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/admin/v2/clusters", tags=["clusters"])
