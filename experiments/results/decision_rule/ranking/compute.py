"""The README's decision rule judged by ranking beside KL, from the stored files (no re-run).

    .venv/bin/python experiments/results/decision_rule/ranking/compute.py
    .venv/bin/python experiments/results/decision_rule/ranking/compute.py experiments/results/decision_rule_annealed

Reads RULE/decision_rule.json (the rule's fires counts per kernel × τ × size, `simcse-simulate decision-rule`;
RULE defaults to the folder above this file) and the temperature sweep's cells the rule's KL truth was read from
(its command's ``--sweep``; ``experiments/results/ground_truth`` when not given) and writes output.json and
output.md in RULE/ranking.

For every row of decision_rule.json with a truth (kernel, τ of the InfoNCE table, the run's training-set size):

* KL truth: WEINCE − InfoNCE universe KL paired by seed, 95 % Student-t interval (recomputed with
  ``sweep_truth`` and checked against the truth decision_rule.json stores); WEINCE *helps* when it lies below 0.
* Top-1 truth: WEINCE − InfoNCE top-1 agreement with the Bayes retriever, paired by seed, 95 % Student-t interval,
  from the same cells (kernel, τ, pairs; the sweep holds one k, the k the rule's InfoNCE tables were trained with).
  WEINCE *ranks better* when the interval lies above 0, *worse* when below 0, *no difference* otherwise.
* Right by ranking: if WEINCE ranks better, right = fires; otherwise (worse or no difference), right = runs − fires.
  Its share carries the exact (Clopper–Pearson) 95 % binomial interval, as the stored right-by-KL does.
"""

import json
import os
import shlex
import sys
from pathlib import Path

from weince_lab.simulation.decision_rule import clopper_pearson, read_cells, sweep_truth
from weince_lab.simulation.search import mean_interval

ROOT = Path(__file__).resolve().parents[4]  # the repository
RULE = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
HERE = RULE / "ranking"
HERE.mkdir(exist_ok=True)
stored = json.loads((RULE / "decision_rule.json").read_text(encoding="utf-8"))
words = shlex.split(stored["command"])
SWEEP = Path(words[words.index("--sweep") + 1]) if "--sweep" in words else Path("experiments/results/ground_truth")
records = read_cells(ROOT / SWEEP / "temperature.cells.jsonl")
pairs = stored["pairs"]

ks = {r["cell"]["k"] for r in records}
if len(ks) != 1:
    raise SystemExit(f"the temperature sweep holds several k {sorted(ks)}; match the rule's settings.ks[0]")


def top1_truth(kernel: str, tau: float) -> dict:
    """WEINCE − InfoNCE top-1 agreement paired by seed, mean and 95 % t interval, and the ranking verdict."""
    cell = (kernel, tau, pairs)
    top1 = {
        loss: {
            r["cell"]["seed"]: r["top1"]
            for r in records
            if (r["cell"]["kernel"], r["cell"]["tau"], r["cell"]["pairs"], r["cell"]["loss"]) == (*cell, loss)
        }
        for loss in ("weince", "infonce")
    }
    seeds = sorted(top1["weince"].keys() & top1["infonce"].keys())
    diffs = [top1["weince"][s] - top1["infonce"][s] for s in seeds]
    mean, low, high = mean_interval(diffs)
    verdict = "better" if low > 0 else "worse" if high < 0 else "no difference"
    return {"seeds": seeds, "diffs": diffs, "mean": mean, "low": low, "high": high, "ranks": verdict}


stored_truths = {(t["kernel"], t["tau"]): t for t in stored["truths"]}
rows = []
for r in stored["rows"]:
    if r["helps"] is None:  # design (A), the true cosines: no sweep cell, no truth
        continue
    kl = sweep_truth(records, r["kernel"], r["tau"], pairs)
    check = stored_truths[r["kernel"], r["tau"]]
    if abs(kl.mean - check["mean"]) > 1e-12 or kl.helps != r["helps"]:
        raise SystemExit(f"the KL truth of {r['kernel']} tau {r['tau']} differs from decision_rule.json's")
    t1 = top1_truth(r["kernel"], r["tau"])
    right = r["fires"] if t1["ranks"] == "better" else r["runs"] - r["fires"]
    rows.append(
        {
            "kernel": r["kernel"],
            "tau": r["tau"],
            "best": r["best"],
            "size": r["size"],
            "runs": r["runs"],
            "fires": r["fires"],
            "right_kl": r["right"],
            "right_kl_ci": r["right_ci"],
            "kl": {"mean": kl.mean, "low": kl.low, "high": kl.high, "helps": kl.helps},
            "top1": t1,
            "right_ranking": right,
            "right_ranking_share": right / r["runs"],
            "right_ranking_ci": list(clopper_pearson(right, r["runs"])),
        }
    )

kernels = list(dict.fromkeys(r["kernel"] for r in stored["rows"]))
sizes = list(dict.fromkeys(r["size"] for r in stored["rows"]))
rows.sort(key=lambda r: (kernels.index(r["kernel"]), r["tau"], sizes.index(r["size"])))
cells = list(dict.fromkeys((r["kernel"], r["tau"]) for r in rows))
verdicts = {(r["kernel"], r["tau"]): (r["kl"]["helps"], r["top1"]["ranks"]) for r in rows}
disagree = [c for c in cells if verdicts[c][0] != (verdicts[c][1] == "better")]

(HERE / "output.json").write_text(
    json.dumps({"pairs": pairs, "k": ks.pop(), "seeds": stored["seeds"], "rows": rows}, indent=1) + "\n",
    encoding="utf-8",
)


def pct(count: int, runs: int, ci) -> str:
    return f"{100 * count / runs:.0f}% [{100 * ci[0]:.0f}, {100 * ci[1]:.0f}]"


def iv(t: dict) -> str:
    return f"{t['mean']:+.4f} [{t['low']:+.4f}, {t['high']:+.4f}]"


sweep_text = Path(os.path.relpath(ROOT / SWEEP, HERE)).as_posix()  # as seen from the report
rule_arg = f" {RULE.relative_to(ROOT).as_posix()}" if len(sys.argv) > 1 else ""
md = [
    f"The decision rule judged by ranking beside KL: the rule's fires counts from ../decision_rule.json, the truths "
    f"from the temperature sweep's cells ({sweep_text}/temperature.cells.jsonl, {pairs:,} pairs, seeds "
    f"{', '.join(map(str, stored['seeds']))}), WEINCE − InfoNCE paired by seed, mean [95 % t interval]. KL truth: "
    "WEINCE helps when the KL interval lies below 0; right by KL = fires if it helps, else runs − fires (as stored). "
    "Top-1 truth (agreement with the Bayes retriever): WEINCE ranks better when the interval lies above 0, worse when "
    "below, no difference otherwise; right by ranking = fires if WEINCE ranks better, else (worse or no difference) "
    "runs − fires. Rates with exact (Clopper–Pearson) 95 % intervals; the runs share 3 tables per cell.",
    "",
    f"Command: `.venv/bin/python experiments/results/decision_rule/ranking/compute.py{rule_arg}`",
    "",
    "| kernel | τ | size | runs | fires | right by KL | KL truth | top-1 truth | right by ranking |",
    "|---|---|---|---|---|---|---|---|---|",
]
for r in rows:
    kl_word = "helps" if r["kl"]["helps"] else "does not help"
    md.append(
        f"| {r['kernel']} | {r['tau']:g}{' (best)' if r['best'] else ''} | {r['size']} | {r['runs']} | {r['fires']} | "
        f"{pct(r['right_kl'], r['runs'], r['right_kl_ci'])} | {iv(r['kl'])} {kl_word} | {iv(r['top1'])} "
        f"{r['top1']['ranks']} | {pct(r['right_ranking'], r['runs'], r['right_ranking_ci'])} |"
    )
md += ["", "Where the KL verdict and the ranking verdict disagree (one line per kernel, τ):", ""]
for kernel, tau in disagree:
    helps, ranks = verdicts[kernel, tau]
    md.append(
        f"* {kernel}, τ = {tau:g}: KL says WEINCE {'helps' if helps else 'does not help'}, ranking says "
        f"{ranks} for WEINCE, so right by ranking = {'fires' if ranks == 'better' else 'runs − fires'}."
    )
if not disagree:
    md.append("* none")
(HERE / "output.md").write_text("\n".join(md) + "\n", encoding="utf-8")
