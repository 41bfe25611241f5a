"""The Hub around a run, without a network: the recorder (``tests.helpers.HubRecorder``) stands in for HfApi."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.helpers import Interrupt, StopAt, argv, install_hub_recorder, write_cifar10_zips


def _text(tiny: Path, wiki: Path, out: Path, **flags: object) -> list[str]:
    """The tiny text run's command line; ``flags`` override or add settings."""
    base = dict(
        model_name_or_path=tiny, init_from_config=True, pooler="cls", train_files=wiki,
        drop_unterminated_last_line="wiki1m_for_simcse.head*", max_train_samples=96, max_seq_length=16,
        eval_max_pairs=60, per_device_train_batch_size=16, learning_rate="1e-3", max_steps=4, eval_steps=2,
        save_steps=2, logging_steps=1, min_tail_points=10, eval_test_at_end=False, output_dir=out,
        disable_tqdm=True, dataloader_num_workers=0, report_to="none",
    )  # fmt: skip
    return argv(**(base | flags))


@pytest.mark.slow
def test_every_save_pushes_each_checkpoint_then_the_model_with_its_card(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simcse_weince.cli.train_text import run

    hub = install_hub_recorder(monkeypatch, tmp_path / "hub")
    out = tmp_path / "run"
    results = run(
        _text(
            tiny_bert_dir, wiki_sample, out, push_to_hub=True, hub_strategy="every_save", hub_model_id="me/tiny-simcse"
        )
    )
    assert hub.calls[0] == ("create_repo", "me/tiny-simcse")  # checked before anything else
    messages = [c.message for c in hub.commits]
    assert messages == [
        "Training in progress, step 2",
        "Training in progress, step 4",
        "End of training: SentenceTransformer model",
        "End of training: model card",  # rendered once the model is on the Hub: it names the repository
    ]
    for commit in hub.commits[:2]:  # the checkpoint's weights, never the checkpoint folders themselves
        assert "model.safetensors" in commit.files and not any(f.startswith("checkpoint-") for f in commit.files)
    model, card = hub.commits[-2:]
    assert {"modules.json", "model.safetensors", "config.json"} <= set(model.files) and "README.md" not in model.files
    assert card.files == ["README.md", "run_record.json"]  # the card, and the digests of every file
    assert 'SentenceTransformer("me/tiny-simcse")' in card.card and "WEINCE" in card.card
    assert (hub.repo("me/tiny-simcse") / "README.md").read_text() == (out / "model" / "README.md").read_text()
    assert results["hub_url"].endswith("/commit/3") and "hub_error" not in results
    # the repository now loads as a SentenceTransformer (the final push overwrote the root weights)
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(hub.repo("me/tiny-simcse")), device="cpu")
    assert st.encode(["a test"]).shape == (1, 32)
    repo_files = [p for p in hub.repo("me/tiny-simcse").rglob("*") if p.is_file()]
    assert not [p for p in repo_files if b"hf_recorder_token" in p.read_bytes()]  # no secret uploaded


@pytest.mark.slow
def test_resume_from_the_hub_last_checkpoint_reaches_the_same_weights(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simcse_weince.cli.train_text import run

    hub = install_hub_recorder(monkeypatch, tmp_path / "hub")
    common = dict(max_steps=6, save_total_limit=3, push_to_hub=True, hub_strategy="checkpoint")
    run(_text(tiny_bert_dir, wiki_sample, tmp_path / "full", **common, hub_model_id="me/full"))
    # machine A stops after step 5: the last pushed checkpoint is step 4, kept as last-checkpoint/
    with pytest.raises(Interrupt):
        run(_text(tiny_bert_dir, wiki_sample, tmp_path / "a", **common, hub_model_id="me/cut"), callbacks=[StopAt(5)])
    state = json.loads((hub.repo("me/cut") / "last-checkpoint" / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    # machine B starts from an empty folder and resumes from the Hub
    resumed = run(
        _text(tiny_bert_dir, wiki_sample, tmp_path / "b", **common, hub_model_id="me/cut", resume_from_checkpoint="hub")
    )
    assert ("snapshot_download", "me/cut") in hub.calls and resumed["steps"] == 6
    a = load_file(tmp_path / "full" / "checkpoint-6" / "model.safetensors")
    b = load_file(tmp_path / "b" / "checkpoint-6" / "model.safetensors")
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)


def test_unreachable_hub_fails_before_anything_loads(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from simcse_weince.cli import train_text as train_module

    def loaded(*args, **kwargs):
        raise AssertionError("a model or data set was loaded before the Hub was checked")

    for name in ("load_hf_encoder", "prepare_corpus", "stsb_task"):
        monkeypatch.setattr(train_module, name, loaded)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_TOKEN", "hf_some_token")
    command = _text(tiny_bert_dir, wiki_sample, tmp_path / "run", push_to_hub=True, hub_model_id="me/x")
    assert train_module.main(command) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --push_to_hub: cannot create or write the Hub repository 'me/x'")
    assert "--hub_push_optional true" in err and err.count("\n") == 1
    # no token at all: said so, before any network call
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    assert train_module.main(command) == 2
    assert "no Hugging Face token" in capsys.readouterr().err


@pytest.mark.slow
def test_optional_push_trains_locally_and_records_the_failure(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simcse_weince.cli.train_text import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_TOKEN", "hf_some_token")
    out = tmp_path / "run"
    command = _text(
        tiny_bert_dir, wiki_sample, out, max_steps=2, push_to_hub=True, hub_model_id="me/x", hub_push_optional=True
    )
    assert main(command) == 0
    results = json.loads((out / "results.json").read_text())
    assert "cannot create or write the Hub repository" in results["hub_error"]
    assert (out / "model" / "model.safetensors").is_file()
    assert 'SentenceTransformer("path/to/this/folder")' in (out / "model" / "README.md").read_text()


@pytest.mark.slow
def test_vision_run_pushes_the_backbone_folder_with_its_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from simcse_weince.cli.train_vision import run

    hub = install_hub_recorder(monkeypatch, tmp_path / "hub")
    root = write_cifar10_zips(tmp_path / "data")
    results = run(
        argv(
            backbone="resnet18_slim", data_dir=root, per_device_train_batch_size=8, num_train_epochs=1,
            temperature=0.5, min_tail_points=10, output_dir=tmp_path / "run", disable_tqdm=True,
            dataloader_num_workers=0, push_to_hub=True, hub_strategy="every_save", hub_model_id="me/simclr",
        )
    )  # fmt: skip
    messages = [c.message for c in hub.commits]
    assert messages == ["Training in progress, epoch 1", "End of training: backbone", "End of training: model card"]
    model, card = hub.commits[-2:]
    assert {"backbone.safetensors", "model.safetensors", "config.json"} <= set(model.files)
    assert card.files == ["README.md", "run_record.json"] and "knn200" in card.card
    assert "SimCLR-WEINCE (resnet18_slim, cifar10_zip)" in card.card and 'snapshot_download("me/simclr")' in card.card
    assert "hub_url" in results and "hub_error" not in results


def test_a_repository_id_is_checked_for_its_form() -> None:
    """The id's form is said before any token check (which would report a bad id as a missing token)."""
    from simcse_weince.training.hub import check_repo_id

    for ok in ("x", "me/x", "Org-1/model_v2.1"):
        check_repo_id(ok)
    for bad in ("a/b/c", "has space/x", "me/x--y", "me/.x", "", "x" * 97):
        with pytest.raises(ValueError, match=rf"^hub_model_id {re.escape(repr(bad))} is not a Hub repository id; "
                                             r"expected name or namespace/name: "):  # fmt: skip
            check_repo_id(bad)


def test_without_hub_model_id_the_output_folder_names_the_repository(tmp_path: Path) -> None:
    from simcse_weince.text.arguments import SimCSETrainingArguments

    SimCSETrainingArguments(output_dir=str(tmp_path / "run-1"), push_to_hub=True)
    with pytest.raises(ValueError, match=r"^the output folder's name 'my run' is not a Hub repository id; .*named "
                                         r"after output_dir\); set hub_model_id$"):  # fmt: skip
        SimCSETrainingArguments(output_dir=str(tmp_path / "my run"), push_to_hub=True)
    SimCSETrainingArguments(output_dir=str(tmp_path / "my run"))  # not pushed: any folder name


@pytest.fixture(scope="module")
def checkpoint_pushes(tiny_bert_dir: Path, wiki_sample: Path, tmp_path_factory: pytest.TempPathFactory):
    """A run pushing with ``hub_strategy: checkpoint`` and a loss with a running state (the top-M Weibit term's β_t,
    saved as ``loss_state.pt``): the recorder, and the run's folder."""
    from simcse_weince.cli.train_text import run

    tmp = tmp_path_factory.mktemp("hub-checkpoints")
    with pytest.MonkeyPatch.context() as patch:
        hub = install_hub_recorder(patch, tmp / "hub")
        out = tmp / "run"
        run(
            _text(
                tiny_bert_dir, wiki_sample, out, push_to_hub=True, hub_strategy="checkpoint", hub_model_id="me/ckpt",
                topm_weibit_weight=0.5, topm_min_tail_points=16, topm_r2_min=0.0,
            )
        )  # fmt: skip
    return hub, out


@pytest.mark.slow
def test_a_pushed_checkpoint_holds_exactly_what_the_local_one_holds(checkpoint_pushes) -> None:
    """The Trainer pushed each checkpoint before the run wrote its loss state and the record's digests: the Hub's
    last-checkpoint/ had ``files: null`` and no loss_state.pt. Each push now carries the complete local checkpoint."""
    hub, out = checkpoint_pushes
    pushed = {c.message: c.files for c in hub.commits if c.path_in_repo == "last-checkpoint"}
    assert list(pushed) == ["Training in progress, step 2, checkpoint", "Training in progress, step 4, checkpoint"]
    for step, files in zip((2, 4), pushed.values(), strict=True):
        local = out / f"checkpoint-{step}"
        held = [p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()]
        assert files == sorted(f"last-checkpoint/{name}" for name in held)
        assert "last-checkpoint/loss_state.pt" in files
    remote = hub.repo("me/ckpt") / "last-checkpoint" / "run_record.json"
    assert json.loads(remote.read_text())["files"] is not None
    assert remote.read_bytes() == (out / "checkpoint-4" / "run_record.json").read_bytes()


@pytest.mark.slow
def test_no_push_carries_the_run_lock_or_its_holder(checkpoint_pushes) -> None:
    """The Trainer's pushes upload the whole output folder: the run's lock and its holder (pid, host name, start time)
    went to the repository's root. No commit carries a file of the machine's own."""
    hub, _ = checkpoint_pushes
    assert len(hub.commits) == 6  # per save: the root and last-checkpoint/; then the model and its card
    local_only = {".run.lock", ".run.lock.json"}
    assert not [f for c in hub.commits for f in c.files if Path(f).name in local_only or ".write-test-" in f]
    assert not [p for p in hub.repo("me/ckpt").rglob(".run.lock*")]
