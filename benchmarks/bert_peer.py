#!/usr/bin/python3
# The PyTorch side of benchmarks/bert_vs_pytorch.sh: the BERT masked-LM of a
# lockstep job (model.preset "bert_mlm", torch_bert.py) trained with the
# job's recipe on the very batches lockstep trains on (written by
# //benchmarks:data_batches: the same masks, in the same order).
#
#   bert_peer.py --job JOB.json --batches DIR --learn --epochs E
#       [--init model.safetensors]
#       trains E epochs (one process) and prints one JSON line per epoch:
#       masked-token accuracy and loss on the test split; --init starts from
#       lockstep's initial weights (a step-0 checkpoint's model.safetensors,
#       Hugging Face names and layouts), loaded by name: a missing,
#       unexpected or differently shaped tensor is an error
#   bert_peer.py --job JOB.json --batches DIR --steps N [--warmup W]
#       [--rank R --world-size W --rendezvous-file F]
#       times N training steps, alone or as one rank of DistributedData-
#       Parallel on Gloo, and prints one JSON line (rank 0): samples/s
#   bert_peer.py --info [--device cuda:N]
#   --device cuda:N trains on that GPU (FP32, TF32 off; each epoch's batches
#   copied to the GPU once, ahead of the timed steps)
#
# Exits 3 when torch runs on a slow BLAS (torch_common.require_fast_blas).
#
# The recipe mirrored from the job: AdamW (Keras' epsilon 1e-7 unless the job
# sets one; decoupled weight decay, none for parameters whose name contains
# one of exclude_from_weight_decay), clipping by global norm, the learning
# rate schedule (torch_common.make_schedule), dropout, the global batch
# (batch_size_per_replica x replicas), rank r taking positions [r*b, (r+1)*b)
# of each global batch. The loss is the mean over the global batch's
# labelled positions, as lockstep's (each rank scales its sum by world /
# global labels, so DDP's average is that mean).
import argparse
import json
import os
import resource
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--job", help="lockstep job file (model.preset bert_mlm)")
    p.add_argument("--batches", help="data_batches output folder")
    p.add_argument("--learn", action="store_true",
                   help="train --epochs epochs, evaluate after each")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=50, help="timed steps")
    p.add_argument("--warmup", type=int, default=5,
                   help="untimed steps before the timed ones")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--rendezvous-file")
    p.add_argument("--init", help="initial weights (safetensors, by name)")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--host", default="127.0.0.1",
                   help="rank 0's TCPStore address (its network namespace's "
                        "own with bert_vs_pytorch --link)")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N")
    p.add_argument("--tf32", action="store_true",
                   help="cuda: TF32 tensor cores for matmuls and "
                   "convolutions (lockstep's cluster.allow_tf32)")
    p.add_argument("--autocast", nargs="?", const="bf16",
                   choices=["bf16", "fp16"],
                   help="the step under torch.autocast on the device in "
                   "bfloat16 (default; lockstep's precision \"bf16\") or, "
                   "on a GPU, float16 with torch.cuda.amp.GradScaler "
                   "(\"fp16\"); on the CPU layer norms in float32, as "
                   "torch 2's CPU autocast runs them")
    p.add_argument("--info", action="store_true")
    args = p.parse_args()
    if not args.info and (args.job is None or args.batches is None):
        p.error("--job and --batches are required (or --info)")
    if min(args.steps, args.threads, args.world_size, args.epochs) < 1 or \
            args.warmup < 0:
        p.error("--steps, --threads, --world-size, --epochs must be >= 1")
    if args.device != "cpu" and (args.world_size > 1 or
                                 not args.device.startswith("cuda:")):
        p.error("--device: cpu, or cuda:N for one process")
    if args.world_size > 1 and not args.rendezvous_file:
        p.error("--rendezvous-file is required when --world-size > 1")
    return args


ARGS = parse_args()
# Threads set before torch loads. Debian's OpenBLAS (pthread build) keeps a
# pool of its own sized by OPENBLAS_NUM_THREADS; the calling script chooses
# it (bert_vs_pytorch.sh runs both 1 and T and reports each).
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_bert import BertForMaskedLM, Config  # noqa: E402
from torch_common import (alternatives_blas, blas_in_use,  # noqa: E402
                          load_weights_by_name, make_schedule,
                          rendezvous_store, require_fast_blas,
                          slowest_seconds)


def die(msg):
    print(f"bert_peer: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


class Split:
    """One file pair of data_batches: int32 inputs and labels, on `device`."""

    def __init__(self, folder, name, meta, device="cpu"):
        per, p = meta["sample_values"], meta["max_predictions"]
        x = np.fromfile(os.path.join(folder, name + ".x"), dtype=np.int32)
        y = np.fromfile(os.path.join(folder, name + ".y"), dtype=np.int32)
        if x.size % per or y.size != x.size // per * p:
            die(f"{folder}/{name}: sizes do not match meta.json")
        x = torch.from_numpy(x.reshape(-1, per).astype(np.int64))
        self.n = x.shape[0]
        fields, offset = {}, 0
        for f in meta["fields"]:
            size = p if f == "mask_positions" else meta["sequence_length"]
            fields[f] = x[:, offset:offset + size]
            offset += size
        self.ids = fields["token_ids"].contiguous()
        self.segments = fields["segment_ids"].contiguous()
        self.padding = fields["padding_mask"].float().contiguous()
        self.positions = fields["mask_positions"].contiguous()
        self.labels = torch.from_numpy(y.reshape(-1, p).astype(np.int64))
        self.labels_host = self.labels  # counts without a device sync
        for f in ("ids", "segments", "padding", "positions", "labels"):
            setattr(self, f, getattr(self, f).to(device))

    def rows(self, begin, end):
        s = slice(begin, end)
        return (self.ids[s], self.segments[s], self.padding[s],
                self.positions[s], self.labels[s])


def optimizer(spec, model):
    o = spec["optimizer"]
    if o.get("type") != "adamw":
        die(f"optimizer.type {o.get('type')!r}: this peer runs adamw")
    exclude = o.get("exclude_from_weight_decay", [])
    decay, plain = [], []
    for name, p in model.named_parameters():
        (plain if any(e in name for e in exclude) else decay).append(p)
    wd = o.get("weight_decay", 0.004)  # lockstep's (Keras') default
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": wd},
         {"params": plain, "weight_decay": 0.0}],
        lr=o.get("learning_rate", 0.001),
        betas=(o.get("beta_1", 0.9), o.get("beta_2", 0.999)),
        eps=o.get("epsilon", 1e-7))


def evaluate(model, split, batch=128):
    model.eval()
    loss_sum, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for b in range(0, split.n, batch):
            ids, seg, pad, pos, labels = split.rows(b, b + batch)
            logits = model(ids, seg, pad, pos)
            used = labels >= 0
            flat = logits[used]
            loss_sum += F.cross_entropy(flat, labels[used],
                                        reduction="sum").item()
            correct += (flat.argmax(-1) == labels[used]).sum().item()
            count += used.sum().item()
    model.train()
    return loss_sum / count, correct / count


def main():
    if ARGS.autocast and ARGS.device == "cpu":
        # torch 1.13's CPU autocast leaves layer_norm to the op, which
        # refuses a bfloat16 input with float32 weights; torch 2 runs it in
        # float32, as this does.
        plain_layer_norm = F.layer_norm
        F.layer_norm = lambda x, *a, **k: plain_layer_norm(x.float(), *a, **k)
    torch.set_num_threads(ARGS.threads)
    torch.set_num_interop_threads(1)
    blas, blas_path = blas_in_use()
    # Every rank: each exits 3 before the rendezvous, so none waits for it.
    require_fast_blas(blas, blas_path)
    device = torch.device(ARGS.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            die(f"--device {ARGS.device}: this torch sees no CUDA device")
        # FP32 on both sides: lockstep's GEMMs run without TF32 unless the
        # job says cluster.allow_tf32 (--tf32 here).
        torch.backends.cuda.matmul.allow_tf32 = ARGS.tf32
        torch.backends.cudnn.allow_tf32 = ARGS.tf32
    elif ARGS.autocast == "fp16":
        die("--autocast fp16 runs on a GPU only (as lockstep's fp16)")
    dtype = torch.float16 if ARGS.autocast == "fp16" else torch.bfloat16
    # GradScaler's defaults are lockstep's fp16 loss scaling; disabled it
    # passes the loss and the step through.
    scaler = torch.cuda.amp.GradScaler(enabled=ARGS.autocast == "fp16")
    if ARGS.info:
        info = {
            "torch": torch.__version__, "blas": blas, "blas_path": blas_path,
            "alternatives_libblas": alternatives_blas(),
            "gloo": dist.is_available() and dist.is_gloo_available()}
        if device.type == "cuda":
            info["gpu"] = torch.cuda.get_device_name(device)
            info["cuda"] = torch.version.cuda
        print(json.dumps(info))
        return
    with open(ARGS.job) as f:
        spec = json.load(f)
    with open(os.path.join(ARGS.batches, "meta.json")) as f:
        meta = json.load(f)
    preset = spec["model"]
    if preset.get("preset") != "bert_mlm":
        die("model.preset must be bert_mlm")
    world, rank = ARGS.world_size, ARGS.rank
    global_batch = meta["global_batch"]
    if global_batch % world:
        die(f"global batch {global_batch} does not split over {world} ranks")
    local = global_batch // world
    spe = meta["steps_per_epoch"]
    clip = spec["optimizer"].get("global_clipnorm", 0.0)

    torch.manual_seed(int(spec.get("seed", 0)))  # the same weights per rank
    model = BertForMaskedLM(Config(preset))
    if ARGS.init:
        n = load_weights_by_name(model, ARGS.init, die)
        print(f"bert_peer: {n} tensors from {ARGS.init}", file=sys.stderr,
              flush=True)
    model.to(device)
    net = model
    if world > 1:
        store = rendezvous_store(ARGS.rendezvous_file, rank, world,
                                 ARGS.timeout, die, ARGS.host)
        dist.init_process_group("gloo", store=store, rank=rank,
                                world_size=world)
        net = torch.nn.parallel.DistributedDataParallel(model)
    opt = optimizer(spec, model)
    lr_at = make_schedule(spec, spe, die)
    epochs = {}

    def step(s):
        e, k = divmod(s, spe)
        if e not in epochs:
            epochs.clear()
            epochs[e] = Split(ARGS.batches, f"train_e{e % meta['epochs']}",
                              meta, device)
        split = epochs[e]
        begin = k * global_batch
        ids, seg, pad, pos, labels = split.rows(begin + rank * local,
                                                begin + (rank + 1) * local)
        host = split.labels_host
        global_labels = (host[begin:begin + global_batch] >= 0).sum()
        local_labels = (host[begin + rank * local:
                             begin + (rank + 1) * local] >= 0).sum()
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        with torch.autocast(device.type, dtype=dtype,
                            enabled=ARGS.autocast is not None):
            logits = net(ids, seg, pad, pos)
        loss_sum = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                   labels.reshape(-1), ignore_index=-1,
                                   reduction="sum")
        loss = loss_sum * (world / max(int(global_labels), 1))
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if clip > 0:
            scaler.unscale_(opt)  # clip the true gradients, as lockstep
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        scaler.step(opt)
        scaler.update()
        return ids.shape[0] * world, loss_sum.item() / max(
            int(local_labels), 1)

    if ARGS.learn:
        if world != 1:
            die("--learn runs in one process")
        test = Split(ARGS.batches, "test", meta, device)
        t0 = time.perf_counter()
        for e in range(ARGS.epochs):
            t = time.perf_counter()
            losses = [step(e * spe + k)[1] for k in range(spe)]
            seconds = time.perf_counter() - t
            eval_loss, eval_acc = evaluate(model, test)
            print(json.dumps({
                "epoch": e + 1, "train_loss": sum(losses) / len(losses),
                "test_loss": eval_loss, "test_accuracy": eval_acc,
                "epoch_seconds": round(seconds, 2),
                "samples_per_sec": meta["train_samples"] / seconds,
                "elapsed_seconds": round(time.perf_counter() - t0, 2)}),
                flush=True)
        return

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for s in range(ARGS.warmup):
        step(s)
    # The first timed step's epoch is loaded (and on a GPU copied there)
    # before the clock starts.
    step_epoch = divmod(ARGS.warmup, spe)[0]
    if step_epoch not in epochs:
        epochs.clear()
        epochs[step_epoch] = Split(
            ARGS.batches, f"train_e{step_epoch % meta['epochs']}", meta,
            device)
    if world > 1:
        dist.barrier()
    sync()
    t0 = time.perf_counter()
    samples = 0
    for s in range(ARGS.warmup, ARGS.warmup + ARGS.steps):
        samples += step(s)[0]
    sync()
    seconds = time.perf_counter() - t0
    seconds = slowest_seconds(seconds, world)
    if rank == 0:
        print(json.dumps({
            "samples_per_sec": samples / seconds, "steps": ARGS.steps,
            "seconds": round(seconds, 3), "world_size": world,
            "threads": ARGS.threads, "global_batch": global_batch,
            "device": ARGS.device,
            "openblas_threads": int(os.environ["OPENBLAS_NUM_THREADS"]),
            "peak_rss_mib": resource.getrusage(
                resource.RUSAGE_SELF).ru_maxrss / 1024}), flush=True)
    if world > 1:
        dist.barrier()  # as ddp_peer.py: leave without c10d's teardown
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
