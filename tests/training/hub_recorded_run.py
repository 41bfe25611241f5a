"""``train_unsup.py`` with the Hub recorder installed, for runs launched in other processes (several machines):
``python hub_recorded_run.py RECORDER_FOLDER [train_unsup.py arguments]``. Every process records into the one
folder and writes the calls it made to ``calls-<rank>.json`` there."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from simcse_weince.cli.train_text import main
from tests.helpers import install_hub_recorder

if __name__ == "__main__":
    root = Path(sys.argv[1])
    patch = pytest.MonkeyPatch()
    hub = install_hub_recorder(patch, root)
    try:
        code = main(sys.argv[2:])
    finally:
        calls = {"calls": hub.calls, "commits": [c.message for c in hub.commits]}
        (root / f"calls-{os.environ.get('RANK', '0')}.json").write_text(json.dumps(calls), encoding="utf-8")
    raise SystemExit(code)
