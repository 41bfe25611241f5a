"""Copy each vision run's per-epoch k-NN 200 (the Trainer's evaluation on the probe sets, from its run log) and the
epoch of the checkpoint it kept into epochs.json beside this file.

    python experiments/results/which_loss_vision/gather.py [RUNS_DIR]

RUNS_DIR defaults to outputs/experiments/which_loss_vision (the runs of ../which_loss_vision.json; not kept in the
repository). The recipe keeps the checkpoint with the best k-NN 200 of its epochs, measured on the probe test set,
and scores that one; the last epoch's k-NN 200 is the same measurement of the last model, with nothing selected, so
compute.py reports it beside the kept checkpoint's figures.
"""

import ast
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
runs_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "outputs/experiments/which_loss_vision"
out: dict = {}
sections: dict[str, list[str]] = {}  # a run's log lines, by the --output_dir of the command line above them
for log in sorted(runs_dir.glob("*.log")):  # one log per run (the runs with settings shared one: split by command)
    run = None
    for line in log.read_text().splitlines():
        if line.startswith("$ python -m "):
            words = line.split()
            run = Path(words[words.index("--output_dir") + 1]).name
        elif run is not None:
            sections.setdefault(run, []).append(line)
for name, lines in sorted(sections.items()):
    results = json.loads((runs_dir / name / "results.json").read_text())
    epochs = {}
    for line in lines:
        if line.startswith("{") and "'eval_knn200'" in line:
            record = ast.literal_eval(line)
            epochs[str(round(float(record["epoch"])))] = float(record["eval_knn200"])
    steps_per_epoch = results["steps"] / results["epochs"]
    kept_step = int(results["best_checkpoint"].rsplit("-", 1)[1])
    kept_epoch = str(round(kept_step / steps_per_epoch))
    assert epochs[kept_epoch] == round(results["after"]["knn200"], 1), name  # the kept model, scored at the end
    run, seed = name.rsplit("-seed", 1)
    out.setdefault(run, {})[seed] = {"knn200_by_epoch": epochs, "kept_epoch": int(kept_epoch)}
(HERE / "epochs.json").write_text(json.dumps(out, indent=1) + "\n")
print(json.dumps(out, indent=1))
