#!/usr/bin/python3
"""The tables of benchmarks/bert_vs_pytorch.sh, from the figures its runs
left in TMP:

  bert_tables.py ROWS TMP STEPS_PER_EPOCH EPOCHS LEARNING(0|1) REPEAT SEEDS
      [BATCHES]

Speed: ROWS (key, label, samples/s, peak RSS MiB per run; each key's best
run is kept) and the ratios against PyTorch's fastest rows. Learning: for
each seed of SEEDS (comma-separated), TMP/learn1_sS.json,
TMP/learn2_sS.json and TMP/learn1o_sS.json (the imported module; lockstep's
eval/accuracy by step, summaries.py) and
TMP/torch_learn_sS.jsonl (bert_peer.py --learn); each figure's mean and
(min to max) range over the seeds, the goals judged on the mean. BATCHES
(comma-separated) names the GPU rows' global batches (keys lockstep_bB,
torch_bB), each lockstep row against PyTorch's of the same batch.
"""
import json
import os
import sys

rows_path, tmp, spe, epochs, learning, repeat, seeds = sys.argv[1:8]
gpu_batches = sys.argv[8].split(",") if len(sys.argv) > 8 else []
seeds = [int(x) for x in seeds.split(",")]
spe, epochs = int(spe), int(epochs)
rows = {}
for line in open(rows_path).read().splitlines():
    key, label, sps, rss = line.split("\t")
    if key not in rows or float(sps) > rows[key][1]:  # the best round
        rows[key] = (label, float(sps), float(rss))
if rows:
    fmt = "{:<62} {:>10} {:>14}"
    gpu = any(k.startswith("lockstep_b") for k in rows)
    print("Speed: training samples/s (higher is better)"
          + ("" if gpu else ", global batch 32")
          + ("" if repeat == "1" else f", the best of {repeat} rounds"))
    print(fmt.format("system", "samples/s", "peak RSS MiB"))
    for key, (label, sps, rss) in rows.items():
        print(fmt.format(label, f"{sps:,.1f}", f"{rss:,.0f}"))
    def ratio(a, b):
        return rows[a][1] / rows[b][1]
    def fastest(*keys):
        present = [k for k in keys if k in rows]
        return max(present, key=lambda k: rows[k][1]) if present else None
    torch1 = fastest("torch1", "torch1b", "torch1m")
    ddp2 = fastest("ddp2", "ddp2m")
    for text, a, b, goal in [
            ("lockstep 1 process / PyTorch's fastest 1-process row",
             "lockstep1", torch1, 1.0),
            ("lockstep 2 workers / PyTorch DDP's fastest row", "lockstep2",
             ddp2, 1.2),
            ("lockstep 2 workers, bf16 on the wire / PyTorch DDP's fastest",
             "lockstep2b", ddp2, 1.2),
            ("lockstep 2 workers / lockstep 1 process", "lockstep2", "lockstep1", None),
            ("lockstep, imported from ONNX / lockstep's own layers",
             "onnx1", "lockstep1", 0.9),
            ("lockstep, imported from ONNX / PyTorch's fastest 1-process",
             "onnx1", torch1, 1.0),
            ("lockstep bf16 / lockstep fp32, 1 process", "lockstep1_bf16",
             "lockstep1", None),
            ("lockstep bf16 / PyTorch torch.autocast bf16", "lockstep1_bf16",
             "torch1_bf16", 1.0),
            ("PyTorch torch.autocast bf16 / PyTorch fp32", "torch1_bf16",
             "torch1", None)] + [
            (f"lockstep / PyTorch eager on the GPU, global batch {b}",
             f"lockstep_b{b}", f"torch_b{b}", 1.0) for b in gpu_batches] + [
            row for b in gpu_batches for p in ("bf16", "fp16") for row in (
                (f"lockstep {p} / PyTorch autocast {p}, GPU batch {b}",
                 f"lockstep_b{b}_{p}", f"torch_b{b}_{p}", 1.0),
                (f"lockstep {p} / lockstep fp32, GPU batch {b}",
                 f"lockstep_b{b}_{p}", f"lockstep_b{b}", 2.0))]:
        if a in rows and b in rows:
            r = ratio(a, b)
            mark = "" if goal is None else \
                f"  (goal >= {goal}x: {'MET' if r >= goal else 'NOT MET'})"
            print(f"{text + ':':<58} {r:.2f}x{mark}")
    print()
if learning == "1":
    def lockstep_epochs(name):
        s = json.load(open(os.path.join(tmp, name + ".json")))
        acc = s.get("eval/accuracy", {})
        return [acc.get(str(e * spe)) for e in range(1, epochs + 1)]

    def torch_epochs(seed):
        acc = [json.loads(l)["test_accuracy"] for l in
               open(os.path.join(tmp, f"torch_learn_s{seed}.jsonl"))]
        return [acc[e] if e < len(acc) else None for e in range(epochs)]

    # per system: one list of per-epoch accuracies per seed
    runs = {"one": [lockstep_epochs(f"learn1_s{s}") for s in seeds],
            "two": [lockstep_epochs(f"learn2_s{s}") for s in seeds],
            "onnx": [lockstep_epochs(f"learn1o_s{s}") for s in seeds],
            "torch": [torch_epochs(s) for s in seeds]}

    def spread(values, signed=False):
        """mean (min to max) over seeds; "-" when a seed lacks the figure."""
        if not values or None in values:
            return "-", None
        m = sum(values) / len(values)
        f = "{:+.4f}" if signed else "{:.4f}"
        if len(values) == 1:
            return f.format(m), m
        return (f"{f.format(m)} ({f.format(min(values))} to "
                f"{f.format(max(values))})"), m

    print("Learning: masked-token accuracy on valid.txt after each epoch; per "
          "seed both sides start from lockstep's initial weights and train on "
          "the same batches and masks")
    print(f"seeds {','.join(map(str, seeds))}: mean (min to max) over seeds")
    fmt = "{:>5}  {:<28} {:<28} {:<28} {:<28}"
    print(fmt.format("epoch", "lockstep 1 worker", "lockstep 2 workers",
                     "imported from ONNX, 1 worker", "PyTorch"))
    for e in range(epochs):
        print(fmt.format(e + 1, *(spread([r[e] for r in runs[k]])[0]
                                  for k in ("one", "two", "onnx", "torch"))))
    last = epochs - 1
    d1 = [o[last] - t[last] if None not in (o[last], t[last]) else None
          for o, t in zip(runs["one"], runs["torch"])]
    d2 = [w[last] - o[last] if None not in (w[last], o[last]) else None
          for w, o in zip(runs["two"], runs["one"])]
    d3 = [i[last] - o[last] if None not in (i[last], o[last]) else None
          for i, o in zip(runs["onnx"], runs["one"])]
    text1, m1 = spread(d1, signed=True)
    text2, m2 = spread(d2, signed=True)
    text3, m3 = spread(d3, signed=True)
    if m1 is not None:
        print(f"lockstep 1 worker - PyTorch after epoch {epochs}: {text1}  "
              f"(goal, on the mean: >= -0.01: "
              f"{'MET' if m1 >= -0.01 else 'NOT MET'})")
    if m2 is not None:
        print(f"2 workers - 1 worker after epoch {epochs}: {text2}  "
              f"(goal, on the mean: within 0.01: "
              f"{'MET' if abs(m2) <= 0.01 else 'NOT MET'})")
    if m3 is not None:
        print(f"imported from ONNX - lockstep's own layers (1 worker) after "
              f"epoch {epochs}: {text3}  (goal, on the mean: within 0.01: "
              f"{'MET' if abs(m3) <= 0.01 else 'NOT MET'})")
    f = lambda v: "-" if v is None else f"{v:.4f}"
    for s, one, two, o, t in zip(seeds, runs["one"], runs["two"],
                                 runs["onnx"], runs["torch"]):
        print(f"  seed {s}, epoch {epochs}: lockstep 1 worker {f(one[last])}, "
              f"2 workers {f(two[last])}, imported {f(o[last])}, "
              f"PyTorch {f(t[last])}")
