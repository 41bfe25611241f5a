"""SentEval's classifier and its cross-validation, one model at a time, written from SentEval's source
(``senteval/tools/classifier.py`` and ``validation.py``) with torch.optim and autograd: the reference the
batched implementation is tested against."""

from __future__ import annotations

import copy

import numpy as np
import torch
from sklearn.model_selection import StratifiedKFold

from simcse_weince.evaluation.senteval_classifier import L2_GRID, ClassifierConfig, Job


def reference_fit(x, y, job: Job, classes: int, cfg: ClassifierConfig) -> tuple[torch.nn.Module, float]:
    """SentEval's PyTorchClassifier/MLP(nhid=0) fit, one model, as its source does it (CPU)."""
    rng = np.random.RandomState(cfg.seed)  # np.random.seed(seed) in the constructor
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], classes))
    opt = torch.optim.Adam(model.parameters()) if cfg.optim == "adam" else torch.optim.RMSprop(model.parameters())
    opt.param_groups[0]["weight_decay"] = job.l2
    loss_fn = torch.nn.CrossEntropyLoss()
    if job.dev is None:
        perm = rng.permutation(len(job.train))
        n_dev = int(0.05 * len(job.train))
        train, dev = job.train[perm[n_dev:]], job.train[perm[:n_dev]]
    else:
        train, dev = job.train, job.dev
    tx, ty, dx, dy = x[train], y[train], x[dev], y[dev]
    nepoch, best, stop, count, best_model = 0, -1.0, False, 0, None
    while not stop and nepoch <= cfg.max_epoch:
        for _ in range(cfg.epoch_size):
            perm = rng.permutation(len(tx))
            for i in range(0, len(tx), cfg.batch_size):
                idx = torch.from_numpy(perm[i : i + cfg.batch_size])
                loss = loss_fn(model(tx[idx]), ty[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        nepoch += cfg.epoch_size
        with torch.no_grad():
            acc = float((model(dx).max(1)[1] == dy).sum()) / len(dx)
        if acc > best:
            best, best_model = acc, copy.deepcopy(model)
        else:
            if count >= cfg.tenacity:
                stop = True
            count += 1
    return best_model, best


def reference_inner_kfold(x: torch.Tensor, y: torch.Tensor, classes: int, k: int, cfg: ClassifierConfig):
    """SentEval's InnerKFoldClassifier.run with the PyTorch MLP: (dev accuracy, test accuracy, chosen l2s)."""
    xs, ys = x.numpy(), y.numpy()
    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=1111)
    innerskf = StratifiedKFold(n_splits=k, shuffle=True, random_state=1111)
    dev_results, test_results, chosen = [], [], []
    for train_idx, test_idx in skf.split(xs, ys):
        scores = []
        for reg in L2_GRID:
            regscores = []
            for itr, ite in innerskf.split(xs[train_idx], ys[train_idx]):
                _, acc = reference_fit(x, y, Job(train_idx[itr], train_idx[ite], reg), classes, cfg)
                regscores.append(acc)
            scores.append(round(100 * np.mean(regscores), 2))
        optreg = L2_GRID[int(np.argmax(scores))]
        dev_results.append(np.max(scores))
        model, _ = reference_fit(x, y, Job(train_idx, None, optreg), classes, cfg)
        with torch.no_grad():
            acc = float((model(x[test_idx]).max(1)[1] == y[test_idx]).float().mean())
        test_results.append(round(100 * acc, 2))
        chosen.append(optreg)
    return round(float(np.mean(dev_results)), 2), round(float(np.mean(test_results)), 2), chosen


def _accuracy(model, x, y) -> float:
    with torch.no_grad():
        return float((model(x).max(1)[1] == y).float().mean())


def reference_kfold(train, test, classes: int, k: int, cfg: ClassifierConfig):
    """SentEval's KFoldClassifier.run (TREC, MRPC) with the PyTorch MLP: (dev accuracy, test accuracy, l2)."""
    (x, y), (xt, yt) = train, test
    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=cfg.seed)
    scores = []
    for reg in L2_GRID:
        scan = [reference_fit(x, y, Job(tr, te, reg), classes, cfg)[1] for tr, te in skf.split(x.numpy(), y.numpy())]
        scores.append(round(100 * np.mean(scan), 2))
    optreg = L2_GRID[int(np.argmax(scores))]
    model, _ = reference_fit(x, y, Job(np.arange(len(y)), None, optreg), classes, cfg)
    return float(np.max(scores)), round(100 * _accuracy(model, xt, yt), 2), optreg


def reference_split(train, dev, test, classes: int, cfg: ClassifierConfig):
    """SentEval's SplitClassifier.run (SST-2) with the PyTorch MLP: (dev accuracy, test accuracy, l2)."""
    x = torch.cat([train[0], dev[0]])
    y = torch.cat([train[1], dev[1]])
    n, m = len(train[1]), len(dev[1])
    fits = [reference_fit(x, y, Job(np.arange(n), np.arange(n, n + m), reg), classes, cfg) for reg in L2_GRID]
    scores = [round(100 * acc, 2) for _, acc in fits]
    best = int(np.argmax(scores))
    return float(np.max(scores)), round(100 * _accuracy(fits[best][0], *test), 2), L2_GRID[best]
