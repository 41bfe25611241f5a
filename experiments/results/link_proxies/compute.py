"""The link losses on the three real proxies (issue 43), each arm paired by seed with InfoNCE, from stored files only.

    .venv/bin/python experiments/results/link_proxies/compute.py

Arms: InfoNCE, WEINCE, the learned link (``learned_link``, its scalars at ``--loss_learning_rate 0.01``) and
temperature-free InfoNCE (``arctanh``); 3 seeds each (0, 1, 2). Reads:

* **text warm start** (``configs/quickstart.yaml``): ``../text_warmstart_links.json`` (InfoNCE, learned link),
  ``../text_warmstart_arctanh.json`` (arctanh), ``../text_warmstart.json`` (the stored InfoNCE and WEINCE (ols)
  runs of the same recipe and seeds; WEINCE is paired with the InfoNCE runs of its own file);
* **supervised SICK, pairs and triplets** (``configs/sup_quickstart.yaml``): ``../sup_sick_links.json``
  (InfoNCE, learned link, arctanh) and ``../sup_sick_mixed.json`` (the stored InfoNCE and WEINCE (ols) runs);
* **vision CPU proxy** (the paper's protocol, ``cpu_proxy_cifar10.yaml``, 4 epochs, held-out evaluation):
  ``../paper_protocol_links.json`` (arms (g) learned link and (j) arctanh), ``../paper_protocol_links_a.json`` (arm
  (a) InfoNCE re-run with them) and ``../paper_protocol_cpu.json`` (the stored arms (a) and (c) WEINCE, grid
  centre), with ``vision_learned.json`` (the learned link's final (a, b), gathered from the runs by ``gather.py``);
* ``diagnose/<proxy>/<arm>-seed<s>/report.json`` (and for text ``../text_warmstart_links_diagnose/``) where present:
  ``simcse-diagnose``'s (a, b) of the final models.

Where an arm comes from an earlier file, the InfoNCE runs of the two files are compared and the largest difference is
printed: the pairing by seed (same initialisation and data order) holds either way, and the table says which InfoNCE
each arm is paired with. Writes ``output.json`` and ``output.md`` beside this file: mean and 95 % Student-t interval.
"""

import json
from pathlib import Path

from weince_lab.simulation.search import mean_interval

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent
SEEDS = ("0", "1", "2")
TEXT_METRICS = ("STS-B", "STS avg")
VISION_METRICS = ("linear_probe", "knn50", "R@1")


def interval(values: list[float]) -> list[float]:
    return list(mean_interval(values))


def fmt(iv: list[float]) -> str:
    return f"{iv[0]:+.2f} [{iv[1]:+.2f}, {iv[2]:+.2f}]"


def load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def paired(runs: dict, base: dict, metrics: tuple[str, ...]) -> dict[str, list[float]]:
    return {m: interval([runs[s][m] - base[s][m] for s in SEEDS]) for m in metrics}


def largest_gap(a: dict, b: dict, metrics: tuple[str, ...], seeds=SEEDS) -> float:
    return max(abs(a[s][m] - b[s][m]) for s in seeds for m in metrics)


def text_proxy(new_file: str, old_file: str, arctanh_file: str | None) -> tuple[dict, dict, dict, float]:
    new, old = load(new_file), load(old_file)
    runs = dict(new["per_run"])
    if arctanh_file is not None:
        runs["arctanh"] = load(arctanh_file)["per_run"]["arctanh"]
    arms = {
        "weince-ols": paired(old["per_run"]["weince-ols"], old["per_run"]["infonce"], TEXT_METRICS),
        "learned_link": paired(runs["learned_link"], runs["infonce"], TEXT_METRICS),
        "arctanh": paired(runs["arctanh"], runs["infonce"], TEXT_METRICS),
    }
    absolute = {m: interval([runs["infonce"][s][m] for s in SEEDS]) for m in TEXT_METRICS}
    learned = {s: (r["link_a_final"], r["link_b_final"]) for s, r in new["lambda"]["learned_link"].items()}
    gap = largest_gap(runs["infonce"], old["per_run"]["infonce"], TEXT_METRICS)
    return absolute, arms, learned, gap


def vision_proxy() -> tuple[dict, dict, dict, float]:
    new, fresh, old = (load(f)["arms"] for f in ("paper_protocol_links.json", "paper_protocol_links_a.json",
                                                   "paper_protocol_cpu.json"))  # fmt: skip

    def per_seed(arm: dict) -> dict:
        return {s: {m: arm["selected"][m]["test"][s] for m in VISION_METRICS} for s in SEEDS}

    a, a_stored, c = per_seed(fresh["a"]), per_seed(old["a"]), per_seed(old["c"])
    g, j = per_seed(new["g"]), per_seed(new["j"])
    arms = {
        "weince (grid centre)": paired(c, a_stored, VISION_METRICS),
        "learned_link": paired(g, a, VISION_METRICS),
        "arctanh": paired(j, a, VISION_METRICS),
    }
    absolute = {m: interval([a[s][m] for s in SEEDS]) for m in VISION_METRICS}
    learned_file = HERE / "vision_learned.json"
    learned = json.loads(learned_file.read_text()) if learned_file.is_file() else {}
    return absolute, arms, learned, largest_gap(a, a_stored, VISION_METRICS)


def diagnosed(proxy: str) -> dict[str, dict]:
    out = {}
    folders = [HERE / "diagnose" / proxy] + ([RESULTS / "text_warmstart_links_diagnose"] if proxy == "text" else [])
    for report in sorted(r for folder in folders for r in folder.glob("*/report.json")):
        fit = json.loads(report.read_text())["link"]
        out[report.parent.name] = {k: fit[k] for k in ("a", "a_ci", "b", "b_ci", "heldout_gain", "heldout_gain_ci")}
    return out


def main() -> None:
    proxies = {
        "text warm start": (
            *text_proxy("text_warmstart_links.json", "text_warmstart.json", "text_warmstart_arctanh.json"),
            TEXT_METRICS,
            "text",
        ),
        "supervised SICK": (*text_proxy("sup_sick_links.json", "sup_sick_mixed.json", None), TEXT_METRICS, "sick"),
    }
    if (RESULTS / "paper_protocol_links.json").is_file():
        proxies["vision (protocol, 4 epochs)"] = (*vision_proxy(), VISION_METRICS, "vision")
    md = [
        "The link losses on the real proxies: arm − InfoNCE, paired by seed (0, 1, 2), mean [95 % t interval]; text: "
        "STS Spearman × 100 (test); vision: test accuracy / recall × 100 (the paper's protocol, held-out evaluation). "
        "From the stored files (`compute.py`).",
        "",
    ]
    summary = {}
    for proxy, (absolute, arms, learned, gap, metrics, key) in proxies.items():
        md += [
            f"**{proxy}** — InfoNCE: " + ", ".join(f"{m} {absolute[m][0]:.2f}" for m in metrics),
            "",
            "| arm − InfoNCE | " + " | ".join(metrics) + " |",
            "|---" * (len(metrics) + 1) + "|",
            *[f"| {arm} | " + " | ".join(fmt(r[m]) for m in metrics) + " |" for arm, r in arms.items()],
            "",
        ]
        if gap is not None:
            md.append(
                f"Stored InfoNCE against the InfoNCE re-run with the new arms: largest difference {gap:.3f} points "
                "(WEINCE is paired with the stored InfoNCE of its own file; the new arms with the re-run)."
            )
            md.append("")
        diag = diagnosed(key)
        names = sorted(set(diag) | {f"learned_link-seed{s}" for s in learned})
        md += [
            "| final model | learned (a, b) | diagnosed a | diagnosed b | held-out gain (nats) |",
            "|---|---|---|---|---|",
        ]
        for name in names:
            ab = learned.get(name.rsplit("-seed", 1)[1]) if name.startswith("learned_link") else None
            d = diag.get(name)
            cells = ["not run"] * 3 if d is None else [
                f"{d['a']:.2f} [{d['a_ci'][0]:.2f}, {d['a_ci'][1]:.2f}]",
                f"{d['b']:+.3f} [{d['b_ci'][0]:+.3f}, {d['b_ci'][1]:+.3f}]",
                f"{d['heldout_gain']:+.4f} [{d['heldout_gain_ci'][0]:+.4f}, {d['heldout_gain_ci'][1]:+.4f}]",
            ]  # fmt: skip
            learned_cell = "—" if ab is None else f"({ab[0]:.2f}, {ab[1]:.3f})"
            md.append(f"| {name} | {learned_cell} | " + " | ".join(cells) + " |")
        md.append("")
        summary[proxy] = {"infonce": absolute, "differences": arms, "learned": learned, "infonce_gap": gap,
                          "diagnosed": diag}  # fmt: skip
    (HERE / "output.json").write_text(json.dumps(summary, indent=1) + "\n")
    (HERE / "output.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
