"""Rewrites a torch 2.x TorchScript archive so that libtorch 1.13 loads it:

    rewrite_sdpa.py IN.pt OUT.pt

torch 2.x's nn.MultiheadAttention (so nn.TransformerEncoderLayer,
nn.Transformer) calls aten::scaled_dot_product_attention, an op libtorch
1.13 does not have: jit::load fails with "Unknown builtin op:
aten::scaled_dot_product_attention". This calls a TorchScript function
instead (added as code/__torch__/fsdp_compat.py), PyTorch's math reference
of the op: softmax(q k^T * scale + mask) (dropout) v, where the mask is
the causal mask (is_causal), -inf where a boolean attn_mask is False, or
a float attn_mask added. enable_gqa=True is refused. The rewritten files'
.debug_pkl (source ranges of the original text) are left out; every other
record is copied unchanged.

An experiment, not the fix: it shows that with the op decomposed the
archive imports and trains at parity (docs/torch2-archives.md); fsdp-opt
itself should do the equivalent (see that file).
"""

import sys
import zipfile

CALL = "torch.scaled_dot_product_attention("
REPLACEMENT = "__torch__.fsdp_compat.scaled_dot_product_attention("
COMPAT = '''def scaled_dot_product_attention(query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor]=None,
    dropout_p: float=0.,
    is_causal: bool=False,
    scale: Optional[float]=None,
    enable_gqa: bool=False) -> Tensor:
  if enable_gqa:
    ops.prim.RaiseException("scaled_dot_product_attention: enable_gqa=True is not supported")
  else:
    pass
  if torch.__is__(scale, None):
    s = torch.div(1., torch.sqrt(torch.size(query, -1)))
  else:
    s = unchecked_cast(float, scale)
  attn = torch.mul(torch.matmul(query, torch.transpose(key, -2, -1)), s)
  if is_causal:
    keep = torch.tril(torch.ones([torch.size(query, -2), torch.size(key, -2)], dtype=11, layout=None, device=ops.prim.device(query), pin_memory=None))
    attn0 = torch.masked_fill(attn, torch.logical_not(keep), float("-inf"))
  else:
    attn0 = attn
  if torch.__isnot__(attn_mask, None):
    mask = unchecked_cast(Tensor, attn_mask)
    if torch.eq(ops.prim.dtype(mask), 11):
      attn1 = torch.masked_fill(attn0, torch.logical_not(mask), float("-inf"))
    else:
      attn1 = torch.add(attn0, mask)
  else:
    attn1 = attn0
  weights = torch.dropout(torch.softmax(attn1, -1), dropout_p, True)
  return torch.matmul(weights, value)
'''


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with zipfile.ZipFile(src) as zin:
        infos = zin.infolist()
        top = infos[0].filename.split("/", 1)[0]
        changed = set()
        records = []
        for info in infos:
            data = zin.read(info)
            if "/code/" in info.filename and info.filename.endswith(".py"):
                text = data.decode("utf-8")
                if CALL in text:
                    data = text.replace(CALL, REPLACEMENT).encode("utf-8")
                    changed.add(info.filename)
            records.append((info, data))
    with zipfile.ZipFile(dst, "w") as zout:
        for info, data in records:
            if info.filename.endswith(".debug_pkl") and info.filename[:-len(".debug_pkl")] in changed:
                continue
            zout.writestr(info, data)
        if changed:
            zout.writestr(f"{top}/code/__torch__/fsdp_compat.py", COMPAT)
    print(f"{dst}: {len(changed)} code files call the decomposition")


if __name__ == "__main__":
    main()
