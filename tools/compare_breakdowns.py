#!/usr/bin/env python3
"""Training-step breakdowns side by side: the A/B tables of issue 9's kernel changes.

    python3 tools/compare_breakdowns.py BASE.json NEW.json [MORE.json ...] [--by-stage]
        [--out-md FILE] [--allow-mismatch]

Each file is `cnnbench_train_step --breakdown=FILE`'s JSON (one step timed launch by launch; the
step's graph time, the sum by launch kind, and with it the roofline table per launch). The first
file is the baseline. The table has one row per launch kind ("backward batchnorm+relu"), with
each file's microseconds and the change against the baseline, ordered by the baseline's time, and
a last row for the whole step (the graph's time) with img/s. --by-stage adds a table per
roofline op and stage (the layer name's first part: conv1, bn1, layer1 .. layer4; "other" for
the rest): microseconds and GB/s per file, where the time per byte shows what moved. Files are
labelled by the shortest tails of their paths that tell them apart (call81/b/r50, call87/b/r50).

The header names each file's network, precision, batch, engine, the A/B switches it recorded
(cnnbench_env) and its flags (relu_masks, bn_mask_from_input, pad_channels). Files of different
networks, precisions or batches are refused (exit 2, naming both) unless --allow-mismatch;
unreadable input exits 2 with one line naming the file.
"""
import argparse
import json
import os
import sys

FLAGS = ("engine", "relu_masks", "bn_mask_from_input", "pad_channels")


class InputError(Exception):
    pass


def load(path):
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a readable breakdown JSON ({e})")
    for key in ("network", "precision", "batch", "step_us", "by_kind"):
        if key not in d:
            raise InputError(f"{path}: no '{key}' (is it cnnbench_train_step --breakdown's JSON?)")
    if not isinstance(d["by_kind"], dict):
        raise InputError(f"{path}: 'by_kind' is not an object")
    return d


def stage_of(name):
    """'backward batchnorm+relu layer3.0.bn2' -> 'layer3'; 'forward conv conv1' -> 'conv1'."""
    last = name.split()[-1] if name.split() else ""
    first = last.split(".")[0]
    if first.startswith("layer") or first in ("conv1", "bn1"):
        return first
    return "other"


def by_stage(d):
    out = {}
    for r in d.get("roofline", {}).get("layers", []):
        key = (r.get("op", "?"), stage_of(r.get("name", "")))
        acc = out.setdefault(key, [0.0, 0.0, 0])
        acc[0] += float(r.get("us", 0.0))
        acc[1] += float(r.get("bytes", 0.0))
        acc[2] += 1
    return out


def fmt_us(v):
    return "–" if v is None else f"{v:,.1f}"


def change(base, v):
    if base is None or v is None:
        return "–"
    if base == 0:
        return f"{v - base:+,.1f}"
    return f"{v - base:+,.1f} ({(v / base - 1) * 100:+.1f}%)"


def describe(label, d):
    env = d.get("cnnbench_env") or {}
    env_s = ", ".join(f"{k}={v}" for k, v in sorted(env.items())) or "none"
    flags = ", ".join(f"{k} {d[k]}" for k in FLAGS if k in d)
    step = float(d["step_us"])
    img_s = d["batch"] * 1e6 / step if step > 0 else 0.0
    # Where the run's own time went (cnnbench_train_step --breakdown since 046cb5a), if recorded.
    phases = d.get("phases_s") or {}
    run_s = ""
    if phases:
        run_s = "; the run " + ", ".join(f"{k.replace('_', ' ')} {float(v):.1f} s"
                                        for k, v in phases.items())
    return (f"- **{label}**: {d['network']} {d['precision']} batch {d['batch']}, {flags}; "
            f"switches: {env_s}; step {step:,.1f} us ({img_s:,.0f} img/s){run_s}")


def table(labels, docs, stages):
    base = docs[0]
    kinds = sorted(base["by_kind"], key=lambda k: -float(base["by_kind"][k].get("us", 0.0)))
    for d in docs[1:]:
        kinds += [k for k in d["by_kind"] if k not in kinds]
    head = "| launch kind | " + " | ".join(f"{lab} us" for lab in labels)
    head += "".join(f" | {lab} − {labels[0]}" for lab in labels[1:]) + " |"
    lines = [head, "|---|" + "---:|" * (len(labels) + len(labels) - 1)]

    def us(d, k):
        e = d["by_kind"].get(k)
        return None if e is None else float(e.get("us", 0.0))

    for k in kinds:
        vals = [us(d, k) for d in docs]
        row = f"| {k} | " + " | ".join(fmt_us(v) for v in vals)
        row += "".join(f" | {change(vals[0], v)}" for v in vals[1:]) + " |"
        lines.append(row)
    steps = [float(d["step_us"]) for d in docs]
    row = "| **step (graph)** | " + " | ".join(f"**{fmt_us(v)}**" for v in steps)
    row += "".join(f" | {change(steps[0], v)}" for v in steps[1:]) + " |"
    lines.append(row)
    if stages:
        st = [by_stage(d) for d in docs]
        keys = sorted(set().union(*[set(s) for s in st]))
        lines += ["", "| op | stage | " + " | ".join(f"{lab} us | {lab} GB/s" for lab in labels) + " |",
                  "|---|---|" + "---:|---:|" * len(labels)]
        for key in keys:
            cells = []
            for s in st:
                if key in s:
                    t, b, _ = s[key]
                    cells += [fmt_us(t), f"{b / t / 1e3:,.0f}" if t > 0 else "–"]
                else:
                    cells += ["–", "–"]
            lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    return lines


def short_labels(paths):
    """The shortest path tails, without the extension, that tell the files apart
    ('call81/b/r50' and 'call87/b/r50' from 'r50' twice); '#N' where the paths are the same."""
    parts = [os.path.normpath(os.path.splitext(p)[0]).split(os.sep) for p in paths]
    for k in range(1, max(len(q) for q in parts) + 1):
        labels = ["/".join(q[-k:]) for q in parts]
        if len(set(labels)) == len(labels):
            return labels
    return [f"{lab}#{i + 1}" for i, lab in enumerate(labels)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="breakdown JSONs, the baseline first")
    ap.add_argument("--by-stage", action="store_true", help="also per roofline op and stage")
    ap.add_argument("--out-md", help="write the tables here too")
    ap.add_argument("--allow-mismatch", action="store_true",
                    help="compare different networks, precisions or batches")
    a = ap.parse_args(argv)
    if len(a.files) < 2:
        print("compare_breakdowns: give at least two breakdown files (the baseline first)",
              file=sys.stderr)
        return 2
    try:
        docs = [load(p) for p in a.files]
    except InputError as e:
        print(f"compare_breakdowns: {e}", file=sys.stderr)
        return 2
    if not a.allow_mismatch:
        for p, d in zip(a.files[1:], docs[1:]):
            for key in ("network", "precision", "batch"):
                if d[key] != docs[0][key]:
                    print(f"compare_breakdowns: {p} is {key} {d[key]}, {a.files[0]} is "
                          f"{docs[0][key]} (--allow-mismatch to compare them anyway)",
                          file=sys.stderr)
                    return 2
    labels = short_labels(a.files)
    lines = [describe(lab, d) for lab, d in zip(labels, docs)] + [""]
    lines += table(labels, docs, a.by_stage)
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.out_md:
        with open(a.out_md, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
