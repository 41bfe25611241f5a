"""The store of a sweep's finished cells, so that a killed sweep resumes where it stopped with the same command.

``<sweep>.cells.jsonl`` holds one JSON line per finished cell, flushed and synced as it is written, so a kill
loses only the cells in flight; a torn last line (a kill mid-write) is dropped and its cell runs again.
A record without a figure the sweep now computes (:func:`~weince_lab.simulation.sweep_cells.is_complete`, e.g.
one stored before the ranking fields existed) is not done: its cell runs again, and :meth:`CellStore.start` drops
the outdated lines from the file (replaced whole, so a kill leaves the old file or the new one).
``<sweep>.settings.json`` beside it holds the settings the cells were made with: a resume with other settings
(other than those the sweep does not read) is refused (:func:`~simcse_weince.core.setting_changes.setting_changes`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from simcse_weince.core.atomic import write_text_atomic
from simcse_weince.core.setting_changes import setting_changes
from weince_lab.simulation.sweep_cells import cell_key, is_complete
from weince_lab.simulation.sweep_settings import IGNORED, SweepSettings


class CellStore:
    """The finished cells of one sweep in ``out`` (see the module docstring).

    Raises:
        ValueError: ``out`` holds the sweep with other settings, or cells without their settings file.
    """

    def __init__(self, out: Path, settings: SweepSettings) -> None:
        self.path = out / f"{settings.sweep}.cells.jsonl"
        self.settings_path = out / f"{settings.sweep}.settings.json"
        self.settings = settings.to_dict()
        self.done: dict[str, dict] = {}
        self.outdated = 0  # records lacking a figure the sweep now computes (run again)
        if self.settings_path.exists():
            before = json.loads(self.settings_path.read_text())
            changed = setting_changes(before, self.settings, ignore=IGNORED[settings.sweep])
            if changed:
                raise ValueError(
                    f"{out} holds a {settings.sweep} sweep with other settings ({', '.join(changed)}): "
                    "give the same options to resume it, or a new --out"
                )
        elif self.path.exists():
            raise ValueError(f"{self.path} has no settings file beside it ({self.settings_path.name}): use a new --out")
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line torn by a kill: that cell runs again
                if not is_complete(settings.sweep, record):
                    self.outdated += 1
                    continue
                self.done[cell_key(record["cell"])] = record

    def start(self) -> None:
        """Write the settings file, drop outdated records from the store, and end a torn last line so that the next
        record starts on its own line."""
        self.settings_path.parent.mkdir(parents=True, exist_ok=True)
        self.settings_path.write_text(json.dumps(self.settings, indent=2))
        if self.outdated:  # keep only the current records (a torn line goes with the outdated ones)
            write_text_atomic(self.path, "".join(json.dumps(r) + "\n" for r in self.done.values()))
            self.outdated = 0
        if self.path.exists() and (text := self.path.read_text()) and not text.endswith("\n"):
            with self.path.open("a") as f:
                f.write("\n")

    def kept(self, total: int) -> str:
        """What a stop keeps and how to go on (the store is read back by the same command)."""
        return (
            f"kept {len(self.done)} of {total} cells in {self.path} (the cells in progress are dropped); run the "
            "same command to resume from there"
        )

    def add(self, record: dict) -> None:
        """Append a finished cell's record (flushed and synced)."""
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.done[cell_key(record["cell"])] = record
