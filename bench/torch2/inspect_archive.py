"""What a TorchScript archive holds, as JSON: inspect_archive.py ARCHIVE.pt [OUT.json]

The zip's records (names under the archive's top folder), the `version`,
`.data/version` and `byteorder` records, the extra files, the torch.X and
ops.NS.X calls the serialized code/ makes, and the ops of every method's
graph of every submodule, calls inlined (each op with the schema this torch
resolves it to). Runs with torch 1.13 and 2.x; the graph
is read only when this torch can load the archive (`load_error` says why
not).
"""

import json
import re
import sys
import zipfile

import torch


def records(path):
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        top = names[0].split("/", 1)[0]
        out = {}
        for n in names:
            rel = n.split("/", 1)[1] if "/" in n else n
            out[rel] = z.getinfo(n)
        text = {}
        for rel in ("version", ".data/version", "byteorder", ".data/serialization_id"):
            if rel in out:
                text[rel] = z.read(f"{top}/{rel}").decode("utf-8", "replace").strip()
        calls = set()
        for n in names:
            if "/code/" in n and n.endswith(".py"):
                src = z.read(n).decode("utf-8", "replace")
                calls.update(re.findall(r"\b(torch\.[A-Za-z_][A-Za-z_0-9.]*|ops\.[a-z_]+\.[A-Za-z_0-9]+)\(", src))
        return top, sorted(out), text, sorted(calls)


def walk(block):
    for n in block.nodes():
        yield n
        for b in n.blocks():
            yield from walk(b)


def main():
    path = sys.argv[1]
    top, names, text, calls = records(path)
    info = {
        "torch": torch.__version__,
        "archive": path,
        "top_folder": top,
        "records": [n for n in names if not n.startswith("data/")],
        "data_records": sum(1 for n in names if n.startswith("data/")),
        "text_records": text,
        # What the serialized source calls (torch.X is aten::X or prim::X).
        "code_calls": calls,
    }
    try:
        torch._C._set_graph_executor_optimize(False)
        m = torch.jit.load(path)
        graphs = []
        for _, sub in m.named_modules():
            for name in sub._c._method_names():
                g = sub._c._get_method(name).graph.copy()
                torch._C._jit_pass_inline(g)
                graphs.append(g)
        ops = {}
        for n in (n for g in graphs for n in walk(g)):
            kind = n.kind()
            try:
                schema = str(n.schema())
            except Exception:  # noqa: BLE001
                schema = ""
            if schema in ("", "(no schema)"):
                schema = ""
            ops.setdefault(kind, set()).add(schema)
        info["ops"] = {k: sorted(v) for k, v in sorted(ops.items())}
    except Exception as e:  # noqa: BLE001
        info["load_error"] = f"{type(e).__name__}: {e}"
    text_out = json.dumps(info, indent=1)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            f.write(text_out)
    else:
        print(text_out)


if __name__ == "__main__":
    main()
