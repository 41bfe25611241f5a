"""SentEval transfer protocol on frozen embeddings: L2-regularised logistic regression (scikit-learn).

The penalty ``C`` is searched over SentEval's grid ``2^-2 … 2^3``:

* ``cv`` tasks (MR, CR, SUBJ, MPQA): stratified k-fold (k = 10); inside each training fold an inner
  stratified k-fold picks C; the reported test accuracy is the mean over outer folds, the "dev" accuracy
  the mean inner-CV accuracy of the chosen C;
* ``test`` tasks (TREC, MRPC): an inner k-fold on the training set picks C, then one fit on all of it is
  scored on the fixed test set (MRPC also F1; features ``[|u − v|, u ⊙ v]`` as in SentEval);
* ``dev`` task (SST-2): C is chosen on the dev split, then scored on test.

All splits are seeded (``seed``, default 1111 as in SentEval).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold

from simcse_weince.evaluation.encoder import Encoder
from simcse_weince.evaluation.transfer_data import TransferTask

C_GRID: tuple[float, ...] = tuple(2.0**t for t in range(-2, 4))


@dataclass
class TransferResult:
    task: str
    dev_acc: float
    test_acc: float
    test_f1: float | None = None
    num_train: int = 0
    num_test: int = 0
    chosen_c: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _fit(x: np.ndarray, y: np.ndarray, c: float, seed: int, max_iter: int) -> LogisticRegression:
    return LogisticRegression(C=c, max_iter=max_iter, random_state=seed).fit(x, y)


def select_c(
    x: np.ndarray, y: np.ndarray, k: int, seed: int, grid: Sequence[float] = C_GRID, max_iter: int = 1000
) -> tuple[float, float]:
    """(best C, its mean inner-CV accuracy) by stratified k-fold on ``(x, y)``; ties go to the smaller C."""
    folds = list(StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(x, y))
    scores = []
    for c in grid:
        accs = [_fit(x[tr], y[tr], c, seed, max_iter).score(x[te], y[te]) for tr, te in folds]
        scores.append(float(np.mean(accs)))
    best = int(np.argmax(scores))
    return grid[best], scores[best]


def cv_protocol(x, y, k: int, seed: int, grid=C_GRID, max_iter: int = 1000) -> tuple[float, float, list[float]]:
    """Outer stratified k-fold with inner C selection: (mean dev acc, mean test acc, chosen Cs) × 100."""
    dev, test, chosen = [], [], []
    for tr, te in StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(x, y):
        c, d = select_c(x[tr], y[tr], k, seed, grid, max_iter)
        test.append(_fit(x[tr], y[tr], c, seed, max_iter).score(x[te], y[te]))
        dev.append(d)
        chosen.append(c)
    return 100 * float(np.mean(dev)), 100 * float(np.mean(test)), chosen


def pair_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """SentEval's MRPC features ``[|u − v|, u ⊙ v]``."""
    return np.concatenate([np.abs(u - v), u * v], axis=1)


def evaluate_transfer(
    encoder: Encoder,
    task: TransferTask,
    k: int = 10,
    seed: int = 1111,
    max_iter: int = 1000,
    log: Callable[[str], None] | None = None,
) -> TransferResult:
    """Encode the task's sentences once and run its protocol."""
    t0 = time.perf_counter()

    def feats(split: str) -> np.ndarray:
        s = task.splits[split]
        if s.sentences2 is None:
            return encoder.encode(s.sentences)
        return pair_features(encoder.encode(s.sentences), encoder.encode(s.sentences2))

    if task.protocol == "cv":
        x, y = feats("all"), task.splits["all"].labels
        dev, test, chosen = cv_protocol(x, y, k, seed, max_iter=max_iter)
        res = TransferResult(task.name, dev, test, None, len(y), len(y), chosen)
    elif task.protocol == "test":
        xtr, ytr = feats("train"), task.splits["train"].labels
        xte, yte = feats("test"), task.splits["test"].labels
        c, dev = select_c(xtr, ytr, k, seed, max_iter=max_iter)
        clf = _fit(xtr, ytr, c, seed, max_iter)
        pred = clf.predict(xte)
        f1 = 100 * float(f1_score(yte, pred)) if task.num_classes == 2 else None
        res = TransferResult(task.name, 100 * dev, 100 * float(np.mean(pred == yte)), f1, len(ytr), len(yte), [c])
    elif task.protocol == "dev":
        xtr, ytr = feats("train"), task.splits["train"].labels
        xdv, ydv = feats("dev"), task.splits["dev"].labels
        xte, yte = feats("test"), task.splits["test"].labels
        fits = [(c, _fit(xtr, ytr, c, seed, max_iter)) for c in C_GRID]
        dev_scores = [m.score(xdv, ydv) for _, m in fits]
        best = int(np.argmax(dev_scores))
        res = TransferResult(
            task.name,
            100 * dev_scores[best],
            100 * fits[best][1].score(xte, yte),
            None,
            len(ytr),
            len(yte),
            [fits[best][0]],
        )
    else:
        raise ValueError(f"unknown protocol {task.protocol!r} of task {task.name}")
    res.seconds = time.perf_counter() - t0
    if log:
        log(f"{task.name}: dev {res.dev_acc:.2f} test {res.test_acc:.2f} ({res.seconds:.0f} s)")
    return res
