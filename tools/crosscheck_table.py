#!/usr/bin/env python3
"""A markdown table of cross-check results (tools/crosscheck_torchvision.py --out JSON files):
one row per network, one column per precision, each cell the relative L2 error of cnnbench's
logits against torchvision's on the same weights and input, marked where it exceeds its
threshold.

    python3 tools/crosscheck_table.py results/2026-12-03_h200/call1/crosscheck_*.json
"""
import argparse
import json
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out-md", default=None)
    args = ap.parse_args(argv)
    cells, precisions, order, meta = {}, [], [], {}
    for path in args.files:
        try:
            with open(path) as f:
                d = json.load(f)
        except (OSError, ValueError) as e:
            print(f"crosscheck_table: cannot read {path}: {e}", file=sys.stderr)
            return 2
        net, p = d.get("network"), d.get("precision")
        if net is None or p is None or "rel_l2" not in d:
            print(f"crosscheck_table: {path} is not a cross-check result", file=sys.stderr)
            return 2
        if p not in precisions:
            precisions.append(p)
        if net not in order:
            order.append(net)
        ok = d.get("finite", True) and d["rel_l2"] <= d.get("threshold", float("inf"))
        cells[net, p] = f"{d['rel_l2']:.2e}" + ("" if ok else " FAIL")
        meta[net] = d.get("batch")
    lines = ["| network | batch | " + " | ".join(f"{p} rel L2" for p in precisions) + " |",
             "|---|---:|" + "---:|" * len(precisions)]
    for net in order:
        lines.append(f"| {net} | {meta[net]} | " +
                     " | ".join(cells.get((net, p), "–") for p in precisions) + " |")
    text = "\n".join(lines) + "\n"
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    return 1 if any(c.endswith("FAIL") for c in cells.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
