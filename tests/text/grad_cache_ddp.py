"""One gradient-cached SimCSE step in each of N DDP processes (run by ``accelerate launch``, see
``test_grad_cache.py``): process r takes rows [r·b, (r+1)·b) of the batch; rank 0 saves the averaged gradients.

    python -m accelerate.commands.launch --multi_gpu --num_processes 2 grad_cache_ddp.py TINY_BERT OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from transformers import AutoTokenizer

from tests.helpers import NO_DROPOUT, collate, grads, make_loss, tiny_model, trainer


def main() -> None:
    folder, out = Path(sys.argv[1]), Path(sys.argv[2])
    texts = json.loads((out / "texts.json").read_text(encoding="utf-8"))
    model = tiny_model(folder, **NO_DROPOUT)
    t = trainer(model, out / "ddp", 4)
    t.contrastive_loss = make_loss(gather_across_devices=True)
    rank, world = t.args.process_index, t.args.world_size
    assert world > 1, "run under a multi-process launcher"
    batch = collate(AutoTokenizer.from_pretrained(folder))(texts)  # padded together, as one process would
    rows = len(texts) // world
    local = {k: v[rank * rows : (rank + 1) * rows] if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    ddp = t.accelerator.prepare(model)
    assert isinstance(ddp, torch.nn.parallel.DistributedDataParallel)
    calls = [0]

    def counting_allreduce(state, bucket):  # DDP's gradient all-reduce, counted per bucket
        calls[0] += 1
        return allreduce_hook(state, bucket)

    ddp.register_comm_hook(None, counting_allreduce)
    t.compute_loss(ddp, local).backward()  # 2 chunks of 4 and 2 sentences
    cached_calls, cached_grads = calls[0], grads(model)
    trainer(model, out / "plain", None).compute_loss(ddp, local).backward()  # uncached: one backward
    if rank == 0:
        torch.save(cached_grads, out / "grads.pt")
        counts = {"cached": cached_calls, "uncached": calls[0] - cached_calls}
        (out / "allreduce.json").write_text(json.dumps(counts), encoding="utf-8")
    # Both processes leave the group together and close it: exiting with gloo's threads still running aborted a
    # process now and then ("terminate called without an active exception", SIGABRT after its work was done).
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
