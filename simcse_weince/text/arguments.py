"""Argument groups of SimCSE training, unsupervised and supervised: model, data and training (the loss group is
shared)."""

from __future__ import annotations

from dataclasses import dataclass, field

from simcse_weince.core.checks import check_at_least, check_choice, integer_at_least
from simcse_weince.text.columns import check_text_columns
from simcse_weince.text.poolers import Pooler
from simcse_weince.text.positions import MIN_SEQ_LENGTH
from simcse_weince.text.sources import check_file_name, column_format, column_suffixes
from simcse_weince.text.validation import dev_forms, parse_validation
from simcse_weince.training.arguments import ContrastiveTrainingArguments
from simcse_weince.training.source_batches import SourceBatches


@dataclass
class ModelArguments:
    model_name_or_path: str = field(
        default="bert-base-uncased", metadata={"help": "Hub name or local folder of the encoder."}
    )
    tokenizer_name: str | None = field(default=None, metadata={"help": "Tokenizer (default: the model's)."})
    init_from_config: bool = field(
        default=False, metadata={"help": "Random weights from the model's config (tiny CPU/test encoders)."}
    )
    config_overrides: str | None = field(
        default=None, metadata={"help": "Config changes, e.g. 'num_hidden_layers=2,hidden_size=128'."}
    )
    pooler: Pooler = field(default="cls", metadata={"help": "cls | cls_before_pooler | avg | avg_first_last"})
    mlp_only_train: bool = field(default=True, metadata={"help": "With pooler cls: the MLP in training only."})
    length_groups: int = field(
        default=4,
        metadata={
            "help": "Encode a training batch in this many forwards of rows of similar length, each padded to its own "
            "longest row: the same embeddings for fewer padded tokens (1: one forward padded to the batch's longest)."
        },
    )

    def __post_init__(self) -> None:
        check_choice("pooler", self.pooler, Pooler)
        integer_at_least(1)("length_groups", self.length_groups)
        self.overrides()  # a malformed config_overrides fails now, not after the tokenizer loaded

    def overrides(self) -> dict:
        """``config_overrides`` parsed into typed values."""
        out: dict = {}
        if not self.config_overrides:
            return out
        for item in self.config_overrides.split(","):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"config_overrides: expected 'key=value' items separated by commas, got {item!r}")
            out[key.strip()] = _typed(value.strip())
        return out


def _typed(value: str):
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(value.lower(), value)


@dataclass
class DataArguments:
    train_files: list[str] | None = field(
        default=None,
        metadata={
            "help": lambda: (
                "Local training files ('{data}/...' = the shared data folder): text files, one sentence "
                f"per line, or column files ({column_suffixes()}; CSV and TSV with a header, JSON Lines one object per "
                "line) read by text_columns. When unset, the Hub dataset below is used."
            )
        },
    )
    text_columns: list[str] | None = field(
        default=None,
        metadata={
            "help": "Columns of the column files (or of the Hub dataset) to train on, in order: one = sentences "
            "(unsupervised), two = (anchor, positive) pairs, more = pairs with hard negatives. Default: sent0, "
            "sent1 (and hard_neg) when present, as SimCSE's nli_for_simcse.csv, else a one-column file's column."
        },
    )
    skip_bad_rows: bool = field(
        default=False,
        metadata={
            "help": "Skip (and count, and log) bad rows of column files: a missing, empty or non-text cell, a "
            "wrong number of fields, a JSON line that is not an object, undecodable bytes. Default: stop at the "
            "first, naming file:line."
        },
    )
    allow_missing_negatives: bool = field(
        default=False,
        metadata={
            "help": "Pairs and triplets in one run: a hard-negative column may be missing from a file, or empty or "
            "null in a row; such a row trains as a pair (its absent negative is left out of every anchor's "
            "candidates). The anchor and positive stay required. Default: every row fills every column."
        },
    )
    source_batches: SourceBatches = field(
        default="mixed",
        metadata={
            "help": "With several training files: mixed (default) shuffles every file's rows together, as SimCSE "
            "concatenates its files; proportional or round_robin draw each global batch (all processes' rows of a "
            "step) from one file, so in-batch negatives and WEINCE's tail fits never mix files (proportional: "
            "every full batch of each file, in a shuffled order; round_robin: files in turn, as many batches of "
            "each as the smallest gives). Each file's rows short of a full global batch sit out the epoch."
        },
    )
    hub_dataset: str = field(default="princeton-nlp/datasets-for-simcse", metadata={"help": "Hub dataset."})
    hub_data_file: str | None = field(default="wiki1m_for_simcse.txt", metadata={"help": "File in the dataset."})
    max_seq_length: int = field(default=32, metadata={"help": "Truncate sentences to this many tokens."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N sentences."})
    data_cache_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder of the tokenised-text caches (default: <HF datasets cache>/simcse_weince_tokens, "
            "i.e. $HF_DATASETS_CACHE or ~/.cache/huggingface/datasets). The text is tokenised once per set of "
            "files, tokenizer and max_seq_length; later runs and the other processes memory-map the cache."
        },
    )
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "Processes tokenising the text when a cache is built (default: one)."}
    )
    drop_unterminated_last_line: list[str] | None = field(
        default=None,
        metadata={
            "help": "Names (or glob patterns) of training files that were cut off mid-line, e.g. a byte-range "
            "sample: their last line, if it has no final newline, is dropped. Other files keep every line."
        },
    )
    senteval_dir: str | None = field(
        default=None,
        metadata={
            "help": "SentEval data/downstream folder for STS-B dev/test (default: $SENTEVAL_DATA, the shared "
            "data folder, else the Hub)."
        },
    )
    validation: str = field(
        default="stsb",
        metadata={
            "help": lambda: (
                "What the best checkpoint is chosen on (default stsb), one task as evaluate_sts.py --tasks names "
                f"it whose family declares a dev set: {dev_forms()}; metric_for_best_model names one of its metrics."
            )
        },
    )
    eval_max_pairs: int | None = field(
        default=None,
        metadata={"help": "Score only the first N pairs of a validation of sentence pairs (and of STS-B test)."},
    )
    eval_test_at_end: bool = field(default=True, metadata={"help": "Score STS-B test with the final model."})
    eval_batch_size: int = field(default=128, metadata={"help": "Batch size of the STS encoder."})
    eval_before_training: bool = field(default=False, metadata={"help": "Also score STS-B before training."})
    model_card_note: str = field(default="", metadata={"help": "A paragraph added to the model card."})

    def __post_init__(self) -> None:
        cut = self.drop_unterminated_last_line
        if isinstance(cut, bool) or (cut and {str(c).lower() for c in cut} & {"true", "false"}):
            raise ValueError(
                f"drop_unterminated_last_line names the files cut off mid-line (file names or glob patterns, "
                f"e.g. ['wiki1m_for_simcse.head*']), not true/false; got {cut!r}"
            )
        if isinstance(self.train_files, str):  # `train_files: a.txt` in YAML: one file, not its characters
            self.train_files = [self.train_files]
        if isinstance(self.drop_unterminated_last_line, str):
            self.drop_unterminated_last_line = [self.drop_unterminated_last_line]
        if self.text_columns is not None:
            self.text_columns = check_text_columns(self.text_columns)
        for f in self.train_files or ():  # what cannot be read is refused by its name, before anything loads
            check_file_name(f, True, self.text_columns, self.allow_missing_negatives)
        hub_lines = self.hub_data_file is not None and not column_format(self.hub_data_file)
        if self.allow_missing_negatives and not self.train_files and hub_lines:
            raise ValueError(
                f"allow_missing_negatives trains pairs and triplets, but the Hub file {self.hub_data_file} is read "
                "as lines; expected a file with named columns (e.g. hub_data_file: nli_for_simcse.csv)"
            )
        if self.allow_missing_negatives and self.text_columns is not None and len(self.text_columns) < 3:
            raise ValueError(
                f"allow_missing_negatives: text_columns {self.text_columns} has no hard-negative column; expected "
                "[anchor, positive, hard negative, ...] (e.g. [sent0, sent1, hard_neg]), or leave it unset"
            )
        check_choice("source_batches", self.source_batches, SourceBatches)
        check_at_least("max_seq_length", self.max_seq_length, MIN_SEQ_LENGTH)
        check_at_least("max_train_samples", self.max_train_samples, 2)
        check_at_least("preprocessing_num_workers", self.preprocessing_num_workers, 1)
        check_at_least("eval_max_pairs", self.eval_max_pairs, 2)
        chosen = parse_validation(self.validation)
        if not chosen.dev.pairs and self.eval_max_pairs is not None:
            raise ValueError(
                f"eval_max_pairs cuts STS pairs, but validation {self.validation!r} is a {chosen.label}; expected "
                "eval_max_pairs unset (or an STS validation)"
            )
        check_at_least("eval_batch_size", self.eval_batch_size, 1)


@dataclass
class SimCSETrainingArguments(ContrastiveTrainingArguments):
    """Training arguments with the unsupervised SimCSE defaults (batch 64, lr 3e-5, 1 epoch, STS-B dev every
    125 steps, best checkpoint kept)."""

    output_dir: str | None = field(default="outputs/simcse", metadata={"help": "Where checkpoints and the model go."})
    per_device_train_batch_size: int = 64
    learning_rate: float = 3e-5
    num_train_epochs: float = 1.0
    eval_strategy: str = "steps"
    eval_steps: float | None = 125
    save_strategy: str = "steps"
    save_steps: float = 125
    save_total_limit: int | None = 2
    load_best_model_at_end: bool = True
    metric_for_best_model: str | None = "stsb_spearman"
    greater_is_better: bool | None = True
    logging_steps: float = 25
