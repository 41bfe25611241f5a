"""InfoNCE at τ 0.03 from the strict corpus's 90-minute start, paired by seed with that start's stored arms.

    python experiments/results/mlm_mini90_strict_tau003_paired/compute.py [OUT]

The field's losses from the strict start (``../mlm_mini90_strict_which_loss.json``) were run with InfoNCE at its one
τ, 0.05; from the start made again on the earlier corpus InfoNCE at τ 0.03 (where the learned temperature ended) took
most of HCL's, the sigmoid loss's and Focal-InfoNCE's gains (``../mlm_mini90_infonce_tau003.md``). This pairs the τ
0.03 runs made from the strict start again (``../mlm_mini90_strict_infonce_tau003.json``) with the stored runs of the
seven arms, seed by seed. Pairing runs of two sessions is sound only when the second session trains what the first
did: the start is the same file (its digest against ``../mlm_mini90_strict/model_run_record.json``, checked when it
was made again) and a stored run comes out the same when trained again (InfoNCE seed 0, ``infonce_seed0_again.json``
here): the largest difference of its figures from the stored run's is written beside the table. Writes output.md and
output.json beside this file (or into OUT).
"""

import json
import sys
from pathlib import Path

from weince_lab.experiments.common import summary_table
from weince_lab.experiments.text_runs import interval_table

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
BASE = "infonce:temperature=0.03"


def per_run(path: Path) -> dict[str, dict[int, dict[str, float]]]:
    runs = json.loads(path.read_text(encoding="utf-8"))["per_run"]
    return {v: {int(s): row for s, row in by_seed.items()} for v, by_seed in runs.items()}


def main() -> None:
    stored = per_run(RESULTS / "mlm_mini90_strict_which_loss.json")
    again = per_run(HERE / "infonce_seed0_again.json")["infonce"][0]
    first = stored["infonce"][0]
    reproduced = max(abs(again[m] - first[m]) for m in first)
    runs = {BASE: per_run(RESULTS / "mlm_mini90_strict_infonce_tau003.json")[BASE], **stored}
    metrics = [m for m in next(iter(runs[BASE].values())) if m != "anisotropy"]
    text, summary = summary_table(runs, metrics, BASE)
    intervals = interval_table(summary, metrics)
    summary["reproduced_max_abs_difference"] = reproduced
    header = (
        f"From the strict corpus's 90-minute start: the seven arms of ../mlm_mini90_strict_which_loss.json and {BASE} "
        f"(../mlm_mini90_strict_infonce_tau003.json), paired by seed ({len(summary['seeds'])} seeds) against {BASE}; "
        "test Spearman × 100, accuracy; mean ± std over seeds. InfoNCE seed 0 trained again "
        f"(infonce_seed0_again.json): the largest difference of its figures from the stored run's is {reproduced:.2g}."
    )
    md = f"{header}\n\n{text}\n\nPaired by seed: mean [95 % t interval]\n\n{intervals}\n"
    (OUT / "output.md").write_text(md, encoding="utf-8")
    (OUT / "output.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()
