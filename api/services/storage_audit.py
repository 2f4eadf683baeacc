"""Placement audits run in the background: `python -m pipeline snapshot` then
`python -m pipeline audit`, each a child process (Spark never runs in the server process).

A job lives in `<dataDir>/audits/<id>/`: `broker.conf` (the placement keys in effect, handed to
the snapshot), `snapshot/` (the five Parquet tables), `audit/` (the audit's outputs, its
`summary.json` and `report.html`), `snapshot.log` and `audit.log` (the children's stderr).
Progress comes from the children's stderr lines: the snapshot's `N ledgers read` and the
audit's stage lines. One audit runs at a time; the jobs of this process are listed in memory,
and a finished audit of an earlier run (its directory with `audit/summary.json`) is found on
disk by its id.

Repair (`POST .../{id}/repair`): the DONE audit's `repair_plan.parquet` is handed to the
replication workers' plan path (`storage.autorecovery.plan_repair`), which re-checks each move
against the live metadata, topology and the ledger's recorded policy before copying; progress
(moves applied, skipped with a reason, failed with a reason) is the job's `repair`.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from api.errors import Conflict, NotFound
from storage.autorecovery import PlannedMove, RepairProgress

Repairer = Callable[[list[PlannedMove], RepairProgress], Coroutine[Any, Any, RepairProgress]]

LEDGERS_READ = re.compile(r"snapshot: (\d+) ledgers read")
AUDIT_STAGE = re.compile(r"^\[audit\s+[\d.]+s\] (.*)$")
AUDIT_STEP = re.compile(r"^(\d)/(\d) ")
_TAIL = 20


@dataclass
class AuditJob:
    """One audit: `state` is SNAPSHOT, AUDIT, DONE or FAILED."""

    id: str
    directory: Path
    state: str = "SNAPSHOT"
    stage: str = "reading the metadata store"
    ledgers_read: int = 0
    steps_done: float = 0.0  # share of the audit's own stages done (its `k/5` lines)
    started: float = field(default_factory=time.time)
    finished: float | None = None
    error: str | None = None
    summary: dict[str, Any] | None = None
    task: asyncio.Task[None] | None = None
    repair: RepairProgress | None = None
    repair_task: asyncio.Task[RepairProgress] | None = None

    @property
    def running(self) -> bool:
        return self.state in ("SNAPSHOT", "AUDIT")

    @property
    def report(self) -> Path:
        return self.directory / "audit" / "report.html"

    def progress(self) -> float:
        """A rough share done: the snapshot is the first tenth, the audit's stages the rest."""
        if self.state == "SNAPSHOT":
            return 0.0
        if self.state == "AUDIT":
            return 0.1 + 0.9 * self.steps_done
        return 1.0


class StorageAuditService:
    def __init__(self, store_url: str, broker_conf: Mapping[str, str], root: Path, *,
                 master: str | None = None, python: str = sys.executable,
                 repairer: Repairer | None = None) -> None:
        self.store_url = store_url
        self.repairer = repairer
        self.broker_conf = dict(broker_conf)
        self.root = root
        self.master = master
        self.python = python
        self.jobs: dict[str, AuditJob] = {}

    def start(self) -> AuditJob:
        """Start an audit; `Conflict` while another one runs."""
        for job in self.jobs.values():
            if job.running:
                raise Conflict(f"An audit is already running: {job.id}")
        audit_id = uuid.uuid4().hex[:12]
        job = AuditJob(audit_id, self.root / "audits" / audit_id)
        job.directory.mkdir(parents=True, exist_ok=True)
        self.jobs[job.id] = job
        job.task = asyncio.get_running_loop().create_task(self._run(job))
        return job

    def get(self, audit_id: str) -> AuditJob:
        job = self.jobs.get(audit_id) or self._on_disk(audit_id)
        if job is None:
            raise NotFound(f"Audit {audit_id} not found")
        return job

    def _on_disk(self, audit_id: str) -> AuditJob | None:
        """A finished audit of an earlier run, from its directory."""
        if not audit_id.isalnum():
            return None
        directory = self.root / "audits" / audit_id
        summary = directory / "audit" / "summary.json"
        if not summary.is_file():
            return None
        job = AuditJob(audit_id, directory, state="DONE", stage="done",
                       started=directory.stat().st_mtime, finished=summary.stat().st_mtime,
                       summary=json.loads(summary.read_text()))
        self.jobs[audit_id] = job
        return job

    def repair(self, audit_id: str) -> RepairProgress:
        """Hand the DONE audit's plan to the replication workers: `Conflict` before DONE or
        while its repair runs."""
        job = self.get(audit_id)
        if job.state != "DONE":
            raise Conflict(f"Audit {audit_id} has no repair plan yet (state {job.state})")
        if job.repair is not None and job.repair.state == "RUNNING":
            raise Conflict(f"The repair of audit {audit_id} is already running")
        if self.repairer is None:
            raise Conflict("This service has no replication worker to repair with")
        import pyarrow.parquet as pq  # here: the server loads pyarrow only for a repair

        out = job.directory / "audit"
        rows = pq.read_table(out / "repair_plan.parquet").to_pylist()
        unfixable = pq.read_metadata(out / "unfixable.parquet").num_rows
        moves = [PlannedMove(int(r["ledger_id"]), int(r["segment"]), int(r["position"]),
                             str(r["bookie_out"]), str(r["bookie_in"])) for r in rows]
        job.repair = RepairProgress(moves=len(moves), unfixable=unfixable)
        job.repair_task = asyncio.get_running_loop().create_task(
            self.repairer(moves, job.repair))
        return job.repair

    def report(self, audit_id: str) -> Path:
        job = self.get(audit_id)
        if job.state != "DONE" or not job.report.exists():
            raise Conflict(f"Audit {audit_id} has no report yet (state {job.state})")
        return job.report

    async def stop(self) -> None:
        for job in self.jobs.values():
            for task in (job.task, job.repair_task):
                if task is not None and not task.done():
                    task.cancel()

    async def _run(self, job: AuditJob) -> None:
        conf = job.directory / "broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in sorted(self.broker_conf.items())
                                if "\n" not in f"{k}{v}"))
        snapshot = [self.python, "-m", "pipeline", "snapshot", "--config", str(conf),
                    "--metadata-store-url", self.store_url, "--out",
                    str(job.directory / "snapshot")]
        audit = [self.python, "-m", "pipeline", "audit", "--snapshot",
                 str(job.directory / "snapshot"), "--out", str(job.directory / "audit")]
        if self.master:
            audit += ["--master", self.master]
        try:
            if not await self._child(job, snapshot, job.directory / "snapshot.log"):
                return
            job.state, job.stage = "AUDIT", "starting Spark"
            if not await self._child(job, audit, job.directory / "audit.log"):
                return
            job.summary = json.loads((job.directory / "audit" / "summary.json").read_text())
            job.state, job.stage = "DONE", "done"
        except Exception as exc:  # a job's failure is its state, never the server's
            job.state, job.error = "FAILED", f"{type(exc).__name__}: {exc}"
        finally:
            job.finished = time.time()

    async def _child(self, job: AuditJob, argv: list[str], log: Path) -> bool:
        process = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        tail: list[str] = []
        assert process.stderr is not None
        try:
            with log.open("w") as sink:
                async for raw in process.stderr:
                    for line in raw.decode(errors="replace").replace("\r", "\n").splitlines():
                        sink.write(line + "\n")
                        tail = [*tail, line][-_TAIL:]
                        if m := LEDGERS_READ.search(line):
                            job.ledgers_read = int(m.group(1))
                        elif m := AUDIT_STAGE.match(line):
                            job.stage = m.group(1)
                            if step := AUDIT_STEP.match(job.stage):
                                job.steps_done = int(step.group(1)) / int(step.group(2))
            code = await process.wait()
        except asyncio.CancelledError:
            process.kill()
            await process.wait()
            job.state, job.error = "FAILED", "cancelled (server stopping)"
            raise
        if code != 0:
            errors = [t for t in tail if t.startswith("error:")]
            job.state = "FAILED"
            job.error = (errors[-1] if errors else "\n".join(tail[-3:])) or f"exit code {code}"
            return False
        return True
