#!/usr/bin/env python3
"""The largest batch per network x card size (issue 5), from `cnnbench --max_batch` runs.

    python3 tools/max_batch_table.py RUN.jsonl|RUN.json [...] [--article] [--out-md FILE]

Each RUN is one `cnnbench --max_batch --memory_limit=L` run: its Google Benchmark JSON (a cut-off
file is read as far as it goes) or, better, its results lines (RUN.jsonl), which also hold every
batch the searches tried as it ended. Its context's memory_limit / memory_limit_mib say which card
size it stands for ("none": the whole device). Its rows named
"<network>/<precision>/<mode>/max_batch" carry largest_batch, first_failed and capped. One table
row per (network, mode, precision), one column per limit, ordered by limit; runs at the same
limit are merged, so a search cut off in one run can be finished by another. A cell is the
largest batch that fitted where the next batch is known to fail (from any run at that limit);
">= N" where the search's cap N fitted and nothing above it was seen to fail; "error" where the
search stopped on an error (its message is listed under the table); "-" where no run has it. A
search that was cut off before its row (the run killed by a time limit) is shown from its
attempts as ">= L (cut off, < F)": L the largest batch that fitted, F the smallest that failed,
if any. A batch that failed below one that fitted is shown as "L ?" and listed under the table.

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
    """(limit_mib or None, label, {(network, mode, precision, size): evidence}).

    A search's evidence: the batches that fitted and that ran out of memory ("fits", "fails"),
    from its attempt lines; its row if it finished ("row": largest, first_failed, capped); its
    error message if it stopped on one ("error")."""
    doc = cp.read_benchmark_json(path)
    ctx = doc.get("context", {})
    label = str(ctx.get("memory_limit", "none"))
    try:
        limit = int(ctx.get("memory_limit_mib", 0)) or None
    except (TypeError, ValueError):
        limit = None
    found = {}

    def evidence(key):
        return found.setdefault(key, {"fits": [], "fails": [], "rows": [], "errors": []})

    for e in doc.get("benchmarks", []):
        parsed = parse_row_name(e.get("run_name") or e.get("name", ""))
        if parsed is None:
            continue
        net, prec, mode, extra = parsed
        ev = evidence((net, mode, prec, extra.get("size", "")))
        if e.get("error_occurred"):
            ev["errors"].append(str(e.get("error_message", "error")))
            continue
        ev["rows"].append((int(e.get("largest_batch", 0)), int(e.get("first_failed", 0) or 0),
                           bool(e.get("capped"))))
    for a in doc.get("max_batch_attempts", []):
        parsed = parse_row_name(str(a.get("search", "")))
        if parsed is None:
            continue
        net, prec, mode, extra = parsed
        ev = evidence((net, mode, prec, extra.get("size", "")))
        if a.get("fit") == "fits":
            ev["fits"].append(int(a["batch"]))
        elif a.get("fit") == "out of memory":
            ev["fails"].append(int(a["batch"]))
    return limit, label, found


def merge(evidences):
    """One search's evidence from several runs at the same limit (a search cut off in one run and
    finished or capped in another)."""
    out = {"fits": [], "fails": [], "rows": [], "errors": []}
    for ev in evidences:
        for k in out:
            out[k] += ev[k]
    return out


def cell(ev):
    """(cell text, note or None). Exact where the largest batch that fitted is one below the
    smallest that failed, whichever runs showed them; a finished search's row stands where no
    other run says more; a capped search is ">= N"; a search cut off shows its bracket."""
    lo_all = ev["fits"] + [r[0] for r in ev["rows"]]
    if not lo_all:
        if ev["errors"]:
            return "error", None
        hi = min(ev["fails"]) if ev["fails"] else None
        return (f"none (< {hi})" if hi else "-"), None
    lo = max(lo_all)
    his = ev["fails"] + [r[1] for r in ev["rows"] if not r[2] and r[1] > 0]
    hi = min(his) if his else None
    if hi is not None and hi <= lo:
        return f"{lo} ?", f"batch {hi} ran out of memory below {lo}, which fitted"
    if hi == lo + 1:
        return str(lo), None
    finished = [r for r in ev["rows"] if not r[2]]
    if finished:
        return str(max(r[0] for r in finished)), None
    if any(r[2] for r in ev["rows"]):
        return f">= {lo}", None
    return f">= {lo} (cut off" + (f", < {hi})" if hi else ")"), None


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
    # One column per limit (runs at the same limit merged); the whole device (no limit) last.
    columns = {}
    for limit, label, found in runs:
        col = columns.setdefault(limit, {"label": label, "found": []})
        col["found"].append(found)
    order = sorted(columns, key=lambda lim: (lim is None, lim or 0))
    keys = sorted({k for lim in order for found in columns[lim]["found"] for k in found})
    head = ["network", "mode", "precision", "input"] + [
        columns[lim]["label"] if lim else "whole device" for lim in order]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 4 + "---:|" * len(order)]
    notes = []
    for key in keys:
        net, mode, prec, size = key
        row = [net, mode, prec, size or "default"]
        for lim in order:
            evs = [found[key] for found in columns[lim]["found"] if key in found]
            if not evs:
                row.append("-")
                continue
            ev = merge(evs)
            text, note = cell(ev)
            row.append(text)
            where = columns[lim]["label"] if lim else "the whole device"
            for msg in ev["errors"]:
                notes.append(f"- {net} {mode} {prec} at {where}: {msg}")
            if note:
                notes.append(f"- {net} {mode} {prec} at {where}: {note}")
        lines.append("| " + " | ".join(row) + " |")
        if args.article and net.startswith("efficientnet") and mode == "train" and size == "64":
            art = ["article (EfficientNet, tiny-imagenet)", "train", "its framework's", "64"]
            for lim in order:
                gib = round(lim / 1024) if lim else None
                art.append(str(ARTICLE_EFFICIENTNET_TINY[gib])
                           if gib in ARTICLE_EFFICIENTNET_TINY else "-")
            lines.append("| " + " | ".join(art) + " |")
    if notes:
        lines.append("")
        lines += notes
    text = "\n".join(lines) + "\n"
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
