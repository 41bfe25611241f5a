"""Several text training runs, one after another, in the processes of one ``accelerate launch`` (the launch and
the imports are paid once): ``accelerate launch ... tests/text/runs_in_one_launch.py RUNS.json``, where the file
holds a JSON list of command lines of ``train_unsup.py``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from simcse_weince.cli.train_text import main

if __name__ == "__main__":
    import torch.distributed as dist

    for argv in json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")):
        code = main(argv)
        if code:
            raise SystemExit(code)
    if dist.is_initialized():  # leave together and close the group (see tests/text/grad_cache_ddp.py)
        dist.barrier()
        dist.destroy_process_group()
