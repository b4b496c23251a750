"""Training parity and exact memory on audio models outside the repository,
which carry complex values between real parameters (torch.stft/istft,
torchaudio's Spectrogram): torchaudio's HDemucs (source separation, an STFT
branch and a waveform branch), a spectrogram classifier (power spectrum,
complex spectrum as real pairs, mel), ConvTasNet and a tiny wav2vec2.

    .venv/bin/pip install --no-deps torchaudio==2.11.0   # once; not in CI
    .venv/bin/python bench/audio/heldout_parity.py [--models hdemucs,...]
        [--ranks 1,2] [--bin build/bin]

For each model and rank count: random-init weights (no downloads), exports
it traced (2 samples per rank), compiles the AdamW step (FULL_SHARD with
size-based wrapping above one rank), trains 3 steps with fsdp-run --nproc,
and compares the per-step loss and the final parameters and buffers with
eager PyTorch (test/fixtures/train_parity.py, 1e-5), and the predicted
memory with the measured (test/fixtures/memory_check.py: the peak, and
every instruction's, to the byte). Separation models train on MSE against
a random waveform, classifiers on cross-entropy. Prints a markdown table.
"""

import argparse
import json
import os
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "test", "fixtures"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

try:
    import torchaudio  # noqa: E402
except ImportError:
    sys.exit("heldout_parity.py needs torchaudio: .venv/bin/pip install --no-deps "
             "torchaudio==2.11.0")

import fsdp_export  # noqa: E402
import heldout  # noqa: E402
import train_parity  # noqa: E402
from fsdp_parity import check_memory  # noqa: E402


class Separation(nn.Module):
    """A separation model's sources stacked: [batch, sources, channels, time]."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)


class SpectrogramClassifier(nn.Module):
    """torchaudio's Spectrogram (power 2, or complex as real pairs) or
    MelSpectrogram, then two convolutions and a linear head."""

    def __init__(self, kind):
        super().__init__()
        if kind == "mel":
            self.spec = torchaudio.transforms.MelSpectrogram(sample_rate=16000, n_fft=64,
                                                             n_mels=16)
        else:
            self.spec = torchaudio.transforms.Spectrogram(
                n_fft=64, power=None if kind == "complex" else 2.0)
        self.complex = kind == "complex"
        self.conv = nn.Sequential(nn.Conv2d(2 if self.complex else 1, 8, 3, padding=1),
                                  nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2, padding=1),
                                  nn.ReLU())
        self.head = nn.Linear(8, 10)

    def forward(self, wav):
        s = self.spec(wav)
        if self.complex:
            s = torch.view_as_real(s).permute(0, 3, 1, 2)
        else:
            s = torch.log(s + 1e-6).unsqueeze(1)
        return self.head(self.conv(s).mean(dim=(2, 3)))


class Wav2Vec2Logits(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = torchaudio.models.wav2vec2_model(
            extractor_mode="group_norm",
            extractor_conv_layer_config=[(16, 10, 5), (16, 3, 2), (16, 2, 2)],
            extractor_conv_bias=False, encoder_embed_dim=32,
            encoder_projection_dropout=0.0, encoder_pos_conv_kernel=16,
            encoder_pos_conv_groups=4, encoder_num_layers=2, encoder_num_heads=2,
            encoder_attention_dropout=0.0, encoder_ff_interm_features=64,
            encoder_ff_interm_dropout=0.0, encoder_dropout=0.0,
            encoder_layer_norm_first=False, encoder_layer_drop=0.0, aux_num_out=10)

    def forward(self, x):
        return self.model(x)[0]


def hdemucs(**kw):
    settings = dict(channels=8, nfft=256, depth=3)
    settings.update(kw)
    return Separation(torchaudio.models.HDemucs(sources=["a", "b"], audio_channels=2,
                                                **settings))


# name -> (model, example inputs for a batch, loss)
MODELS = {
    "hdemucs": (hdemucs, lambda b: {"x": torch.randn(b, 2, 2048)}, "mse"),
    # GroupNorm before GELU and a permute in the frequency layers: the
    # backward's incoming gradient is strided.
    "hdemucs_norm": (lambda: hdemucs(norm_starts=1), lambda b: {"x": torch.randn(b, 2, 2048)},
                     "mse"),
    # The default depth and FFT size: the deepest layers' BiLSTM and local
    # attention (einsum, then an in-place division of its result).
    "hdemucs_deep": (lambda: hdemucs(channels=4, nfft=4096, depth=6, dconv_comp=4),
                     lambda b: {"x": torch.randn(b, 2, 8192)}, "mse"),
    "spectrogram": (lambda: SpectrogramClassifier("power"),
                    lambda b: {"wav": torch.randn(b, 1600)}, "cross_entropy"),
    "spectrogram_complex": (lambda: SpectrogramClassifier("complex"),
                            lambda b: {"wav": torch.randn(b, 1600)}, "cross_entropy"),
    "melspectrogram": (lambda: SpectrogramClassifier("mel"),
                       lambda b: {"wav": torch.randn(b, 1600)}, "cross_entropy"),
    "convtasnet": (lambda: Separation(torchaudio.models.ConvTasNet(
        num_sources=2, enc_kernel_size=16, enc_num_feats=32, msk_kernel_size=3,
        msk_num_feats=16, msk_num_hidden_feats=32, msk_num_layers=2, msk_num_stacks=1)),
                   lambda b: {"x": torch.randn(b, 1, 2048)}, "mse"),
    "wav2vec2": (Wav2Vec2Logits, lambda b: {"x": torch.randn(b, 1600)}, "cross_entropy"),
}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = p.parse_args()
    steps, batch = 3, 2
    print("| model | ranks | parity (3 steps, AdamW, 1e-5) | predicted peak = measured "
          "| autograd_backward instructions |")
    print("|---|---:|---|---|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            make, inputs_for, loss = MODELS[name]
            d = os.path.join(tmp, name)
            os.makedirs(d)
            torch.manual_seed(0)
            model = make().train()
            inputs = inputs_for(batch)
            with torch.no_grad():
                out = model(*inputs.values())
            if loss == "mse":
                target = torch.zeros(out.shape)
            else:
                target = torch.zeros(out.shape[:-1], dtype=torch.long)
            fsdp_export.save(model, os.path.join(d, "m.pt"), inputs,
                             targets={"target": target})
            gen = torch.Generator().manual_seed(1)
            ranks = [int(r) for r in args.ranks.split(",")]
            most = max(ranks)
            full = {n: torch.randn(steps, most * batch, *t.shape[1:], generator=gen)
                    for n, t in inputs.items()}
            full["target"] = (
                torch.randn(steps, most * batch, *target.shape[1:], generator=gen)
                if loss == "mse" else
                torch.randint(0, out.shape[-1], (steps, most * batch, *target.shape[1:]),
                              generator=gen))
            for w in ranks:
                data = os.path.join(d, f"d{w}.pt")
                torch.save({n: t[:, : w * batch] for n, t in full.items()}, data)
                plan = os.path.join(d, f"p{w}.plan")
                predicted = os.path.join(d, f"p{w}.memory.json")
                compile_cmd = [os.path.join(args.bin, "fsdp-opt"), os.path.join(d, "m.pt"),
                               "--loss", loss, "--optimizer", "adamw", "--lr", "0.001",
                               "--emit", "plan", "-o", plan,
                               "--memory-report-json", predicted]
                if w > 1:
                    compile_cmd += ["--world-size", str(w), "--sharding", "FULL_SHARD",
                                    "--auto-wrap", "size", "--min-num-params", "2000"]
                metrics, final = os.path.join(d, f"m{w}.jsonl"), os.path.join(d, f"f{w}.pt")
                timeline = os.path.join(d, f"t{w}.json")
                run_cmd = [os.path.join(args.bin, "fsdp-run"), plan, "--model",
                           os.path.join(d, "m.pt"), "--data", data, "--nproc", str(w),
                           "--threads", "1", "--metrics", metrics, "--save", final,
                           "--memory-timeline", timeline]
                failed = heldout.run_commands([compile_cmd, run_cmd])
                if failed:
                    print(f"| {name} | {w} | {failed} | | |", flush=True)
                    continue
                n_autograd = heldout.autograd_instructions(plan)
                ref_args = heldout.adamw_reference(steps, loss)
                losses, module, expected = train_parity.reference(
                    ref_args, os.path.join(d, "m.pt"), data, w)
                bad, compared = train_parity.compare(name, losses, module, metrics, final,
                                                     expected)
                verdict = ("MISMATCH: " + "; ".join(bad[:3])) if bad else \
                    f"{len(losses)} losses and {compared} tensors match"
                memory_bad = check_memory(plan, predicted, timeline, metrics)
                with open(predicted) as f:
                    peak = json.load(f)["peak_bytes"]
                memory = ("MISMATCH: " + "; ".join(memory_bad[:2])) if memory_bad else \
                    f"{peak:,} bytes"
                print(f"| {name} | {w} | {verdict} | {memory} | {n_autograd} |", flush=True)


if __name__ == "__main__":
    main()
