#!/usr/bin/python3
"""PyTorch reference for lockstep's BERT masked-language-model agreement test.

The C++ side builds a BERT MLM whose parameter names match Hugging Face's
BertForMaskedLM state dict, loads the initial weights written here, runs one
training step on the batch written here and compares its loss, logits and
parameter gradients against the values this script computes with plain torch
(no `transformers` dependency).

Outputs (in --out DIR):
  model.safetensors     initial float32 weights (HF names and layouts; the tied
                        decoder weight is omitted; an extra I64
                        "bert.embeddings.position_ids" is included so the
                        reader's handling of unknown names is exercised)
  batch.safetensors     token_ids, segment_ids, padding_mask, mask_positions
                        (float32) and labels (I32)
  expected.safetensors  logits, loss and grad.<name> for every parameter

With --autocast the step (forward, loss, backward) runs under
torch.autocast("cpu", dtype=torch.bfloat16): expected holds its loss, logits
(as float32) and the float32 parameters' gradients.

With --masks FILE (dropout masks of 0 or 1/(1-rate), lockstep's) the step has
dropout: each mask multiplies at the site its HF module name says (mask_shapes):
the embeddings' output, and per layer the attention probabilities after the
softmax and each sub-layer's output before its residual add; expected then
also holds eval_logits, the logits without dropout.

The safetensors files are written and read by hand (struct + json), so the
script needs only torch.
"""

import argparse
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

LN_EPS = 1e-12

# safetensors dtype name -> (struct code, byte size, torch dtype)
_DTYPES = {"F32": ("f", 4, torch.float32), "F64": ("d", 8, torch.float64),
           "I64": ("q", 8, torch.int64), "I32": ("i", 4, torch.int32)}
_TORCH_TO_ST = {v[2]: k for k, v in _DTYPES.items()}


# --- safetensors I/O ---

def _tensor_bytes(t):
    st = _TORCH_TO_ST.get(t.dtype)
    if st is None:
        raise ValueError("unsupported dtype %s" % t.dtype)
    code = _DTYPES[st][0]
    flat = t.detach().contiguous().reshape(-1).tolist()
    return st, struct.pack("<%d%s" % (len(flat), code), *flat)


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} to `path`; data laid out in sorted name order."""
    if metadata is None:
        metadata = {"format": "pt"}
    header = {"__metadata__": metadata}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        if name == "__metadata__":
            raise ValueError("reserved tensor name __metadata__")
        t = tensors[name]
        st, data = _tensor_bytes(t)
        header[name] = {"dtype": st, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for c in chunks:
            f.write(c)


def read_safetensors(path):
    """Returns ({name: tensor}, metadata). Validates header and offsets."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("%s: file too short" % path)
    (n,) = struct.unpack_from("<Q", raw, 0)
    if 8 + n > len(raw):
        raise ValueError("%s: header length %d exceeds file size" % (path, n))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", None)
    tensors = {}
    spans = []
    for name, info in header.items():
        dtype = info["dtype"]
        if dtype not in _DTYPES:
            raise ValueError("%s: %s has unsupported dtype %s" % (path, name, dtype))
        code, size, tdtype = _DTYPES[dtype]
        shape = [int(d) for d in info["shape"]]
        begin, end = info["data_offsets"]
        count = math.prod(shape)
        if end - begin != count * size or begin < 0 or end > len(data):
            raise ValueError("%s: %s has bad data_offsets %s for shape %s"
                             % (path, name, info["data_offsets"], shape))
        values = struct.unpack_from("<%d%s" % (count, code), data, begin)
        tensors[name] = torch.tensor(values, dtype=tdtype).reshape(shape)
        spans.append((begin, end))
    pos = 0
    for b, e in sorted(spans):
        if b != pos:
            raise ValueError("%s: data section has a gap/overlap at %d" % (path, pos))
        pos = e
    if pos != len(data):
        raise ValueError("%s: %d trailing bytes in data section" % (path, len(data) - pos))
    return tensors, metadata


# --- Model ---

def parameter_shapes(cfg):
    V, H, I, P = cfg.vocab, cfg.hidden, cfg.intermediate, cfg.max_positions
    shapes = {
        "bert.embeddings.word_embeddings.weight": [V, H],
        "bert.embeddings.position_embeddings.weight": [P, H],
        "bert.embeddings.token_type_embeddings.weight": [2, H],
        "bert.embeddings.LayerNorm.weight": [H],
        "bert.embeddings.LayerNorm.bias": [H],
    }
    for i in range(cfg.layers):
        p = "bert.encoder.layer.%d." % i
        for proj in ("query", "key", "value"):
            shapes[p + "attention.self.%s.weight" % proj] = [H, H]
            shapes[p + "attention.self.%s.bias" % proj] = [H]
        shapes[p + "attention.output.dense.weight"] = [H, H]
        shapes[p + "attention.output.dense.bias"] = [H]
        shapes[p + "attention.output.LayerNorm.weight"] = [H]
        shapes[p + "attention.output.LayerNorm.bias"] = [H]
        shapes[p + "intermediate.dense.weight"] = [I, H]
        shapes[p + "intermediate.dense.bias"] = [I]
        shapes[p + "output.dense.weight"] = [H, I]
        shapes[p + "output.dense.bias"] = [H]
        shapes[p + "output.LayerNorm.weight"] = [H]
        shapes[p + "output.LayerNorm.bias"] = [H]
    shapes["cls.predictions.transform.dense.weight"] = [H, H]
    shapes["cls.predictions.transform.dense.bias"] = [H]
    shapes["cls.predictions.transform.LayerNorm.weight"] = [H]
    shapes["cls.predictions.transform.LayerNorm.bias"] = [H]
    shapes["cls.predictions.bias"] = [V]
    return shapes


def init_parameters(cfg, gen):
    params = {}
    for name, shape in parameter_shapes(cfg).items():
        noise = torch.randn(shape, generator=gen, dtype=torch.float32)
        if "LayerNorm.weight" in name:
            t = 1.0 + 0.1 * noise
        elif name.endswith(".bias"):
            t = 0.05 * noise
        else:  # matrices and embedding tables
            t = cfg.std * noise
        params[name] = t
    return params


def mask_shapes(cfg):
    """{site: shape} of the dropout masks --masks must hold."""
    B, L, H = cfg.batch, cfg.length, cfg.hidden
    shapes = {"bert.embeddings.dropout": [B, L, H]}
    for i in range(cfg.layers):
        p = "bert.encoder.layer.%d." % i
        shapes[p + "attention.self.dropout"] = [B, cfg.heads, L, L]
        shapes[p + "attention.output.dropout"] = [B, L, H]
        shapes[p + "output.dropout"] = [B, L, H]
    return shapes


def read_masks(path, cfg):
    masks, want = read_safetensors(path)[0], mask_shapes(cfg)
    if {n: list(m.shape) for n, m in masks.items()} != want:
        raise ValueError("%s: masks %s, expected %s" % (
            path, {n: list(m.shape) for n, m in masks.items()}, want))
    if not all(m.dtype == torch.float32 and torch.all(m >= 0) for m in masks.values()):
        raise ValueError("%s: masks must be non-negative F32" % path)
    return masks


def bert_mlm_forward(params, batch, cfg, masks=None):
    """Returns logits [B, P, V] computed from the parameter dict; with
    `masks` ({site: tensor}), dropout applied with them (training)."""
    W = params
    ids = batch["token_ids"].long()
    seg = batch["segment_ids"].long()
    mask = batch["padding_mask"].float()
    pos = batch["mask_positions"].long()
    B, L = ids.shape
    H, nh = cfg.hidden, cfg.heads
    dh = H // nh

    def linear(x, prefix):
        return F.linear(x, W[prefix + ".weight"], W[prefix + ".bias"])

    def layer_norm(x, prefix):
        # In float32 under autocast too, as torch 2's CPU autocast runs it
        # (1.13's leaves it to the op, which refuses a bfloat16 input with
        # float32 weights).
        return F.layer_norm(x.float(), (H,), W[prefix + ".weight"],
                            W[prefix + ".bias"], LN_EPS)

    def drop(x, site):  # inverted dropout: the mask holds 0 or 1/(1-rate)
        return x if masks is None else x * masks[site]

    word = W["bert.embeddings.word_embeddings.weight"]
    x = (word[ids]
         + W["bert.embeddings.position_embeddings.weight"][torch.arange(L)].unsqueeze(0)
         + W["bert.embeddings.token_type_embeddings.weight"][seg])
    x = drop(layer_norm(x, "bert.embeddings.LayerNorm"), "bert.embeddings.dropout")

    # Additive key mask, as HF: 0 for tokens, finfo.min for padding.
    add_mask = (1.0 - mask)[:, None, None, :] * torch.finfo(torch.float32).min

    def split(t):
        return t.view(B, L, nh, dh).permute(0, 2, 1, 3)  # [B, nh, L, dh]

    for i in range(cfg.layers):
        p = "bert.encoder.layer.%d." % i
        q = split(linear(x, p + "attention.self.query"))
        k = split(linear(x, p + "attention.self.key"))
        v = split(linear(x, p + "attention.self.value"))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(dh) + add_mask
        probs = drop(torch.softmax(scores, dim=-1), p + "attention.self.dropout")
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(B, L, H)
        attn = layer_norm(drop(linear(ctx, p + "attention.output.dense"),
                               p + "attention.output.dropout") + x,
                          p + "attention.output.LayerNorm")
        inter = F.gelu(linear(attn, p + "intermediate.dense"))
        x = layer_norm(drop(linear(inter, p + "output.dense"), p + "output.dropout")
                       + attn, p + "output.LayerNorm")

    # Gather masked positions; position -1 selects an appended zero row.
    padded = torch.cat([x, x.new_zeros(B, 1, H)], dim=1)  # [B, L+1, H]
    idx = torch.where(pos < 0, torch.full_like(pos, L), pos)
    h = torch.gather(padded, 1, idx.unsqueeze(-1).expand(-1, -1, H))  # [B, P, H]

    h = F.gelu(linear(h, "cls.predictions.transform.dense"))
    h = layer_norm(h, "cls.predictions.transform.LayerNorm")
    return torch.matmul(h, word.t()) + W["cls.predictions.bias"]


def mlm_loss(logits, labels, vocab):
    return F.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1).long(),
                           ignore_index=-1)


def forward_backward(params, batch, cfg, masks=None):
    leaves = {n: t.detach().clone().requires_grad_(True) for n, t in params.items()}
    # --autocast: the step as torch.autocast runs it on the CPU in bfloat16
    # (float32 leaves, so float32 gradients); logits and loss come out as
    # float32.
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.autocast):
        logits = bert_mlm_forward(leaves, batch, cfg, masks)
        loss = mlm_loss(logits, batch["labels"], cfg.vocab)
    logits = logits.float()
    loss = loss.float()
    loss.backward()
    grads = {n: t.grad.detach().clone() if t.grad is not None else torch.zeros_like(t)
             for n, t in leaves.items()}
    return logits.detach(), loss.detach(), grads


# --- Batch ---

def make_batch(cfg, gen):
    B, L, P, V = cfg.batch, cfg.length, cfg.predictions, cfg.vocab
    token_ids = torch.zeros(B, L)
    segment_ids = torch.zeros(B, L)
    padding_mask = torch.zeros(B, L)
    mask_positions = torch.full((B, P), -1.0)
    labels = torch.full((B, P), -1, dtype=torch.int32)
    for b in range(B):
        real = L - 3 if b == 0 else L          # sample 0: last 3 positions padded
        used = P - 1 if b == 1 else P          # sample 1: one unused slot
        token_ids[b, :real] = torch.randint(1, V, (real,), generator=gen).float()
        segment_ids[b, real // 2:real] = 1.0
        padding_mask[b, :real] = 1.0
        chosen = torch.randperm(real, generator=gen)[:used]
        mask_positions[b, :used] = chosen.float()
        labels[b, :used] = torch.randint(0, V, (used,), generator=gen, dtype=torch.int32)
    return {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": padding_mask,
        "mask_positions": mask_positions,
        "labels": labels,
        # The same labels as F32, for readers that take float tensors only.
        "label_values": labels.float(),
    }


# --- Main ---

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--layers", type=int, required=True)
    for flag, default in (("seed", 0), ("vocab", 50), ("hidden", 16), ("heads", 2),
                          ("intermediate", 32), ("max-positions", 16), ("length", 10),
                          ("predictions", 3), ("batch", 3)):
        ap.add_argument("--" + flag, type=int, default=default)
    ap.add_argument("--std", type=float, default=0.02,
                    help="stddev of matrices and tables (BERT: 0.02; larger "
                         "makes attention far from uniform)")
    ap.add_argument("--masks", help="safetensors file of dropout masks (see above)")
    ap.add_argument("--autocast", action="store_true",
                    help="the step under torch.autocast(\"cpu\", bfloat16)")
    return ap.parse_args(argv)


def validate(cfg):
    for field in ("layers", "vocab", "hidden", "heads", "intermediate",
                  "max_positions", "length", "predictions", "batch"):
        v = getattr(cfg, field)
        if v < (0 if field == "layers" else 1):
            raise ValueError("--%s must be positive (got %d)" % (field.replace("_", "-"), v))
    if cfg.vocab < 2:
        raise ValueError("--vocab must be at least 2")
    if cfg.hidden % cfg.heads:
        raise ValueError("--hidden (%d) must be divisible by --heads (%d)"
                         % (cfg.hidden, cfg.heads))
    if cfg.length > cfg.max_positions:
        raise ValueError("--length (%d) exceeds --max-positions (%d)"
                         % (cfg.length, cfg.max_positions))
    if cfg.length - 3 < cfg.predictions:
        raise ValueError("--length must be at least --predictions + 3 (sample 0 "
                         "has 3 padded positions and needs distinct mask positions)")
    if cfg.batch >= 2 and cfg.predictions < 2:
        raise ValueError("--predictions must be at least 2 when --batch >= 2 "
                         "(sample 1 leaves one slot unused)")


def self_check(out, cfg, params, batch, logits, loss, grads, masks):
    """Re-reads every file written and checks it reproduces the results."""
    model, meta = read_safetensors(os.path.join(out, "model.safetensors"))
    if meta != {"format": "pt"}:
        raise RuntimeError("model.safetensors metadata mismatch: %r" % (meta,))
    extra = model.pop("bert.embeddings.position_ids")
    if not torch.equal(extra, torch.arange(cfg.max_positions).unsqueeze(0)):
        raise RuntimeError("position_ids round-trip mismatch")
    if set(model) != set(params):
        raise RuntimeError("model.safetensors names mismatch")
    for n in params:
        if not torch.equal(model[n], params[n]):
            raise RuntimeError("weight round-trip mismatch: %s" % n)
    rbatch, _ = read_safetensors(os.path.join(out, "batch.safetensors"))
    for n in batch:
        if rbatch[n].dtype != batch[n].dtype or not torch.equal(rbatch[n], batch[n]):
            raise RuntimeError("batch round-trip mismatch: %s" % n)
    logits2, loss2, grads2 = forward_backward(model, rbatch, cfg, masks)
    expected, _ = read_safetensors(os.path.join(out, "expected.safetensors"))
    if not (torch.equal(expected["loss"], loss.reshape(1))
            and torch.equal(loss2.reshape(1), expected["loss"])):
        raise RuntimeError("loss not reproduced from files")
    if not (torch.equal(expected["logits"], logits) and torch.equal(logits2, logits)):
        raise RuntimeError("logits not reproduced from files")
    for n in params:
        if not (torch.equal(expected["grad." + n], grads[n])
                and torch.equal(grads2[n], grads[n])):
            raise RuntimeError("gradient not reproduced from files: %s" % n)


def main(argv):
    cfg = parse_args(argv)
    try:
        validate(cfg)
        torch.set_num_threads(1)
        gen = torch.Generator().manual_seed(cfg.seed)
        params = init_parameters(cfg, gen)
        batch = make_batch(cfg, gen)
        masks = read_masks(cfg.masks, cfg) if cfg.masks else None
        logits, loss, grads = forward_backward(params, batch, cfg, masks)
        if not torch.isfinite(loss):
            raise RuntimeError("loss is not finite: %r" % loss.item())

        os.makedirs(cfg.out, exist_ok=True)
        model_tensors = dict(params)
        model_tensors["bert.embeddings.position_ids"] = (
            torch.arange(cfg.max_positions, dtype=torch.int64).unsqueeze(0))
        expected = {"logits": logits, "loss": loss.reshape(1).float()}
        for n, g in grads.items():
            expected["grad." + n] = g
        if masks is not None:  # the same weights in inference: no dropout
            expected["eval_logits"] = bert_mlm_forward(params, batch, cfg).detach()
        write_safetensors(os.path.join(cfg.out, "model.safetensors"), model_tensors)
        write_safetensors(os.path.join(cfg.out, "batch.safetensors"), batch)
        write_safetensors(os.path.join(cfg.out, "expected.safetensors"), expected)

        self_check(cfg.out, cfg, params, batch, logits, loss, grads, masks)
    except Exception as e:  # report clearly, exit non-zero
        print("torch_bert_reference: error: %s" % e, file=sys.stderr)
        return 1
    total = len(model_tensors) + len(batch) + len(expected)
    print("loss=%.9g tensors_written=%d (model=%d batch=%d expected=%d) out=%s"
          % (loss.item(), total, len(model_tensors), len(batch), len(expected), cfg.out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
