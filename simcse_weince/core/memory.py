"""Sizes checked against the memory they need, before anything is allocated.

A command whose allocations scale with its size flags estimates the bytes a setting needs, flag by flag, and
calls :func:`check_memory` before any work: a setting that cannot fit in the memory available now ends in one
``ValueError`` naming the flag that needs the most, its value, the estimate and the limit, instead of a
``MemoryError`` (or the kernel's OOM killer) minutes later. The estimates are rough upper bounds of the arrays the
code allocates (the dominant terms only); the limit is what the machine can give now (``MemAvailable``, and the
cgroup's limit in a container), not its total memory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["available_bytes", "check_memory", "size_text"]

_CGROUP = Path("/sys/fs/cgroup")


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    """The room left under this process's cgroup (v2) memory limit, or ``None`` when there is no limit."""
    try:
        limit = (_CGROUP / "memory.max").read_text().strip()
        if limit == "max":
            return None
        used = int((_CGROUP / "memory.current").read_text().strip())
        return max(int(limit) - used, 0)
    except (OSError, ValueError):
        return None


def available_bytes() -> int:
    """The memory this process can allocate now: ``MemAvailable`` of ``/proc/meminfo`` (else the free physical
    pages, else all physical pages), lowered to the room under a cgroup limit."""
    found = _meminfo_available()
    if found is None:
        for name in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
            try:
                found = os.sysconf(name) * os.sysconf("SC_PAGE_SIZE")
                break
            except (ValueError, OSError, AttributeError):
                continue
    room = _cgroup_room()
    candidates = [v for v in (found, room) if v is not None]
    return min(candidates) if candidates else 1 << 62


def size_text(n: float) -> str:
    """``n`` bytes in words: ``512 MB``, ``3.2 GB``, ``8e+12 GB``."""
    if n < 1 << 30:
        return f"{n / 2**20:.0f} MB"
    gb = n / 2**30
    return f"{gb:.1f} GB" if gb < 1e6 else f"{gb:.1e} GB"


def _shown(value: object) -> str:
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return str(value)


def check_memory(needs: Mapping[str, tuple[object, float]], what: str, available: int | None = None) -> float:
    """Refuse a setting whose estimated memory exceeds what is available; the estimate in bytes otherwise.

    Args:
        needs: ``flag -> (its value, the bytes that scale with it)``; the flags' bytes are added up.
        what: what the memory is for (``"the cells of 2 workers"``), said in the message.
        available: the limit in bytes (default: :func:`available_bytes`).

    Raises:
        ValueError: ``--items 10000000000 needs about 2.9e+12 GB of memory (...), more than the 12.0 GB
            available ...; expected a smaller --items``, naming the flag with the largest share.
    """
    total = float(sum(float(b) for _, b in needs.values()))
    limit = available_bytes() if available is None else available
    if total <= limit:
        return total
    flag, (value, _) = max(needs.items(), key=lambda item: float(item[1][1]))
    raise ValueError(
        f"{flag} {_shown(value)} needs about {size_text(total)} of memory ({what}), more than the "
        f"{size_text(limit)} available on this machine; expected a smaller {flag}"
    )
