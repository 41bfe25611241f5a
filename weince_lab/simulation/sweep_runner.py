"""Running a Ground truth II sweep: the cells not yet in its store, in this process or a pool of workers, then its
report (``<sweep>.md``, ``<sweep>.json``, ``<sweep>.png``).

A stop (Ctrl-C, ``SIGTERM``) keeps every finished cell and says so; the same command resumes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import as_completed
from pathlib import Path

from simcse_weince.core.stopping import Stopped, kept_on_stop, stop_name
from weince_lab.report import write
from weince_lab.simulation.cell_store import CellStore
from weince_lab.simulation.plots import plot_sweep
from weince_lab.simulation.sweep_cells import cell_key, cells, run_cell
from weince_lab.simulation.sweep_reports import REPORTS
from weince_lab.simulation.sweep_settings import SweepSettings
from weince_lab.simulation.worker_pool import stop_pool, worker_pool


def run_sweep(settings: SweepSettings, out: Path, workers: int, progress: Callable[[str], None] = print) -> list[dict]:
    """Run the cells not yet in the store; return every cell's record in the sweep's order.

    Raises:
        ValueError: ``out`` holds the sweep with other settings (:class:`CellStore`).
        Stopped: Ctrl-C or ``SIGTERM``: the workers are ended, the message says how many cells the store kept
            and that the same command resumes.
    """
    store = CellStore(out, settings)
    todo = [c for c in cells(settings) if cell_key(c) not in store.done]
    total = len(cells(settings))
    with kept_on_stop(lambda: store.kept(total)):
        if store.outdated:
            progress(f"{store.outdated} stored cells lack figures the sweep now computes: they run again")
        store.start()
        if len(todo) < total:
            progress(f"resuming: {total - len(todo)} of {total} cells already done in {store.path}")
        if workers == 1:
            for cell in todo:
                store.add(run_cell(settings, cell))
                progress(f"cell {len(store.done)}/{total} done: {cell_key(cell)}")
        elif todo:
            pool = worker_pool(workers)  # its workers end with this process, even on kill -9
            try:
                futures = [pool.submit(run_cell, settings, cell) for cell in todo]
                for future in as_completed(futures):
                    record = future.result()
                    store.add(record)
                    progress(f"cell {len(store.done)}/{total} done: {cell_key(record['cell'])}")
            except BaseException:
                stop_pool(pool)  # a stop or a failed cell: the other cells are not waited for
                raise
            pool.shutdown()
    return [store.done[cell_key(c)] for c in cells(settings)]


def write_report(settings: SweepSettings, records: list[dict], out: Path, started: float) -> tuple[dict, str]:
    """Write the sweep's report into ``out``; its summary (JSON) and Markdown tables. ``started`` is the
    ``time.perf_counter()`` of the command's start (the wall time in the summary).

    Raises:
        Stopped: Ctrl-C or ``SIGTERM`` while writing: the cells are kept, the report is not written.
    """
    sweep = settings.sweep
    try:
        summary, table = REPORTS[sweep](settings, records)
        image = plot_sweep(settings, summary, out / f"{sweep}.png")
        compute = sum(r["seconds"] for r in records)
        summary |= {
            "settings": settings.to_dict(),
            "cell_seconds": compute,
            "wall_seconds": time.perf_counter() - started,
        }
        table += f"\nCompute: {compute:.0f} s in cells ({len(records)} cells); plot {image.name}.\n"
        write(out / sweep, table, summary)
    except KeyboardInterrupt as err:
        raise Stopped(
            f"{stop_name(err)}: kept all {len(records)} cells in {out / (sweep + '.cells.jsonl')}, the report not "
            "written; run the same command to write it (no cell runs again)"
        ) from err
    return summary, table
