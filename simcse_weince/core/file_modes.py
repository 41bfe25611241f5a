"""Saved files readable as any file of their folder: the permissions a plain ``open()`` gives, under the umask.

Some writers save through a temporary file that they rename into place (transformers' ``model.safetensors``):
``tempfile`` creates it with mode 0600 whatever the umask, so on a shared machine no one else could read an
exported model or a checkpoint's weights. :func:`give_usual_modes` widens such files to ``0o666 & ~umask``, the
mode ``open()`` would have given them; it never narrows a file (a user's umask of 077 keeps everything 0600).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def current_umask() -> int:
    """The process's umask (read from ``/proc`` where it can be, so that no file is created meanwhile under a
    changed one; else set and restored at once)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def give_usual_modes(folder: str | Path) -> list[Path]:
    """Widen every regular file under ``folder`` (or the file ``folder``) to at least ``0o666 & ~umask``.

    Returns:
        The files whose mode changed.
    """
    usual = 0o666 & ~current_umask()
    root = Path(folder)
    files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    changed = []
    for path in files:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode | usual != mode:
            os.chmod(path, mode | usual)
            changed.append(path)
    return changed
