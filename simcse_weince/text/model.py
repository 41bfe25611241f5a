"""The SimCSE model: an ``AutoModel`` encoder, a pooler and (for ``cls``) the SimCSE MLP.

Training, unsupervised: the batch of B sentences is duplicated and encoded as 2B rows; dropout makes the two copies
differ, giving the two views. Supervised: rows of n texts (anchor, positive, hard negatives), each text encoded
once, all B·n rows together. The rows are encoded in ``length_groups`` forwards of rows of similar length, each
padded only to its own longest row (:func:`length_groups`): a padded position changes no row's embedding (attention
masks it, poolers skip it), so only the padded tokens' work is saved. Inference (:meth:`SimCSEModel.encode`) uses
the inference pooler: for ``cls`` trained with ``mlp_only_train`` (the unsupervised SimCSE recipe) that is
``cls_before_pooler``.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PreTrainedModel

from simcse_weince.core.checks import integer_at_least
from simcse_weince.losses.layout import BatchKind
from simcse_weince.text.poolers import needs_hidden_states, pool, validate_pooler


def inference_pooler_for(pooler: str, mlp_only_train: bool) -> str:
    """The pooler used at inference: ``cls`` with ``mlp_only_train`` drops the MLP."""
    return "cls_before_pooler" if pooler == "cls" and mlp_only_train else pooler


def load_hf_encoder(
    model_name_or_path: str, from_config: bool = False, config_overrides: dict | None = None
) -> PreTrainedModel:
    """An ``AutoModel`` encoder, from weights or freshly initialised from a config.

    ``from_config`` builds random weights from the model's config (after ``config_overrides``), which is how
    tests and CPU experiments get tiny encoders without any download. A task pooler the architecture carries
    (BERT's ``pooler``) is kept, so that saved checkpoints stay complete, but frozen: SimCSE never uses it,
    and frozen parameters keep DDP free of unused trainable parameters.

    The weights are always float32, whatever dtype the checkpoint was saved in (transformers 5 loads a
    checkpoint in its stored dtype by default, and many are stored in fp16/bf16): training keeps fp32 master
    weights, and fp16/bf16 compute is the precision setting's autocast, not the storage format's.
    """
    config = AutoConfig.from_pretrained(model_name_or_path, **(config_overrides or {}))
    if from_config:
        encoder = AutoModel.from_config(config, dtype=torch.float32)
    else:
        encoder = AutoModel.from_pretrained(model_name_or_path, config=config, dtype=torch.float32)
    task_pooler = getattr(encoder, "pooler", None)
    if isinstance(task_pooler, nn.Module):
        task_pooler.requires_grad_(False)
    return encoder


def inference_max_length(tokenizer, config) -> int:
    """Longest input at inference: the tokenizer's and the position table's limit, at most 512 tokens.

    Training truncates to ``max_seq_length`` (32 in the recipe), but evaluation, like SimCSE's, encodes whole
    sentences; the exported SentenceTransformer uses the same limit so that both give the same vectors.
    """
    limits = [512, getattr(tokenizer, "model_max_length", 512), getattr(config, "max_position_embeddings", 512)]
    return int(min(limits))


def length_groups(attention_mask: torch.Tensor, groups: int) -> list[tuple[torch.Tensor, int]]:
    """The rows of a padded batch in ``groups`` groups of similar length: ``[(rows, width), ...]``.

    A row's extent e_r is one past its last unmasked position (its length under right padding; the whole width
    under left padding, which is then never cut). The rows sorted by e_r (stable) are split into ``groups``
    nearly equal runs; a run is encoded on its columns ``[0, max_r e_r)``. Rows of N × L cost N·L token
    positions in one forward and Σ_g |g| · max_{r∈g} e_r in groups: on the quickstart's Wikipedia sentences
    (mean 23.9 of 32 tokens) a batch of 64 sentences × 2 views holds 4,096 positions in one forward, 3,670 in 2
    groups, 3,418 in 4 (``bench/length_groups.py``).
    """
    n, width = attention_mask.shape
    positions = torch.arange(1, width + 1, device=attention_mask.device)
    extent = (attention_mask.ne(0) * positions).amax(dim=1)  # (N,): one past the last unmasked position
    order = torch.argsort(extent, stable=True)
    return [(rows, max(int(extent[rows].max()), 1)) for rows in order.tensor_split(min(groups, n))]


class SimCSEModel(nn.Module):
    """Encoder + pooler (+ MLP for ``cls``) producing the two dropout views of a batch.

    Args:
        encoder: a Hugging Face encoder (``AutoModel``).
        pooler: one of ``cls``, ``cls_before_pooler``, ``avg``, ``avg_first_last``.
        mlp_only_train: with ``cls``, use the MLP in training only (the unsupervised SimCSE recipe).
        length_groups: forwards per batch, each over rows of similar length padded to their own longest
            (:func:`length_groups`; 1, the default here: one forward padded to the batch's longest; training
            takes its ``--length_groups``, default 4). The embeddings are the same; dropout draws its masks per
            forward, so a seeded run's weights depend on it.

    Raises:
        ValueError: ``length_groups`` below 1.
    """

    def __init__(
        self, encoder: PreTrainedModel, pooler: str = "cls", mlp_only_train: bool = True, length_groups: int = 1
    ) -> None:
        super().__init__()
        validate_pooler(pooler)
        integer_at_least(1)("length_groups", length_groups)
        self.length_groups = int(length_groups)
        self.encoder = encoder
        self.pooler = pooler
        self.mlp_only_train = mlp_only_train
        hidden = encoder.config.hidden_size
        self.mlp = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh()) if pooler == "cls" else None
        # Trainer looks at these for saving, gradient checkpointing and the model card.
        self.config = encoder.config

    @property
    def inference_pooler(self) -> str:
        return inference_pooler_for(self.pooler, self.mlp_only_train)

    def _pooled(self, pooler: str, attention_mask, token_type_ids, **tokens: torch.Tensor) -> torch.Tensor:
        """The pooled encoder output of ``tokens``: ``input_ids``, or their looked-up word vectors
        ``inputs_embeds``."""
        kwargs = {**tokens, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        out = self.encoder(**kwargs, output_hidden_states=needs_hidden_states(pooler), return_dict=True)
        return pool(pooler, out.last_hidden_state, attention_mask, out.hidden_states)

    def _word_embeddings(self) -> nn.Embedding | None:
        """The word table of a BERT-family encoder (``embeddings.word_embeddings``, its input embeddings), whose
        embeddings layer treats looked-up vectors given as ``inputs_embeds`` as it treats ``input_ids`` (positions,
        token types, LayerNorm, dropout added after the lookup); ``None`` for any other encoder."""
        table = getattr(getattr(self.encoder, "embeddings", None), "word_embeddings", None)
        return table if isinstance(table, nn.Embedding) and table is self.encoder.get_input_embeddings() else None

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        kind: BatchKind = BatchKind.VIEWS,
    ) -> dict[str, torch.Tensor]:
        """One forward over the batch; returns ``anchors`` and ``positives`` (B, H), and ``negatives`` (k, B, H).

        ``kind`` is the batch's field (the collator's :class:`~simcse_weince.losses.layout.BatchKind`). A batch
        of ``views``, ``input_ids`` (B, L): each sentence is encoded twice (two dropout views, SimCSE). Rows of
        ``pairs`` or ``triplets``, ``input_ids`` (B, n, L) with n = 2 + k texts per row (anchor, positive, k hard
        negatives: the collator's layout): each text once, all B·n rows together (SimCSE's supervised mode).
        A text without a token (attention mask all 0: a row's absent hard negative) is not encoded; its
        embedding is the zero vector, and the loss leaves it out of every anchor's candidates (``absent_negatives``).

        Raises:
            ValueError: ``input_ids`` that are not (B, L) for views, or not (B, n, L) with n ≥ 2 for rows.
        """
        kind = BatchKind(kind)
        if kind.rows:
            return self._forward_rows(input_ids, attention_mask, token_type_ids, kind)
        if input_ids.dim() != 2:
            raise ValueError(f"a batch of kind views has (B, L) input_ids, got {tuple(input_ids.shape)}")
        b = input_ids.shape[0]
        ids = torch.cat([input_ids, input_ids])  # (2B, L): two dropout views of each sentence
        mask = torch.cat([attention_mask, attention_mask])
        tti = None if token_type_ids is None else torch.cat([token_type_ids, token_type_ids])
        z = self._embed(ids, mask, tti)  # (2B, H)
        return {"anchors": z[:b], "positives": z[b:]}

    def _embed(self, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
        """The training embeddings of (N, L) texts: the training pooler, then the MLP (``cls``), the rows
        encoded in :attr:`length_groups` forwards and returned in their order."""
        if self.length_groups == 1:
            z = self._pooled(self.pooler, attention_mask, token_type_ids, input_ids=input_ids)
        else:
            # One lookup of the whole batch's words: the word table's gradient, a dense (vocabulary × H) tensor,
            # is then made once a step, not once a group (4 × 47 MB zero-filled and summed for MiniLM's table).
            table = self._word_embeddings()
            words = None if table is None else table(input_ids)
            groups = length_groups(attention_mask, self.length_groups)
            parts = []
            for rows, width in groups:
                tti = None if token_type_ids is None else token_type_ids[rows, :width]
                tokens = (
                    {"input_ids": input_ids[rows, :width]} if words is None else {"inputs_embeds": words[rows, :width]}
                )
                parts.append(self._pooled(self.pooler, attention_mask[rows, :width], tti, **tokens))
            order = torch.cat([rows for rows, _ in groups])  # the rows sorted by length
            z = torch.cat(parts)[torch.argsort(order)]
        return z if self.mlp is None else self.mlp(z)

    def _forward_rows(self, input_ids, attention_mask, token_type_ids, kind: BatchKind) -> dict[str, torch.Tensor]:
        want = "n = 2" if kind is BatchKind.PAIRS else "n ≥ 3"
        if input_ids.dim() != 3 or (input_ids.shape[1] == 2) != (kind is BatchKind.PAIRS) or input_ids.shape[1] < 2:
            raise ValueError(f"a batch of kind {kind.value} has (B, n, L) input_ids with {want}, got "
                             f"{tuple(input_ids.shape)}")  # fmt: skip
        b, n, length = input_ids.shape
        flat = input_ids.transpose(0, 1).reshape(n * b, length)  # (n·B, L), column-major: all anchors first
        mask = attention_mask.transpose(0, 1).reshape(n * b, length)
        tti = None if token_type_ids is None else token_type_ids.transpose(0, 1).reshape(n * b, length)
        present = mask.any(dim=1)  # (n·B,): False for an absent hard negative (no token)
        if bool(present.all()):
            z = self._embed(flat, mask, tti)  # (n·B, H)
        else:
            keep = present.nonzero().squeeze(1)
            z_kept = self._embed(flat[keep], mask[keep], None if tti is None else tti[keep])
            z = z_kept.new_zeros(n * b, z_kept.shape[1]).index_copy(0, keep, z_kept)
        z = z.view(n, b, -1)
        views = {"anchors": z[0], "positives": z[1]}
        if n > 2:
            views["negatives"] = z[2:]  # (k, B, H)
        return views

    @torch.no_grad()
    def encode(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Sentence embeddings (N, H) with the inference pooler (no dropout: call ``eval()`` first)."""
        pooler = self.inference_pooler
        z = self._pooled(pooler, attention_mask, token_type_ids, input_ids=input_ids)
        if pooler == "cls" and self.mlp is not None:
            z = self.mlp(z)
        return z
