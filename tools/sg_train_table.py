#!/usr/bin/env python3
"""Markdown table of StyleGAN3-T's training iteration: cnnbench_stylegan_train beside PyTorch
(issue 6).

Ours: `cnnbench_stylegan_train --batches=... --json=F` files ("settings" with the discriminator,
"rows" of batch, fits, ms, img_s, s_per_5kimg, trainer_mib, device_used_mib, phase_ms {Gmain,
Dmain, Dreg}, or an error). PyTorch's: `tools/stylegan3_train_reference.py bench --out F` files
("settings", "network", "rows" of batch, ms, img_s, s_per_5kimg, peak_mib, phase_ms {Gmain,
Dmain, Dreg, Gema}, or an error). Rows join on (precision, batch); a later file's row replaces an
earlier one's. Both time NVlabs' iteration: Gmain + Adam(G), Dmain + Adam(D), Dreg + Adam(D) on
every 16th iteration, the EMAs, on a fixed batch of reals (no data loading).

Columns: batch, precision, our ms per iteration and img/s, PyTorch's, ours over PyTorch's img/s,
our time for 5 kimg (the article's run), our memory (the trainer's allocations, and the whole
device's use) beside PyTorch's peak allocation, and where the time goes (Gmain / Dmain / Dreg ms,
ours then PyTorch's). Ours alone: "—" in PyTorch's cells. An error row shows its error.

Usage: sg_train_table.py --ours F [--ours F ...] [--pytorch F ...] [--out FILE]
Stdlib only; importable. Exit 2 on an unreadable input.
"""
import argparse
import json
import sys


class InputError(Exception):
    pass


def load(path, ours):
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON ({e})")
    settings = doc.get("settings") if isinstance(doc, dict) else None
    if not isinstance(settings, dict) or not isinstance(doc.get("rows"), list):
        raise InputError(f"{path}: no 'settings' and 'rows' (not a training benchmark file)")
    if ours != ("discriminator" in settings):
        want = "cnnbench_stylegan_train --json" if ours else "stylegan3_train_reference.py bench"
        raise InputError(f"{path}: not a {want} file")
    precision = settings.get("precision", "?")
    out = {}
    for i, r in enumerate(doc["rows"]):
        if not isinstance(r, dict) or not isinstance(r.get("batch"), int):
            raise InputError(f"{path}: row {i + 1} has no batch")
        ok = r.get("fits", True) and "error" not in r
        if ok and not all(isinstance(r.get(k), (int, float)) for k in ("ms", "img_s")):
            raise InputError(f"{path}: row {i + 1} lacks ms or img_s")
        out[(precision, r["batch"])] = r
    return out


def merge(paths, ours):
    rows = {}
    for p in paths:
        rows.update(load(p, ours))
    return rows


def fmt(v, digits=1):
    return "—" if v is None else f"{v:,.{digits}f}"


def phases(r):
    if not r or "phase_ms" not in r:
        return "—"
    p = r["phase_ms"]
    return " / ".join(fmt(p.get(k), 1) for k in ("Gmain", "Dmain", "Dreg"))


def table(ours, torch):
    lines = ["| batch | precision | ours ms / iter | ours img/s | PyTorch ms / iter | PyTorch img/s "
             "| ours / PyTorch | ours s per 5 kimg | ours MiB (trainer, device) | PyTorch peak "
             "MiB | Gmain / Dmain / Dreg ms, ours | PyTorch |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for key in sorted(set(ours) | set(torch), key=lambda k: (k[0], k[1])):
        prec, batch = key
        o, t = ours.get(key), torch.get(key)
        o_ok = o is not None and o.get("fits", True) and "error" not in o
        t_ok = t is not None and "error" not in t
        if o is not None and not o_ok:
            cells = [f"error: {str(o.get('error', 'did not fit'))[:60]}", "", ""]
        elif o_ok:
            cells = [fmt(o["ms"], 2), fmt(o["img_s"]), None]
        else:
            cells = ["—", "—", None]
        if t is not None and not t_ok:
            tc = [f"error: {str(t['error'])[:60]}", ""]
        elif t_ok:
            tc = [fmt(t["ms"], 2), fmt(t["img_s"])]
        else:
            tc = ["—", "—"]
        ratio = f"{o['img_s'] / t['img_s']:.2f}x" if o_ok and t_ok and t["img_s"] else "—"
        mem = (f"{fmt(o.get('trainer_mib'), 0)}, {fmt(o.get('device_used_mib'), 0)}" if o_ok
               else "—")
        lines.append(f"| {batch} | {prec} | {cells[0]} | {cells[1]} | {tc[0]} | {tc[1]} | {ratio} | "
                     f"{fmt(o.get('s_per_5kimg'), 0) if o_ok else '—'} | {mem} | "
                     f"{fmt(t.get('peak_mib'), 0) if t_ok else '—'} | "
                     f"{phases(o) if o_ok else '—'} | {phases(t) if t_ok else '—'} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ours", action="append", default=[], required=True)
    ap.add_argument("--pytorch", action="append", default=[])
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    try:
        text = table(merge(a.ours, True), merge(a.pytorch, False))
    except InputError as e:
        print(f"sg_train_table.py: {e}", file=sys.stderr)
        return 2
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
