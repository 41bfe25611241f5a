"""Copy what ``compute.py`` needs of the vision runs out of their (git-ignored) folders, once they have finished.

    .venv/bin/python experiments/results/link_proxies/gather.py [--runs_dir outputs/experiments/paper_protocol_links]

Writes ``vision_learned.json`` beside this file: the learned link's final (a, b) per seed (``results.json`` of each
run of arm (g)).
"""

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--runs_dir", default=str(REPO / "outputs/experiments/paper_protocol_links"))
args = ap.parse_args()
runs = Path(args.runs_dir)
learned = {}
for folder in sorted(runs.glob("learned_link_*-seed*")):
    if (folder / "results.json").is_file():
        r = json.loads((folder / "results.json").read_text())
        learned[folder.name.rsplit("-seed", 1)[1]] = [r["link_a_final"], r["link_b_final"]]
(HERE / "vision_learned.json").write_text(json.dumps(learned, indent=1, sort_keys=True) + "\n")
print(learned)
