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
    lines = out[out.index("fill-mask:"):].splitlines()[1:]
    assert len(lines) == 5, out
    probs = [float(line.split()[-1]) for line in lines]
    assert probs == sorted(probs, reverse=True) and 0 < probs[0] <= 1, lines
    assert "job py-notebook SUCCEEDED" in run.stderr, run.stderr

    # The notebook's tokens and top-5 are lockstep predict's for the same
    # sentence and checkpoint (its WordPiece is the example's own code).
    job_json = tmp_path / "resolved.json"
    job_json.write_text(cluster.client().check(job, data_dir=str(tmp_path)))
    ckpt = cluster.client().job("py-notebook").checkpoint()
    predict = subprocess.run(
        [cluster_mod.binary(), "predict", str(job_json), "--text",
         "the cat sat on the [MASK]", "--checkpoint",
         os.path.dirname(ckpt.path), "--top-k", "5"],
        capture_output=True, text=True, timeout=60)
    assert predict.returncode == 0, predict.stderr
    tokens, _, expected, _ = test_bert.parse_predict(predict.stdout)
    assert f"fill-mask: {' '.join(tokens)}\n" in out, (out, predict.stdout)
    got = {line.split()[0]: float(line.split()[1]) for line in lines}
    assert got.keys() == expected.keys(), (got, expected)
    for token, prob in expected.items():
        # Both print 4 decimals of nearly equal floats.
        assert abs(got[token] - prob) <= 1.5e-4, (token, got, expected)
