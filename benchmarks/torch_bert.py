"""A BERT masked language model in plain PyTorch, as Hugging Face's
BertForMaskedLM builds it (the same module tree, so state_dict names are
HF's: bert.embeddings.word_embeddings.weight, ...), with lockstep's
bert_mlm head: the hidden states at the masked positions are gathered
before the prediction head (positions -1 give zero rows, as lockstep's
gather_positions), and the decoder is tied to the word embedding.

Initialised as lockstep's preset: truncated normal (stddev 0.02, cut at two
standard deviations, as Keras' TruncatedNormal) for matrices and tables,
zero biases, LayerNorm 1 and 0. The benchmarks' peer (bert_peer.py) uses it.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


class Config:
    def __init__(self, preset):
        self.vocab = int(preset["vocab_size"])
        self.hidden = int(preset["hidden"])
        self.layers = int(preset["layers"])
        self.heads = int(preset["heads"])
        self.intermediate = int(preset["intermediate"])
        self.max_positions = int(preset["max_positions"])
        self.dropout = float(preset.get("dropout", 0.1))
        self.eps = float(preset.get("layer_norm_epsilon", 1e-12))
        self.std = float(preset.get("initializer_stddev", 0.02))


class Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab, c.hidden)
        self.position_embeddings = nn.Embedding(c.max_positions, c.hidden)
        self.token_type_embeddings = nn.Embedding(2, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, ids, segments):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = (self.word_embeddings(ids) + self.position_embeddings(pos)
             + self.token_type_embeddings(segments))
        return self.dropout(self.LayerNorm(x))


class SelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.size = c.heads, c.hidden // c.heads
        self.query = nn.Linear(c.hidden, c.hidden)
        self.key = nn.Linear(c.hidden, c.hidden)
        self.value = nn.Linear(c.hidden, c.hidden)
        self.dropout = nn.Dropout(c.dropout)

    def split(self, x):
        b, l, _ = x.shape
        return x.view(b, l, self.heads, self.size).transpose(1, 2)

    def forward(self, x, additive_mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), \
            self.split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.size) + additive_mask
        probs = self.dropout(torch.softmax(scores, dim=-1))
        out = (probs @ v).transpose(1, 2)
        return out.reshape(x.shape)


class DenseDropoutNorm(nn.Module):  # HF's BertSelfOutput / BertOutput
    def __init__(self, c, inputs):
        super().__init__()
        self.dense = nn.Linear(inputs, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        setattr(self, "self", SelfAttention(c))  # HF's name: attention.self
        self.output = DenseDropoutNorm(c, c.hidden)

    def forward(self, x, additive_mask):
        return self.output(getattr(self, "self")(x, additive_mask), x)


class Intermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden, c.intermediate)

    def forward(self, x):
        return F.gelu(self.dense(x))  # exact erf GELU, as BERT and lockstep


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = Attention(c)
        self.intermediate = Intermediate(c)
        self.output = DenseDropoutNorm(c, c.intermediate)

    def forward(self, x, additive_mask):
        a = self.attention(x, additive_mask)
        return self.output(self.intermediate(a), a)


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([Layer(c) for _ in range(c.layers)])

    def forward(self, x, additive_mask):
        for layer in self.layer:
            x = layer(x, additive_mask)
        return x


class Bert(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = Embeddings(c)
        self.encoder = Encoder(c)

    def forward(self, ids, segments, padding_mask):
        # 0 for tokens, a large negative for padding (HF: finfo.min).
        additive = (1.0 - padding_mask[:, None, None, :]) * \
            torch.finfo(torch.float32).min
        return self.encoder(self.embeddings(ids, segments), additive)


class Transform(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.eps)

    def forward(self, x):
        return self.LayerNorm(F.gelu(self.dense(x)))


class Predictions(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transform = Transform(c)
        self.bias = nn.Parameter(torch.zeros(c.vocab))


class Head(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.predictions = Predictions(c)


class BertForMaskedLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.bert = Bert(c)
        self.cls = Head(c)
        self.reset_parameters()

    def reset_parameters(self):
        std = self.config.std
        for name, p in self.named_parameters():
            if "LayerNorm.weight" in name:
                nn.init.ones_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
            else:
                nn.init.trunc_normal_(p, std=std, a=-2 * std, b=2 * std)

    def forward(self, ids, segments, padding_mask, positions):
        """Logits [B, P, V] at `positions` ([B, P], -1 for an unused slot)."""
        h = self.bert(ids, segments, padding_mask)
        used = (positions >= 0).unsqueeze(-1).to(h.dtype)
        index = positions.clamp(min=0).unsqueeze(-1).expand(-1, -1, h.shape[-1])
        gathered = torch.gather(h, 1, index) * used
        p = self.cls.predictions
        word = self.bert.embeddings.word_embeddings.weight
        return F.linear(p.transform(gathered), word, p.bias)
