"""A small GPT for the main job, as a user writes one (nanoGPT's shape):
byte tokens in, next-byte logits out.

    model.py OUT.pt2 [--eval OUT.eval.pt2] [--layers L] [--width D]
        [--heads H] [--seq-len T] [--batch B]

saves it, randomly initialised with seed 0, by torch.export in training
mode (python/fsdp_export.py records the input `idx`, one rank's batch
[B, T]); with dropout, `--eval` saves it in evaluation mode too, for
fsdp-opt's evaluation step.
"""

import argparse
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, width, heads, seq_len, dropout):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.drop = nn.Dropout(dropout)
        causal = torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool))
        self.register_buffer("causal", causal.view(1, 1, seq_len, seq_len), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        d = c // self.heads
        q, k, v = (z.view(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        att = att.masked_fill(~self.causal[:, :, :t, :t], float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = torch.matmul(att, v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, width, heads, seq_len, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads, seq_len, dropout)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class GPT(nn.Module):
    def __init__(self, vocab=256, width=128, heads=4, layers=4, seq_len=128, dropout=0.0):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.zeros(1, seq_len, width))
        self.blocks = nn.ModuleList(
            [Block(width, heads, seq_len, dropout) for _ in range(layers)])
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied, as GPT-2's
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)
        for block in self.blocks:  # GPT-2's residual scaling
            nn.init.normal_(block.out.weight, std=0.02 / math.sqrt(2 * layers))
            nn.init.normal_(block.attn.proj.weight, std=0.02 / math.sqrt(2 * layers))

    def forward(self, idx):
        x = self.tok(idx) + self.pos[:, :idx.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--eval", help="also save the model in evaluation mode here")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--dropout", type=float, default=0.0)
    args = p.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    import fsdp_export
    torch.manual_seed(0)
    model = GPT(width=args.width, heads=args.heads, layers=args.layers,
                seq_len=args.seq_len, dropout=args.dropout)
    idx = torch.zeros(args.batch, args.seq_len, dtype=torch.long)
    fsdp_export.save(model, args.out, {"idx": idx}, method="export", eval_path=args.eval)
    n = sum(p.numel() for p in model.parameters())
    print(f"model: GPT, {args.layers} blocks of width {args.width}, {n:,} parameters, "
          f"saved to {args.out}" + (f" (and {args.eval} in evaluation mode)" if args.eval else ""))


if __name__ == "__main__":
    main()
