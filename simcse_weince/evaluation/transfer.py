"""SentEval transfer protocol on frozen embeddings, with two classifiers.

``classifier="senteval"`` (the default) is SentEval's own PyTorch path as the SimCSE authors configure it and
as published tables use it (:mod:`~simcse_weince.evaluation.senteval_classifier`): samples in SentEval's order
(sorted by length, then label), its folds (``StratifiedKFold(shuffle=True, random_state=1111)``), the L2 grid
``1e-5 … 1e-2`` as weight decay, early-stopped Adam (test) / RMSprop (fast), dev scores rounded to 2 decimals
before the arg-max, as SentEval does:

* ``cv`` (MR, CR, SUBJ, MPQA): per outer fold, each penalty is scored by an inner k-fold (each inner model
  early-stopped on its inner test fold, scored there); the best penalty is refitted on the outer training
  fold (5 % of it held out for early stopping) and scored on the outer test fold;
* ``test`` (TREC, MRPC): the penalty by k-fold on the training set, then a refit on all of it (5 % held out)
  scored on the fixed test set (MRPC also F1);
* ``dev`` (SST-2): one model per penalty, early-stopped on dev; the best on dev is scored on test.

``classifier="sklearn"`` is scikit-learn's exact L2 logistic regression with the penalty ``C`` searched over
SentEval's scikit-learn grid ``2^-2 … 2^3`` (samples in file order):

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
from typing import Literal, get_args

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from simcse_weince.evaluation.encoder import Encoder
from simcse_weince.evaluation.senteval_classifier import (
    ENGINES,
    L2_GRID,
    TEST_CONFIG,
    ClassifierConfig,
    Engine,
    Fitted,
    Job,
    fit_logregs,
)
from simcse_weince.evaluation.transfer_data import Split, TransferTask, senteval_order

Classifier = Literal["senteval", "sklearn"]
CLASSIFIERS: tuple[str, ...] = get_args(Classifier)

C_GRID: tuple[float, ...] = tuple(2.0**t for t in range(-2, 4))


@dataclass
class TransferResult:
    task: str
    dev_acc: float
    test_acc: float
    test_f1: float | None = None
    num_train: int = 0
    num_test: int = 0
    chosen_c: list[float] = field(default_factory=list)  # the penalty chosen (C for sklearn, l2 for senteval)
    seconds: float = 0.0
    classifier: str = "sklearn"
    classifier_seconds: float = 0.0

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
    classifier: Classifier = "sklearn",
    config: ClassifierConfig | None = None,
    device: str | torch.device | None = None,
    show_progress_bar: bool = False,
    engine: Engine = "auto",
) -> TransferResult:
    """Encode the task's sentences once and run its protocol with ``classifier``.

    ``config`` (senteval only) defaults to SentEval's test-mode settings; ``device`` is where the batched
    classifiers train (default: CUDA when available); ``engine`` how they step
    (:func:`~simcse_weince.evaluation.senteval_classifier.fit_logregs`; ``"auto"``: CUDA graphs on a GPU);
    ``max_iter`` is the sklearn solver's limit; ``show_progress_bar`` shows a bar per phase counting the
    senteval classifiers that have finished.
    """
    if classifier not in CLASSIFIERS:
        raise ValueError(f"classifier must be one of {CLASSIFIERS}, got {classifier!r}")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    t0 = time.perf_counter()
    splits = task.splits
    if classifier == "senteval":  # SentEval hands its classifier the samples sorted by length, then label
        splits = {name: _reordered(split) for name, split in splits.items()}

    def feats(split: str) -> np.ndarray:
        s = splits[split]
        if s.sentences2 is None:
            return encoder.encode(s.sentences)
        return pair_features(encoder.encode(s.sentences), encoder.encode(s.sentences2))

    names = (
        ["all"]
        if task.protocol == "cv"
        else (["train", "dev", "test"] if task.protocol == "dev" else ["train", "test"])
    )
    if task.protocol not in ("cv", "dev", "test"):
        raise ValueError(f"unknown protocol {task.protocol!r} of task {task.name}")
    x = {n: feats(n) for n in names}
    y = {n: splits[n].labels for n in names}
    t_cls = time.perf_counter()
    if classifier == "senteval":
        res = _senteval(task, x, y, k, seed, config or TEST_CONFIG, device, log, show_progress_bar, engine)
    else:  # one BLAS thread: these fits are small, and BLAS pools spinning beside torch's were many times slower
        with threadpool_limits(limits=1, user_api="blas"):
            res = _sklearn(task, x, y, k, seed, max_iter)
    res.classifier_seconds = time.perf_counter() - t_cls
    res.seconds = time.perf_counter() - t0
    res.classifier = classifier
    if log:
        log(f"{task.name}: dev {res.dev_acc:.2f} test {res.test_acc:.2f} ({classifier}, {res.seconds:.0f} s)")
    return res


def classifier_device(device: str | torch.device | None) -> torch.device:
    """Where the senteval classifiers train: ``device``, else CUDA when available, else the CPU."""
    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def _reordered(split: Split) -> Split:
    order = senteval_order(split)
    return Split(
        [split.sentences[i] for i in order],
        split.labels[order],
        None if split.sentences2 is None else [split.sentences2[i] for i in order],
    )


def _sklearn(task: TransferTask, x: dict, y: dict, k: int, seed: int, max_iter: int) -> TransferResult:
    if task.protocol == "cv":
        dev, test, chosen = cv_protocol(x["all"], y["all"], k, seed, max_iter=max_iter)
        return TransferResult(task.name, dev, test, None, len(y["all"]), len(y["all"]), chosen)
    if task.protocol == "test":
        c, dev = select_c(x["train"], y["train"], k, seed, max_iter=max_iter)
        pred = _fit(x["train"], y["train"], c, seed, max_iter).predict(x["test"])
        f1 = 100 * float(f1_score(y["test"], pred)) if task.num_classes == 2 else None
        acc = 100 * float(np.mean(pred == y["test"]))
        return TransferResult(task.name, 100 * dev, acc, f1, len(y["train"]), len(y["test"]), [c])
    fits = [(c, _fit(x["train"], y["train"], c, seed, max_iter)) for c in C_GRID]
    dev_scores = [m.score(x["dev"], y["dev"]) for _, m in fits]
    best = int(np.argmax(dev_scores))
    test = 100 * fits[best][1].score(x["test"], y["test"])
    return TransferResult(
        task.name, 100 * dev_scores[best], test, None, len(y["train"]), len(y["test"]), [fits[best][0]]
    )


Fit = Callable[[str, list[Job], str], Fitted]  # fit(split, jobs, phase): one phase's classifiers, trained together


def _senteval(
    task: TransferTask,
    x: dict,
    y: dict,
    k: int,
    seed: int,
    config: ClassifierConfig,
    device,
    log: Callable[[str], None] | None,
    show_progress_bar: bool = False,
    engine: Engine = "auto",
) -> TransferResult:
    """SentEval's InnerKFold / KFold / Split classifiers (``senteval/tools/validation.py``), all models of a
    phase trained together: (1) the features and labels on the classifiers' device (:func:`_on_device`), (2) a
    trainer of one phase's classifiers (:func:`_phase_trainer`), (3) the task's protocol (:func:`_senteval_cv`,
    :func:`_senteval_test`, :func:`_senteval_dev`)."""
    device = classifier_device(device)
    config = ClassifierConfig(
        config.optim, config.batch_size, config.tenacity, config.epoch_size, config.max_epoch, seed
    )
    data = _on_device(x, y, device)
    fit = _phase_trainer(task, data, config, engine, log, show_progress_bar)
    protocol = {"cv": _senteval_cv, "test": _senteval_test}.get(task.protocol, _senteval_dev)
    return protocol(task, fit, data, x, y, k, seed)


def _on_device(x: dict, y: dict, device: torch.device) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Step (1): each split's features (float32) and labels (int64) as tensors on ``device``."""
    return {
        n: (
            torch.as_tensor(x[n], dtype=torch.float32, device=device),
            torch.as_tensor(y[n], dtype=torch.int64, device=device),
        )
        for n in x
    }


def _phase_trainer(
    task: TransferTask,
    data: dict[str, tuple[torch.Tensor, torch.Tensor]],
    config: ClassifierConfig,
    engine: Engine,
    log: Callable[[str], None] | None,
    show_progress_bar: bool,
) -> Fit:
    """Step (2): ``fit(split, jobs, phase)`` trains a phase's jobs on ``data[split]`` together
    (:func:`~simcse_weince.evaluation.senteval_classifier.fit_logregs`), a progress bar counting the classifiers
    that have stopped, and logs the phase's time."""

    def fit(split: str, jobs: list[Job], phase: str) -> Fitted:
        t0 = time.perf_counter()
        bar = tqdm(
            total=len(jobs), desc=f"{task.name}: {phase}", unit="classifier", leave=False, disable=not show_progress_bar
        )

        def progress(passes: int, training: int) -> None:  # the bar counts the classifiers that have stopped
            bar.update(len(jobs) - training - bar.n)
            bar.set_postfix(passes=passes)

        fitted = fit_logregs(*data[split], jobs, task.num_classes, config, progress, engine)
        bar.close()
        if log:
            log(f"{task.name}: {phase}: {len(jobs)} classifiers trained together ({time.perf_counter() - t0:.0f} s)")
        return fitted

    return fit


def _pick(scores: list[float]) -> int:
    """The first maximum, as SentEval's ``np.argmax``."""
    return int(np.argmax(scores))


def _senteval_cv(task: TransferTask, fit: Fit, data: dict, x: dict, y: dict, k: int, seed: int) -> TransferResult:
    """Step (3), ``cv`` tasks (SentEval's InnerKFold; MR, CR, SUBJ, MPQA), with SentEval's fixed fold seed 1111:
    for each outer fold, each penalty's dev score is the mean accuracy × 100 of an inner k-fold (each inner model
    early-stopped on its inner test fold), rounded to 2 decimals; the best penalty is refitted on the outer training
    fold (5 % held out) and scored on the outer test fold. Dev and test: the means over outer folds, rounded."""
    xs, ys = x["all"], y["all"]
    outer = list(StratifiedKFold(n_splits=k, shuffle=True, random_state=1111).split(xs, ys))
    inner = StratifiedKFold(n_splits=k, shuffle=True, random_state=1111)
    jobs = [Job(tr[itr], tr[ite], l2) for tr, _ in outer for l2 in L2_GRID for itr, ite in inner.split(xs[tr], ys[tr])]
    fitted = fit("all", jobs, "penalty search (outer folds × penalties × inner folds)")
    inner_acc = fitted.dev_accuracy.reshape(len(outer), len(L2_GRID), k)  # in the order the jobs were made
    dev_results, chosen = [], []
    for fold_acc in inner_acc:
        scores = [round(100 * float(np.mean(row)), 2) for row in fold_acc]
        best = _pick(scores)
        dev_results.append(scores[best])
        chosen.append(L2_GRID[best])
    refit = fit("all", [Job(tr, None, l2) for (tr, _), l2 in zip(outer, chosen, strict=True)], "refit per outer fold")
    xa, ya = data["all"]
    test_results = []
    for f, (_, te) in enumerate(outer):
        te_t = torch.as_tensor(te, device=xa.device)
        test_results.append(round(100 * refit.accuracy(f, xa[te_t], ya[te_t]), 2))
    dev, test = round(float(np.mean(dev_results)), 2), round(float(np.mean(test_results)), 2)
    return TransferResult(task.name, dev, test, None, len(ys), len(ys), chosen)


def _senteval_test(task: TransferTask, fit: Fit, data: dict, x: dict, y: dict, k: int, seed: int) -> TransferResult:
    """Step (3), ``test`` tasks (SentEval's KFold; TREC, MRPC): each penalty's dev score is the mean accuracy × 100
    of a k-fold on the training set (folds seeded by ``seed``), rounded to 2 decimals; the best penalty is refitted
    on all of it (5 % held out) and scored on the fixed test set (binary tasks also F1)."""
    xs, ys = x["train"], y["train"]
    folds = list(StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(xs, ys))
    jobs = [Job(tr, te, l2) for l2 in L2_GRID for tr, te in folds]
    fitted = fit("train", jobs, "penalty search (penalties × folds)")
    accs = fitted.dev_accuracy.reshape(len(L2_GRID), len(folds))
    scores = [round(100 * float(np.mean(row)), 2) for row in accs]
    best = _pick(scores)
    refit = fit("train", [Job(np.arange(len(ys)), None, L2_GRID[best])], "refit on the training set")
    xt, yt = data["test"]
    pred = refit.predict(0, xt)
    acc = round(100 * float((pred == yt).float().mean()), 2)
    f1 = round(100 * float(f1_score(y["test"], pred.cpu().numpy())), 2) if task.num_classes == 2 else None
    return TransferResult(task.name, scores[best], acc, f1, len(ys), len(y["test"]), [L2_GRID[best]])


def _senteval_dev(task: TransferTask, fit: Fit, data: dict, x: dict, y: dict, k: int, seed: int) -> TransferResult:
    """Step (3), ``dev`` tasks (SentEval's Split; SST-2): one model per penalty, trained on the training split and
    early-stopped on the dev split; the best dev accuracy × 100 (rounded to 2 decimals) picks the model scored on
    test."""
    n_train, n_dev = len(y["train"]), len(y["dev"])
    # one feature matrix holding train then dev rows, so that each model validates on the dev rows
    data["train+dev"] = (torch.cat([data["train"][0], data["dev"][0]]), torch.cat([data["train"][1], data["dev"][1]]))
    jobs = [Job(np.arange(n_train), np.arange(n_train, n_train + n_dev), l2) for l2 in L2_GRID]
    fitted = fit("train+dev", jobs, "one classifier per penalty")
    scores = [round(100 * float(a), 2) for a in fitted.dev_accuracy]
    best = _pick(scores)
    acc = round(100 * fitted.accuracy(best, *data["test"]), 2)
    return TransferResult(task.name, scores[best], acc, None, n_train, len(y["test"]), [L2_GRID[best]])
