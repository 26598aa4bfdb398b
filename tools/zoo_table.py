#!/usr/bin/env python3
"""One table of cnnbench's fp16 graph-replay images/s beside PyTorch's CUDA-graph replay for
several networks: rows network x batch, from pairs of files measured in the same device call.

    python3 tools/zoo_table.py --pair CALL1/zoo_vgg16.json CALL1/zoo_pytorch.json \\
        --pair CALL2/zoo_resnet152.json CALL2/zoo_pytorch.json ... [--out-md FILE]

Each --pair is one cnnbench Google Benchmark JSON and the tools/pytorch_baseline.py JSON of the
same call; every network the cnnbench file holds is read from it with the PyTorch rows of that
same file (so a ratio never mixes calls). A network in several pairs gets its batches merged, a
later pair's measurement replacing an earlier one's, but an error never replacing a measurement
and a row without PyTorch's figure never replacing one with it.
The last column names where each row was measured: the cnnbench file's folder (its last two
parts, e.g. call10/e) and, where the PyTorch file lies elsewhere (another call), that folder too,
so a ratio taken across calls shows as one. The ratio column is checked as in compare_pytorch.py --check (>= 1 at every batch, >= the
--batch1-ratio at batch 1); the status column says where it fails. Every network gets a row for
each of --batches (default 1,8,32,128,256), measured or not, so a gap shows as a failure. Only
networks torchvision does not define (NO_PEER: MXNet's inception_bn and alexnet_lrn) pass without
a PyTorch figure. Exit 0 when every row passes, 1 otherwise, 2 on unreadable input.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402

NO_PEER = {"inception_bn", "alexnet_lrn"}  # no torchvision model to time beside them


def folder(path):
    """The last two parts of the folder holding path: "call10/e"."""
    parts = os.path.normpath(os.path.dirname(os.path.abspath(path))).split(os.sep)
    return "/".join(p for p in parts[-2:] if p)


def measured_in(cb_path, pt_path):
    same = os.path.dirname(os.path.abspath(cb_path)) == os.path.dirname(os.path.abspath(pt_path))
    return folder(cb_path) if same else f"{folder(cb_path)}; PyTorch {folder(pt_path)}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", nargs=2, action="append", required=True,
                    metavar=("CNNBENCH_JSON", "PYTORCH_JSON"))
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--batch1-ratio", type=float, default=1.3)
    ap.add_argument("--batches", default="1,8,32,128,256",
                    help="batches every network must show (comma-separated)")
    ap.add_argument("--out-md", default=None)
    args = ap.parse_args(argv)
    try:
        expected = [int(b) for b in args.batches.split(",") if b.strip()]
    except ValueError:
        ap.error(f"--batches takes comma-separated integers, not {args.batches!r}")
    table = {}  # network -> batch -> (cb Cell, pt Cell)
    order = []
    for cb_path, pt_path in args.pair:
        try:
            _, cells = cp.load_cnnbench(cb_path)
            nets = sorted({k[0] for k in cells if k[1] == args.precision})
            for net in nets:
                _, pt = cp.load_pytorch(pt_path, net, args.precision)
                if net not in order:
                    order.append(net)
                rows = table.setdefault(net, {})
                where = measured_in(cb_path, pt_path)
                for (n, p, mode, b), c in cells.items():
                    if n != net or p != args.precision or mode != "graph":
                        continue
                    old = rows.get(b)
                    if old and old[0] is not None and old[0].ok and not c.ok:
                        continue
                    peer = pt.get(("graph", b))
                    complete = old and old[0] is not None and old[0].ok and old[1] is not None \
                        and old[1].ok
                    if complete and (peer is None or not peer.ok):
                        continue  # a full pair is not replaced by one without PyTorch's figure
                    rows[b] = (c, peer, where)
                for (mode, b), c in pt.items():  # PyTorch measured it, cnnbench did not
                    if mode == "graph" and b not in rows:
                        rows[b] = (None, c, "PyTorch " + folder(pt_path))
        except (OSError, ValueError, KeyError) as e:
            print(f"zoo_table: cannot read {cb_path} / {pt_path}: {e}", file=sys.stderr)
            return 2
    lines = ["| network | batch | cnnbench img/s | PyTorch graph img/s | ratio | status | measured in |",
             "|---|---:|---:|---:|---:|---|---|"]
    failed = False
    for net in order:
        for b in sorted(set(table[net]) | set(expected)):
            cb, pt, where = table[net].get(b, (None, None, ""))
            ratio = cb.img_s / pt.img_s if cb and pt and cb.ok and pt.ok else None
            need = args.batch1_ratio if b == 1 else 1.0
            measured = cb is not None and cb.ok
            if not measured and (cb is not None or net in NO_PEER or pt is not None):
                status = "FAIL: " + ("error" if cb else "not measured")
            elif not measured:
                status = "FAIL: not measured (nor PyTorch)"
            elif net in NO_PEER:
                status = "no PyTorch peer"
            elif pt is None or not pt.ok:
                status = "FAIL: PyTorch not measured"
            elif ratio < need:
                status = f"FAIL: below {need:g}x"
            else:
                status = "ok"
            failed |= status.startswith("FAIL")
            lines.append(f"| {net} | {b} | {cp.fmt_cell(cb, False)} | {cp.fmt_cell(pt, False)} | "
                         f"{f'{ratio:.2f}x' if ratio else '–'} | {status} | {where} |")
    text = "\n".join(lines) + "\n"
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
