"""examples/notebook.py runs whole against a real cluster (on a tiny BERT
job instead of the Brown corpus one)."""

import json
import os
import subprocess
import sys

import cluster as cluster_mod
import test_bert

ROOT = test_bert.ROOT


def test_the_notebook_runs_top_to_bottom(cluster, tmp_path):
    test_bert.write_corpus(str(tmp_path))
    job = test_bert.bert_job()
    job["name"] = "py-notebook"
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(job))
    env = dict(os.environ,
               LOCKSTEP_COORDINATOR=cluster.address,
               LOCKSTEP_NOTEBOOK_JOB=str(job_file),
               LOCKSTEP_NOTEBOOK_TEXT="the cat sat on the [MASK]",
               LOCKSTEP_BINARY=cluster_mod.binary(),
               PYTHONPATH=os.path.join(ROOT, "client", "python"))
    run = subprocess.run(
        [sys.executable, os.path.join("examples", "notebook.py")], cwd=ROOT,
        env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "workers: ['w0', 'w1']" in out, out
    assert "test accuracy 0." in out, out
    assert "loss at [10, 20] ...:" in out, out
    assert "loaded 26 tensors from step 28" in out, out
    assert "fill-mask: [CLS] the cat " in out, out
    assert " the [MASK] [SEP]\n" in out, out
    lines = out[out.index("fill-mask:"):].splitlines()[1:]
    assert len(lines) == 5, out
    probs = [float(line.split()[-1]) for line in lines]
    assert probs == sorted(probs, reverse=True) and 0 < probs[0] <= 1, lines
    assert "job py-notebook SUCCEEDED" in run.stderr, run.stderr
