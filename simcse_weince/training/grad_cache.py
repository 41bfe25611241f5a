"""Gradient caching (GradCache, Gao et al. 2021) of a contrastive step: activation memory flat in the batch.

A contrastive loss couples all rows of a batch, so it cannot be accumulated over micro-batches; but its
gradient factors through the embeddings. With ``Z = f_θ(X)`` the (n, D) embeddings of the batch and
``G = ∂L/∂Z`` held fixed,

    ∂L/∂θ = Σ_r (∂L/∂z_r)ᵀ ∂z_r/∂θ = Σ_chunks ∂/∂θ ⟨f_θ(X_chunk), G_chunk⟩,

so a step is:

1. embed the batch chunk by chunk **without** gradient (one chunk's activations alive at a time), recording
   the random generators' state before each chunk;
2. compute the full-batch loss on the detached embeddings and ``G = ∂L/∂Z`` (every statistic over the whole
   batch; with ``gather_across_devices`` over the global batch, as the loss does uncached);
3. re-embed each chunk **with** gradient from its recorded generator state — the same dropout masks, hence the
   same embeddings — and back-propagate ``⟨f_θ(X_chunk), G_chunk⟩``.

``Z`` is every view of the batch: anchors and positives (B, D) and, for SimCSE's supervised rows, the hard
negatives (k, B, D), whose rows sit on dim 1 (the chunks' negatives are concatenated there, so the full batch
has the uncached layout); the inner product sums over all of them.

Step 3 runs in a backward hook on the loss that :func:`cached_contrastive_loss` returns, so it is driven by
the caller's own backward: the Trainer's ``accelerator.backward(loss / gradient_accumulation_steps)``,
through the fp16 gradient scaler, hands the hook ``grad_output = d(backpropagated value)/d(loss)``, which
multiplies every ``G_chunk``. Gradient accumulation and loss scaling therefore act exactly as on an uncached
loss, and no training loop is copied.

Exactness: WEINCE's λ and β are stop-gradient (computed under ``no_grad`` from ``S.detach()``), so ``G`` is the
uncached gradient and the parameter gradients equal the uncached step's (same masks) to float rounding —
provided the encoder treats rows independently (layer norm, replayed dropout). **Batch norm** normalises
with the statistics of the chunk, not of the batch, so a batch-norm model trains differently (as with
sentence-transformers' cached losses); the running statistics are updated once per chunk, by the replay only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

# Hard negatives of a chunk: a (k, b, D) tensor or k tensors of (b, D) (the losses' ``Negatives``).
Negatives = torch.Tensor | Sequence[torch.Tensor]
# embed(chunk) -> (anchors, positives) or (anchors, positives, negatives or None).
Embed = Callable[
    [dict[str, Any]], tuple[torch.Tensor, torch.Tensor] | tuple[torch.Tensor, torch.Tensor, Negatives | None]
]
# loss_fn(anchors, positives) or, with negatives, loss_fn(anchors, positives, negatives=(k, B, D)).
LossFn = Callable[..., torch.Tensor]
ReplayContext = Callable[[bool], AbstractContextManager]


def batch_rows(inputs: Mapping[str, Any]) -> int:
    """The batch size B: the common leading size of the tensors in ``inputs``.

    Raises:
        ValueError: no tensor with a batch dimension, or tensors of different leading sizes.
    """
    sizes = {k: v.shape[0] for k, v in inputs.items() if isinstance(v, torch.Tensor) and v.ndim > 0}
    if not sizes or len(set(sizes.values())) != 1:
        raise ValueError(f"gradient caching splits the batch along dim 0; got leading sizes {sizes}")
    return next(iter(sizes.values()))


def split_batch(inputs: Mapping[str, Any], chunk_size: int) -> list[dict[str, Any]]:
    """``inputs`` cut into chunks of ``chunk_size`` examples (the last may be smaller).

    Every tensor is sliced along dim 0 (its batch dimension); other values are shared by all chunks.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size!r}")
    b = batch_rows(inputs)
    return [
        {
            k: v[start : start + chunk_size] if isinstance(v, torch.Tensor) and v.ndim > 0 else v
            for k, v in inputs.items()
        }
        for start in range(0, b, chunk_size)
    ]


def cuda_devices(inputs: Mapping[str, Any]) -> list[int]:
    """Indices of the CUDA devices the tensors of ``inputs`` live on (their generators draw dropout masks)."""
    return sorted(
        {
            v.device.index if v.device.index is not None else torch.cuda.current_device()
            for v in inputs.values()
            if isinstance(v, torch.Tensor) and v.is_cuda
        }
    )


class RngState:
    """The CPU generator and the given CUDA devices' generators, as they are at construction.

    :meth:`replay` runs a block from this state and afterwards puts the generators back where they were, so
    a replayed forward draws the same dropout masks without disturbing the random stream of the run.
    (Random augmentations are drawn by the data pipeline and are already fixed in the batch tensors.)
    """

    def __init__(self, devices: Sequence[int] = ()) -> None:
        self.devices = list(devices)
        self.cpu = torch.get_rng_state()
        self.cuda = [torch.cuda.get_rng_state(d) for d in self.devices]

    @contextmanager
    def replay(self) -> Iterator[None]:
        with torch.random.fork_rng(devices=self.devices):  # restores the current states on exit
            torch.set_rng_state(self.cpu)
            for device, state in zip(self.devices, self.cuda, strict=True):
                torch.cuda.set_rng_state(state, device)
            yield


def batch_norm_layers(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    """The batch-norm layers of ``model`` that are in training mode (they normalise with chunk statistics)."""
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training]


@contextmanager
def unchanged_buffers(layers: Sequence[nn.Module]) -> Iterator[None]:
    """Restore the buffers of ``layers`` (batch-norm running statistics and counters) after the block."""
    saved = [[b.detach().clone() for b in layer.buffers()] for layer in layers]
    try:
        yield
    finally:
        with torch.no_grad():
            for layer, buffers in zip(layers, saved, strict=True):
                for b, old in zip(layer.buffers(), buffers, strict=True):
                    b.copy_(old)


def _loss_dtype(dtype: torch.dtype) -> torch.dtype:
    """Embeddings enter the cached loss in at least float32 (the loss scores in float32 anyway), so that
    ``G`` does not underflow in fp16 before the gradient scaler multiplies it."""
    return torch.promote_types(dtype, torch.float32)


def _chunk_views(out: Sequence[Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``embed``'s answer for a chunk as (anchors, positives, negatives): negatives a (k, b, D) tensor or None."""
    if len(out) not in (2, 3):
        raise ValueError(
            f"embed(chunk) must return (anchors, positives) or (anchors, positives, negatives); got {len(out)} values"
        )
    anchors, positives, negatives = (*out, None) if len(out) == 2 else out
    if negatives is not None and not isinstance(negatives, torch.Tensor):
        negatives = torch.stack(list(negatives)) if len(negatives) else anchors.new_zeros((0, *anchors.shape))
    if negatives is not None and (negatives.ndim != 3 or negatives.shape[1:] != anchors.shape):
        raise ValueError(
            f"a chunk's negatives must be (k, b, D) with anchors (b, D) = {tuple(anchors.shape)}; got "
            f"{tuple(negatives.shape)}"
        )
    return anchors, positives, negatives


@dataclass
class _Embedded:
    """Step 1's record of a batch: each chunk's generator state and detached views, and their concatenation."""

    states: list[RngState]  # one per chunk, taken before its forward
    sizes: list[int]  # b of each chunk
    anchors: torch.Tensor  # (B, D)
    positives: torch.Tensor  # (B, D)
    negatives: torch.Tensor | None  # (k, B, D): the chunks' rows on dim 1; None without negatives
    three: bool  # whether embed returned negatives (or None) as a third value


def _embed_without_grad(embed: Embed, chunks: Sequence[dict[str, Any]], batch_norm: Sequence[nn.Module]) -> _Embedded:
    """Step (1): embed every chunk without gradient, recording the generators' state before each forward.

    Batch-norm running statistics are left as they were (the replay of step 3 updates them).
    """
    states: list[RngState] = []
    anchors, positives, negatives = [], [], []
    three = set()  # whether embed returned negatives (or None) as a third value
    with torch.no_grad(), unchanged_buffers(batch_norm):
        for chunk in chunks:
            states.append(RngState(cuda_devices(chunk)))
            out = embed(chunk)
            three.add(len(out) == 3)
            a, p, n = _chunk_views(out)  # (b, D) each; (k, b, D) or None
            anchors.append(a)
            positives.append(p)
            negatives.append(n)
    kinds = {None if n is None else n.shape[0] for n in negatives}
    if len(kinds) != 1 or len(three) != 1:
        raise ValueError(f"every chunk must have the same views; got negative columns {kinds}")
    return _Embedded(
        states=states,
        sizes=[a.shape[0] for a in anchors],
        anchors=torch.cat(anchors),  # (B, D)
        positives=torch.cat(positives),
        negatives=None if negatives[0] is None else torch.cat(negatives, dim=1),  # (k, B, D): rows on dim 1
        three=three.pop(),
    )


def _loss_and_embedding_grads(
    loss_fn: LossFn, embedded: _Embedded, loss_parameters: Sequence[torch.Tensor] = ()
) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]], list[torch.Tensor]]:
    """Step (2): the full-batch loss on the detached embeddings, ``G = ∂L/∂Z`` cut back into chunks, and the
    loss's own parameters' gradients ``∂L/∂φ`` (the loss is computed once, so these are already whole).

    Returns:
        ``(loss, cached, parameter_grads)``: the 0-d loss; per chunk ``(G_anchors, G_positives, G_negatives or
        None)``, (b, D), (b, D) and (k, b, D); one gradient per loss parameter (zeros where it is unused).
    """
    dtype = _loss_dtype(embedded.anchors.dtype)
    a_leaf = embedded.anchors.detach().to(dtype).requires_grad_()
    p_leaf = embedded.positives.detach().to(dtype).requires_grad_()
    params = list(loss_parameters)
    with torch.enable_grad():
        if embedded.negatives is None:
            loss = loss_fn(a_leaf, p_leaf)
            leaves = [a_leaf, p_leaf]
        else:
            n_leaf = embedded.negatives.detach().to(dtype).requires_grad_()
            loss = loss_fn(a_leaf, p_leaf, negatives=n_leaf)
            leaves = [a_leaf, p_leaf, n_leaf]
        # G = ∂L/∂Z, (B, D) each; k = 0 leaves the negatives out of the graph: their (empty) gradient, and that of
        # a loss parameter the batch does not reach, is materialised as zeros.
        found = torch.autograd.grad(loss, [*leaves, *params], allow_unused=True, materialize_grads=True)
    grad_a, grad_p = found[0], found[1]
    grad_n = found[2] if embedded.negatives is not None else None
    sizes = embedded.sizes
    grads_n = [None] * len(sizes) if grad_n is None else list(grad_n.split(sizes, dim=1))
    cached = list(zip(grad_a.split(sizes), grad_p.split(sizes), grads_n, strict=True))
    return loss, cached, list(found[len(leaves) :])


def _replay_with_cached_grads(
    embed: Embed,
    chunks: Sequence[dict[str, Any]],
    states: Sequence[RngState],
    cached: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]],
    replay_context: ReplayContext | None,
    loss_parameters: Sequence[torch.Tensor] = (),
    parameter_grads: Sequence[torch.Tensor] = (),
) -> Callable[[torch.Tensor], None]:
    """Step (3), as the loss's backward hook: add ``grad_output · ∂L/∂φ`` to the loss parameters' ``.grad``, then
    re-embed each chunk with gradient from its recorded generator state and back-propagate
    ``grad_output · ⟨f_θ(X_chunk), G_chunk⟩``."""
    context = replay_context or (lambda last: nullcontext())

    def replay(grad_output: torch.Tensor) -> None:
        for param, grad in zip(loss_parameters, parameter_grads, strict=True):
            scaled = (grad_output * grad).to(param.dtype)
            param.grad = scaled if param.grad is None else param.grad + scaled
        with torch.enable_grad():
            for i, (chunk, state, (ga, gp, gn)) in enumerate(zip(chunks, states, cached, strict=True)):
                with context(i == len(chunks) - 1), state.replay():
                    a, p, n = _chunk_views(embed(chunk))
                    # ⟨f_θ(X_chunk), G_chunk⟩ in float32: the fp16/bf16 → float32 cast is part of the graph, as
                    # in the uncached loss, so the scaled gradient meets low precision only at that cast.
                    surrogate = (a.to(ga.dtype) * ga).sum() + (p.to(gp.dtype) * gp).sum()
                    if gn is not None:
                        surrogate = surrogate + (n.to(gn.dtype) * gn).sum()  # every negative column
                    torch.autograd.backward(surrogate, grad_output.to(surrogate.dtype))

    return replay


def cached_contrastive_loss(
    embed: Embed,
    chunks: Sequence[dict[str, Any]],
    loss_fn: LossFn,
    replay_context: ReplayContext | None = None,
    batch_norm: Sequence[nn.Module] = (),
    loss_parameters: Sequence[torch.Tensor] = (),
) -> tuple[torch.Tensor, ...]:
    """The contrastive loss of a batch given as ``chunks``, with a gradient-cached backward.

    Args:
        embed: ``embed(chunk) -> (anchors, positives)``, each (b, D): the model's two views of a chunk of b
            examples (one forward; its dropout draws from the global generators); or
            ``(anchors, positives, negatives)`` with the chunk's hard negatives, a (k, b, D) tensor or k
            tensors of (b, D) (SimCSE's supervised rows), or ``None`` (none; the same k in every chunk).
        chunks: the batch, cut into chunks of examples (:func:`split_batch`).
        loss_fn: ``loss_fn(anchors, positives) -> 0-d loss`` of the full batch, (B, D) each, B = Σ b; with
            negatives, ``loss_fn(anchors, positives, negatives=...)``, negatives (k, B, D) (the chunks'
            concatenated along dim 1: the uncached batch's layout).
        replay_context: ``replay_context(last) -> context manager`` entered around each chunk's forward and
            backward in step 3 (``last`` is True for the final chunk): autocast, and DDP's ``no_sync`` for all
            but the last chunk so that gradients are all-reduced once.
        batch_norm: batch-norm layers whose running statistics step 1 must leave untouched (the replay of
            step 3 updates them).
        loss_parameters: the loss's own trainable parameters φ (the learned link's): their gradient is taken
            with ``G`` in step 2 and added, times ``grad_output``, to their ``.grad`` by the backward.

    Returns:
        ``(loss, anchors, positives)``, or ``(loss, anchors, positives, negatives)`` when ``embed`` returns
        three values: ``loss`` is a 0-d tensor equal to ``loss_fn`` of the whole batch that requires grad;
        calling ``backward`` on any function of it re-embeds each chunk with gradient and accumulates
        ``∂/∂θ ⟨f_θ(X_chunk), grad_output · G_chunk⟩`` (summed over every view) into the parameters'
        ``.grad``. ``anchors`` and ``positives`` (B, D) and ``negatives`` (k, B, D, or ``None``) are detached.
    """
    if not chunks:
        raise ValueError("gradient caching needs at least one chunk")
    embedded = _embed_without_grad(embed, chunks, batch_norm)  # (1) embed without gradients
    loss, cached, param_grads = _loss_and_embedding_grads(loss_fn, embedded, loss_parameters)  # (2)
    out = loss.detach().requires_grad_()
    # (3) replay with the cached gradients, when the caller back-propagates through ``out``
    out.register_hook(
        _replay_with_cached_grads(embed, chunks, embedded.states, cached, replay_context, loss_parameters, param_grads)
    )
    a_all, p_all, n_all = embedded.anchors, embedded.positives, embedded.negatives
    if embedded.three:
        return out, a_all.detach(), p_all.detach(), None if n_all is None else n_all.detach()
    return out, a_all.detach(), p_all.detach()
