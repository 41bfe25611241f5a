"""A driver whose run never ends, for ``test_common.py``: ``python orphan_driver.py function|module|subprocess
FOLDER``.

The run (through ``weince_lab.experiments.common.run_function`` or ``run_module``) writes its pid to
``FOLDER/run.pid``, and
``FOLDER/terminated`` when it gets SIGTERM (as a training run saves and stops), then sleeps.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path


def stay(folder: str) -> None:
    def terminated(signum, frame) -> None:
        (Path(folder) / "terminated").write_text("SIGTERM\n")
        os._exit(130)

    signal.signal(signal.SIGTERM, terminated)
    (Path(folder) / "run.pid").write_text(str(os.getpid()))
    while True:
        time.sleep(0.1)


def main(args: list[str]) -> int:  # the module form: run_module("tests.lab.experiments.orphan_driver", [FOLDER])
    stay(args[0])
    return 0


if __name__ == "__main__":
    import weince_lab.experiments.common as common

    common.PRELOAD = ()  # the server imports nothing heavy: the test is about processes, not libraries
    how, folder = sys.argv[1], sys.argv[2]
    if how == "function":
        common.run_function(stay, folder)
    elif how == "subprocess":  # a command the driver starts itself (sick_mining_ab, gpu_check)
        common.run_child([sys.executable, __file__, "stay", folder])
    elif how == "stay":
        stay(folder)
    else:
        common.run_module("tests.lab.experiments.orphan_driver", [folder], Path(folder) / "run.log")
