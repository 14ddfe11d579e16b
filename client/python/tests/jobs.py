"""Small learnable jobs on CSV data the tests write."""

import os

import numpy as np


def write_csv(folder, features, train=256, test=64, seed=0):
    """train.csv and test.csv: ``features`` numbers per row, label first;
    the label is the argmax of a fixed linear map (3 classes)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(features, 3))
    paths = {}
    for split, n in (("train", train), ("test", test)):
        x = rng.normal(size=(n, features)).astype(np.float32)
        y = np.argmax(x @ w, axis=1)
        path = os.path.join(folder, f"{split}.csv")
        with open(path, "w") as f:
            for label, row in zip(y, x):
                f.write(f"{label}," + ",".join(f"{v:.6f}" for v in row) + "\n")
        paths[split] = path
    return paths


def read_csv(path):
    data = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    return data[:, 1:].astype(np.float32), data[:, 0].astype(np.int64)


def mlp_job(name, folder, epochs=2, workers=2):
    """A 2-layer MLP on 8 features: 256 samples, batch 16 per worker."""
    return {
        "name": name,
        "seed": 3,
        "model": {"input_shape": [8], "param_names": "torch", "layers": [
            {"type": "dense", "units": 16, "activation": "relu"},
            {"type": "dense", "units": 3}]},
        "loss": "sparse_categorical_crossentropy",
        "optimizer": {"type": "adam", "learning_rate": 0.01},
        "data": {"format": "csv", "train_path": "train.csv",
                 "test_path": "test.csv", "num_classes": 3},
        "batch_size_per_replica": 16,
        "epochs": epochs,
        "checkpoint": {"every_steps": 4, "keep": 3},
        "summary": {"every_steps": 2},
        "cluster": {"workers": workers, "replicas_per_worker": 1},
    }


def cnn_job(name, folder):
    """conv 3x3 (4 filters) on 4x4x1 images, flatten, dense: 16 features."""
    job = mlp_job(name, folder)
    job["model"] = {"input_shape": [4, 4, 1], "param_names": "torch",
                    "layers": [
        {"type": "conv2d", "filters": 4, "kernel_size": 3, "padding": "same",
         "activation": "relu"},
        {"type": "flatten"},
        {"type": "dense", "units": 3}]}
    return job
