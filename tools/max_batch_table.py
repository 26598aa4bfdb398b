#!/usr/bin/env python3
"""The largest batch per network x card size (issue 5), from `cnnbench --max_batch` runs.

    python3 tools/max_batch_table.py RUN.jsonl|RUN.json [...] [--article] [--out-md FILE]

Each RUN is one `cnnbench --max_batch --memory_limit=L` run: its Google Benchmark JSON (a cut-off
file is read as far as it goes) or, better, its results lines (RUN.jsonl), which also hold every
batch the searches tried as it ended. Its context's memory_limit / memory_limit_mib say which card
size it stands for ("none": the whole device). Its rows named
"<network>/<precision>/<mode>/max_batch" carry largest_batch, first_failed and capped. One table
row per (network, mode, precision), one column per run, ordered by limit. A cell is the largest
batch that fitted; ">= N" where the search's cap N fitted; "error" where the search stopped on an
error (its message is listed under the table); "-" where the run has no such row. A search that
was cut off before its row (the run killed by a time limit) is shown from its attempts as
">= L (cut off, < F)": L the largest batch that fitted, F the smallest that failed, if any.

--article adds, for EfficientNet trained on tiny-imagenet (the rows of efficientnet_* in train mode
at 64 px), the largest batches the GPU-comparison article reports per card
(../shared/reference/paperspace_tasks_seed.yaml: 32 on its 8 GB cards, 64 on 16 GB, 128 on 24 to
40 GB, 256 on 48 GB), under the column of the same size.

Exit 0, or 2 on unreadable input.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402

# The article's "maximum batch before out of memory" for EfficientNet on tiny-imagenet, by card
# memory in GB (paperspace_tasks_seed.yaml, max_batch_efficientnet_tiny_imagenet and
# gpu_memory_gb): its cards of each size agree.
ARTICLE_EFFICIENTNET_TINY = {8: 32, 16: 64, 24: 128, 32: 128, 40: 128, 48: 256}


def parse_row_name(name):
    """'efficientnet_b0/fp16/train/max_batch/size:64/classes:200' ->
    ('efficientnet_b0', 'fp16', 'train', {'size': '64', 'classes': '200'}), else None."""
    parts = name.split("/")
    if len(parts) < 4 or parts[3] != "max_batch":
        return None
    extra = dict(p.split(":", 1) for p in parts[4:] if ":" in p)
    return parts[0], parts[1], parts[2], extra


def load_run(path):
    """(limit_mib or None, label, {(network, mode, precision, size): cell}, {key: error})."""
    doc = cp.read_benchmark_json(path)
    ctx = doc.get("context", {})
    label = str(ctx.get("memory_limit", "none"))
    try:
        limit = int(ctx.get("memory_limit_mib", 0)) or None
    except (TypeError, ValueError):
        limit = None
    cells, errors = {}, {}
    for e in doc.get("benchmarks", []):
        parsed = parse_row_name(e.get("run_name") or e.get("name", ""))
        if parsed is None:
            continue
        net, prec, mode, extra = parsed
        key = (net, mode, prec, extra.get("size", ""))
        if e.get("error_occurred"):
            cells[key] = "error"
            errors[key] = str(e.get("error_message", "error"))
            continue
        largest = int(e.get("largest_batch", 0))
        cells[key] = f">= {largest}" if e.get("capped") else str(largest)
    # Searches with attempts but no row: cut off; their bracket so far.
    brackets = {}
    for a in doc.get("max_batch_attempts", []):
        parsed = parse_row_name(str(a.get("search", "")))
        if parsed is None:
            continue
        net, prec, mode, extra = parsed
        key = (net, mode, prec, extra.get("size", ""))
        fits, fails = brackets.setdefault(key, ([], []))
        if a.get("fit") == "fits":
            fits.append(int(a["batch"]))
        elif a.get("fit") == "out of memory":
            fails.append(int(a["batch"]))
    for key, (fits, fails) in brackets.items():
        if key in cells:
            continue
        cell = f">= {max(fits) if fits else 0} (cut off"
        cells[key] = cell + (f", < {min(fails)})" if fails else ")")
    return limit, label, cells, errors


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--article", action="store_true")
    ap.add_argument("--out-md", default=None)
    args = ap.parse_args(argv)
    runs = []
    try:
        for path in args.runs:
            runs.append(load_run(path))
    except (OSError, ValueError) as e:
        print(f"max_batch_table: cannot read {e}", file=sys.stderr)
        return 2
    # Limits in order; the whole device (no limit) last.
    runs.sort(key=lambda r: (r[0] is None, r[0] or 0))
    keys = sorted({k for r in runs for k in r[2]})
    head = ["network", "mode", "precision", "input"] + [r[1] if r[0] else "whole device"
                                                        for r in runs]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 4 + "---:|" * len(runs)]
    for key in keys:
        net, mode, prec, size = key
        row = [net, mode, prec, size or "default"]
        row += [r[2].get(key, "-") for r in runs]
        lines.append("| " + " | ".join(row) + " |")
        if args.article and net.startswith("efficientnet") and mode == "train" and size == "64":
            art = ["article (EfficientNet, tiny-imagenet)", "train", "its framework's", "64"]
            for r in runs:
                gib = round(r[0] / 1024) if r[0] else None
                art.append(str(ARTICLE_EFFICIENTNET_TINY[gib])
                           if gib in ARTICLE_EFFICIENTNET_TINY else "-")
            lines.append("| " + " | ".join(art) + " |")
    errs = [(k, m) for r in runs for k, m in r[3].items()]
    if errs:
        lines.append("")
        for (net, mode, prec, size), msg in errs:
            lines.append(f"- {net} {mode} {prec}: {msg}")
    text = "\n".join(lines) + "\n"
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
