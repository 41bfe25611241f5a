"""The blended WEINCE logit, one pure function shared by the loss and the link-selection diagnostics."""

from __future__ import annotations

import torch


def weince_logits(
    scores: torch.Tensor,
    lam: torch.Tensor | float,
    beta: torch.Tensor | float,
    temperature: torch.Tensor | float,
    eps: float = 1e-6,
) -> torch.Tensor:
    r"""Blend InfoNCE's logit with the endpoint shortfall logit.

    .. math::
        \ell_{ij} = (1 - \lambda_i)\,\frac{s_{ij}}{\tau}
                    + \lambda_i\,\bigl(-\beta_i \log(1 - \min(s_{ij}, 1 - \epsilon))\bigr)

    λ = 0 gives exactly ``s / τ`` (InfoNCE). The clamp keeps the shortfall finite at ``s = 1`` (duplicates).

    Args:
        scores: (A, C) cosine similarities ``s_ij``.
        lam: λ, a scalar or (A, 1) per-anchor weights (broadcast against ``scores``).
        beta: β, a scalar or (A, 1).
        temperature: τ > 0, a scalar.
        eps: the score cap is ``1 − eps``.

    Returns:
        (A, C) logits in the dtype of ``scores`` (and of the parameters, if they are wider).
    """
    return (1.0 - lam) * (scores / temperature) + (lam * beta) * shortfall(scores, eps)


def shortfall(scores: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The endpoint logit with β = 1, ``u = −log(1 − min(s, 1 − ε))`` (``-inf`` stays ``-inf``)."""
    return -torch.log1p(-scores.clamp(max=1.0 - eps))
