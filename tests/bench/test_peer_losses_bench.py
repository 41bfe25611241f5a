"""bench/peer_losses.py runs end to end against stand-ins for the authors' files (theirs are not in this repository):
stand-ins written here from the papers' formulas agree, and a stand-in with a wrong formula is reported as differing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# HCL's estimator as the paper states it (Robinson et al. 2021, eq. 4 with the debiasing of Chuang et al. 2020), in
# the shape of the authors' ``criterion``: NT-Xent views, the module-level ``temperature`` and ``device``.
HCL_STAND_IN = """
import torch
import training_code_that_is_not_here  # the real file imports its training code: the script must not import it


def get_negative_mask(batch_size):
    eye = torch.eye(batch_size, dtype=torch.bool)
    both = torch.cat([eye, eye], dim=1)
    return ~torch.cat([both, both], dim=0)


def criterion(out_1, out_2, tau_plus, batch_size, beta, estimator):
    views = torch.cat([out_1, out_2])
    sims = views @ views.T / temperature
    neg = sims.masked_select(get_negative_mask(batch_size).to(device)).view(2 * batch_size, -1).exp()
    pos = ((out_1 * out_2).sum(dim=-1) / temperature).exp().repeat(2)
    n = 2 * batch_size - 2
    weights = (beta * neg.log()).softmax(dim=-1)
    estimate = (n * (weights * neg).sum(dim=-1) - tau_plus * n * pos) / (1 - tau_plus)
    estimate = estimate.clamp(min=n * torch.e ** (-1 / temperature))
    return (-(pos / (pos + estimate)).log()).mean()
"""
FOCAL_STAND_IN = """
import torch
import training_code_that_is_not_here


def sp_logits(logits, t, m, y):
    positive = torch.nn.functional.one_hot(y).bool()
    return torch.where(positive, logits * logits, (logits + m) * logits) / t
"""


def _run(tmp_path: Path, focal: str) -> subprocess.CompletedProcess:
    (tmp_path / "main.py").write_text(HCL_STAND_IN)
    (tmp_path / "models.py").write_text(focal)
    cmd = [sys.executable, "bench/peer_losses.py", "--hcl", str(tmp_path / "main.py"), "--focal",
           str(tmp_path / "models.py")]  # fmt: skip
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.mark.bench
def test_stand_ins_of_the_papers_formulas_agree(tmp_path: Path) -> None:
    proc = _run(tmp_path, FOCAL_STAND_IN)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "(agree at 1e-6)" in proc.stdout
    assert sum(line.startswith("| 0.") for line in proc.stdout.splitlines()) == 48 + 24


@pytest.mark.bench
def test_a_wrong_formula_is_reported(tmp_path: Path) -> None:
    wrong = FOCAL_STAND_IN.replace("logits * logits", "logits")  # the positive's logit s/τ, not s²/τ
    proc = _run(tmp_path, wrong)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "(DIFFER at 1e-6)" in proc.stdout
