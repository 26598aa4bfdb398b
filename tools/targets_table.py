#!/usr/bin/env python3
"""Issue 9's targets against one device call's measurements: cnnbench's figure for each target,
the PyTorch peer measured in the same call, and whether the target is met.

  python3 tools/targets_table.py --cnnbench RUN.json [--cnnbench RUN2.json ...] [--pytorch PT.json]
                                 [--pytorch-train PTT.json] [--out-md FILE] [--check]

RUN.json: cnnbench's --benchmark_out from configs/issue9_targets.yaml (a cut-off file, or its
results lines RUN.jsonl, is read too: tools/compare_pytorch.py's reader). Several RUN files (a sweep cut off, then the rest of it
on the same warm machine) are read in order, a later one filling only the targets the earlier
ones lack a figure for; they must come from one card (the same GPU UUID, or name where a context
has no UUID), else exit 2. PT.json:
tools/pytorch_baseline.py --modes graph (the inference peer is PyTorch's CUDA-graph replay).
PTT.json: tools/pytorch_train_baseline.py --modes eager --precision fp16 (the training peer is
PyTorch's eager AMP step, as the issue's 5,940 and 4,557 are).

A target counts as met only with its same-call peer beside it and cnnbench ahead of that peer:
the issue asks for both figures from one call on one card. Verdicts: "met", "met, no peer" (our
figure reaches the target, but no same-call PyTorch figure stands beside it), "missed", "not run"
(no cnnbench figure: filtered out, failed or cut off). --check exits 1 unless every target is met.

The targets and the PyTorch figures the issue quotes (measured on this H200 kind in 2026-12-02's
reference files) are the issue's own text, kept here as its specification.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402  (the Google Benchmark and PyTorch JSON readers)

# (network, mode, batch, target img/s, the issue's PyTorch figure)
TARGETS = (
    ("resnet50", "graph", 1, 3000, 1098),
    ("resnet50", "graph", 32, 22000, 13488),
    ("resnet50", "graph", 256, 30000, 17271),
    ("efficientnet_b0", "graph", 256, 30000, 22749),
    ("inception_v3", "graph", 256, 12000, 7895),
    ("vgg16", "graph", 256, 12000, 8733),
    ("resnet50", "train", 256, 8000, 5940),
    ("efficientnet_b0", "train", 256, 7000, 4557),
)
PRECISION = "fp16"


def load_train_peer(path):
    """{(network, batch): Cell} of pytorch_train_baseline.py's eager fp16 rows."""
    with open(path) as f:
        doc = json.load(f)
    cells = {}
    for r in doc.get("rows", []):
        if r.get("mode") != "eager" or r.get("precision", PRECISION) != PRECISION:
            continue
        key = (r.get("model"), int(r.get("batch", 0)))
        if r.get("error"):
            cells[key] = cp.Cell(error=str(r["error"]))
        elif r.get("img_s"):
            cells[key] = cp.Cell(float(r["img_s"]))
    return cells


def build(ours, peer_infer, peer_train):
    """One row per target: the figures and the verdict."""
    rows = []
    for net, mode, batch, target, issue_pt in TARGETS:
        mine = ours.get((net, PRECISION, mode, batch))
        peer = (peer_train.get((net, batch)) if mode == "train"
                else peer_infer.get(("graph", batch), {}).get(net))
        ok_mine = mine is not None and mine.ok
        ok_peer = peer is not None and peer.ok
        if not ok_mine:
            verdict = "not run"
        elif mine.img_s < target or (ok_peer and mine.img_s <= peer.img_s):
            verdict = "missed"
        elif not ok_peer:
            verdict = "met, no peer"
        else:
            verdict = "met"
        rows.append({
            "network": net, "mode": mode, "batch": batch, "target": target,
            "issue_pytorch": issue_pt,
            "cnnbench": mine.img_s if ok_mine else None,
            "cnnbench_range": (mine.lo, mine.hi) if ok_mine else None,
            "cnnbench_error": mine.error if mine is not None and not ok_mine else None,
            "pytorch": peer.img_s if ok_peer else None,
            "ratio": mine.img_s / peer.img_s if ok_mine and ok_peer else None,
            "verdict": verdict})
    return rows


def fmt(v):
    return "-" if v is None else f"{v:,.0f}"


def load_runs(paths):
    """The cnnbench runs of `paths` as one: (context, {key: Cell}), the first run's context with
    "runs" (how many) and "truncated" where a run that left a target without a figure was cut
    off. A later run fills the keys the earlier ones lack an ok figure for, and replaces a figure
    from a cut-off run (whose last benchmark may lack repetitions). ValueError where the runs
    come from different cards (GPU UUIDs where both contexts have one, else names) or builds."""
    context, ours, from_cut, cut = {}, {}, set(), False
    for i, path in enumerate(paths):
        ctx, cells = cp.load_cnnbench(path)
        if i == 0:
            context = dict(ctx)
        else:
            a, b = context, ctx
            same_card = (a.get("gpu_uuid") == b.get("gpu_uuid") if a.get("gpu_uuid") and
                         b.get("gpu_uuid") else a.get("gpu_name") is not None and
                         a.get("gpu_name") == b.get("gpu_name"))
            if not same_card:
                card = b.get("gpu_uuid") or b.get("gpu_name") or "no GPU named"
                first = a.get("gpu_uuid") or a.get("gpu_name") or "no GPU named"
                raise ValueError(f"{path} is from another card ({card}) than {paths[0]} "
                                 f"({first}): the targets' figures must come from one card")
            if a.get("cnnbench_git") != b.get("cnnbench_git"):
                raise ValueError(f"{path} is from another build ({b.get('cnnbench_git')}) than "
                                 f"{paths[0]} ({a.get('cnnbench_git')})")
        truncated = bool(ctx.get("truncated"))
        for key, cell in cells.items():
            if key not in ours or not ours[key].ok or (key in from_cut and cell.ok):
                ours[key] = cell
                if truncated:
                    from_cut.add(key)
                else:
                    from_cut.discard(key)
        cut = cut or truncated
    context["runs"] = len(paths)
    context["truncated"] = cut and any(
        not (ours.get((net, PRECISION, mode, batch)) and ours[(net, PRECISION, mode, batch)].ok)
        for net, mode, batch, _, _ in TARGETS)
    context["cut_any"] = cut and len(paths) > 1
    return context, ours


def markdown(rows, context):
    gpu = context.get("gpu_name", "?")
    runs = context.get("runs", 1)
    out = [f"Issue 9's targets, fp16, on {gpu} (cuDNN {context.get('cudnn_version_loaded', '?')}, "
           f"cnnbench {context.get('cnnbench_git', '?')}"
           + (f"; {runs} runs on this one card" if runs > 1 else "")
           + "); the PyTorch peer from the same call "
           "(inference: CUDA-graph replay; training: eager AMP).", "",
           "| network | mode | batch | cnnbench img/s | target | PyTorch, same call | ratio "
           "| PyTorch in the issue | verdict |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        mine = fmt(r["cnnbench"])
        if r["cnnbench_range"] and None not in r["cnnbench_range"]:
            mine += f" ({r['cnnbench_range'][0]:,.0f}-{r['cnnbench_range'][1]:,.0f})"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        out.append(f"| {r['network']} | {r['mode']} | {r['batch']} | {mine} | {r['target']:,} | "
                   f"{fmt(r['pytorch'])} | {ratio} | {r['issue_pytorch']:,} | {r['verdict']} |")
    errors = [r for r in rows if r["cnnbench_error"]]
    for r in errors:
        out.append(f"\n{r['network']} {r['mode']} batch {r['batch']}: {r['cnnbench_error']}")
    met = sum(r["verdict"] == "met" for r in rows)
    out.append("")
    out.append(f"{met} of {len(rows)} targets met with their same-call peer.")
    if context.get("truncated"):
        out.append("The cnnbench run was cut off: what it finished is above.")
    elif context.get("cut_any"):
        out.append("A cnnbench run was cut off; a later run on the same card has the targets it "
                   "left.")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cnnbench", required=True, action="append",
                    help="cnnbench's --benchmark_out; repeat it for runs on the same card")
    ap.add_argument("--pytorch", help="tools/pytorch_baseline.py's JSON (graph mode)")
    ap.add_argument("--pytorch-train", help="tools/pytorch_train_baseline.py's JSON (eager fp16)")
    ap.add_argument("--out-md")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every target is met")
    args = ap.parse_args(argv)
    try:
        context, ours = load_runs(args.cnnbench)
        peer_infer = {}
        if args.pytorch:
            nets = sorted({t[0] for t in TARGETS if t[1] == "graph"})
            for net in nets:
                _, cells = cp.load_pytorch(args.pytorch, net, PRECISION)
                for (mode, batch), cell in cells.items():
                    peer_infer.setdefault((mode, batch), {})[net] = cell
        peer_train = load_train_peer(args.pytorch_train) if args.pytorch_train else {}
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"targets_table: {e}", file=sys.stderr)
        return 2
    rows = build(ours, peer_infer, peer_train)
    text = markdown(rows, context)
    print(text, end="")
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(text)
    if args.check and any(r["verdict"] != "met" for r in rows):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
