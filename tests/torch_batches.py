"""What the PyTorch peers of lockstep's learning tests share
(torch_gpt_steps.py, torch_image_steps.py): a lockstep safetensors file
loaded into a torch module by name, and the batches
//benchmarks:data_batches wrote (each epoch in the job's global order)."""
import json
import os

import numpy as np
import torch

from torch_bert_reference import read_safetensors


def load_by_name(model, path):
    """Every parameter and kept buffer of `model` (its running statistics;
    not torch's num_batches_tracked counters, which lockstep does not
    write) from `path`, by state-dict name; SystemExit naming what is
    missing or unexpected."""
    state = {k: torch.as_tensor(np.asarray(v)) if not torch.is_tensor(v)
             else v for k, v in read_safetensors(path)[0].items()}
    _, unexpected = model.load_state_dict(state, strict=False)
    kept = model.state_dict()
    required = [k for k, _ in model.named_parameters()] + [
        k for k, _ in model.named_buffers()
        if k in kept and not k.endswith("num_batches_tracked")]
    missing = [k for k in required if k not in state]
    if missing or unexpected:
        raise SystemExit(f"{path}: missing {missing}, unexpected {unexpected}")


class Batches:
    """OUT_DIR of data_batches: meta, the splits, and each step's global
    batch."""

    def __init__(self, folder):
        self.folder = folder
        self.meta = json.load(open(os.path.join(folder, "meta.json")))
        self._epochs = {}

    def split(self, name):
        """(x [samples] + sample_shape, y [samples, labels_per_sample]) of
        train_eK or test: x int64 token ids for text, else float32."""
        m = self.meta
        x = np.fromfile(os.path.join(self.folder, name + ".x"),
                        dtype=np.int32 if m["x_dtype"] == "int32"
                        else np.float32)
        y = np.fromfile(os.path.join(self.folder, name + ".y"), dtype=np.int32)
        x = torch.from_numpy(x.reshape([-1] + m["sample_shape"]))
        if m["x_dtype"] == "int32":
            x = x.long()
        y = torch.from_numpy(y.reshape(-1, m["labels_per_sample"])).long()
        return x, y

    def step(self, s):
        """Global batch s (0-based) of the training run."""
        g, per_epoch = self.meta["global_batch"], self.meta["steps_per_epoch"]
        e, at = s // per_epoch, s % per_epoch
        if e not in self._epochs:
            self._epochs = {e: self.split(f"train_e{e}")}
        x, y = self._epochs[e]
        return x[at * g:(at + 1) * g], y[at * g:(at + 1) * g]
