"""Prepares a real corpus for the main job: the Python standard library's
own sources (on every machine with Python; no one here wrote them, no
download), as byte-level tokens (vocabulary 256, no tokenizer).

    prepare.py OUT_DIR [--stdlib DIR]

Every `.py` file under the standard library (sysconfig's `stdlib` path;
site-packages and dist-packages left out), in sorted order, is one
document; documents are joined by a NUL byte. A document goes to the
validation split when the CRC-32 of its path relative to the library is
0 modulo 20 (about 5%, the same files on every machine with the same
Python), else to training. Writes OUT_DIR/train.bin and OUT_DIR/val.bin
(uint16 token ids, nanoGPT's format) and OUT_DIR/corpus.json: the token
counts and the unigram baseline, the cross-entropy (nats per token) of
the validation bytes under the training bytes' frequencies, which is what
a model that learned nothing but byte frequencies reaches.
"""

import argparse
import json
import math
import os
import sysconfig
import zlib

import numpy as np


def documents(root):
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs
                         if d not in ("site-packages", "dist-packages", "__pycache__"))
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, root), path


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--stdlib", default=sysconfig.get_paths()["stdlib"])
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    parts = {"train": [], "val": []}
    files = {"train": 0, "val": 0}
    for rel, path in documents(args.stdlib):
        with open(path, "rb") as f:
            data = f.read()
        split = "val" if zlib.crc32(rel.encode()) % 20 == 0 else "train"
        parts[split].append(np.frombuffer(data + b"\0", dtype=np.uint8))
        files[split] += 1
    if not parts["train"] or not parts["val"]:
        raise SystemExit(f"prepare.py: no Python sources under {args.stdlib}")
    counts = {}
    for split, chunks in parts.items():
        tokens = np.concatenate(chunks).astype(np.uint16)
        tokens.tofile(os.path.join(args.out, f"{split}.bin"))
        counts[split] = np.bincount(tokens, minlength=256).astype(np.float64)
    # Laplace-smoothed training frequencies: a byte unseen in training costs
    # a finite amount.
    train_p = (counts["train"] + 1) / (counts["train"].sum() + 256)
    val = counts["val"]
    baseline = float(-(val * np.log(train_p)).sum() / val.sum())
    info = {"stdlib": args.stdlib,
            "files": files,
            "tokens": {k: int(v.sum()) for k, v in counts.items()},
            "vocab": 256,
            "unigram_baseline_nats": baseline,
            "unigram_baseline_bits": baseline / math.log(2)}
    with open(os.path.join(args.out, "corpus.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"corpus: {files['train']} + {files['val']} Python files of {args.stdlib}: "
          f"{info['tokens']['train']:,} training and {info['tokens']['val']:,} validation "
          f"byte tokens; unigram baseline {baseline:.3f} nats/token")


if __name__ == "__main__":
    main()
