#!/usr/bin/env python3
"""Markdown table of data-parallel training scaling: cnnbench_dp's runs beside the seed's
multi-GPU rows (issue 11).

Ours: one or more JSON files written by `cnnbench_launch --nproc=G -- cnnbench_dp ... --json=F`
(one per world size, or several networks per file). Each file holds "context" (world_size, the
GPU's name, NCCL's version, ...) and "results": rows with network, precision, batch_per_gpu,
world_size, global_img_per_s, per_gpu_img_per_s, one_gpu_img_per_s (the same step with no
all-reduce, on the same GPU, in the same run), scaling_efficiency (per-GPU over one GPU alone),
exposed_comm_ms (the data-parallel step minus the step alone) and hidden_comm_fraction.

The seed (results/reference/mxnet_training_seed.csv: MXNet's train_imagenet.py on LeaderGPU's
4x GTX 1080, 4x GTX 1080 Ti and 2x Tesla P100) gives images/s for a global batch B on G GPUs (the
batch split across them: "too many slices" where B < G). Its scaling efficiency is computed here
as img/s(G GPUs, B) / (G x img/s(1 GPU, B / G)): the same definition as ours, per-GPU throughput
over one GPU's at the same batch per GPU. AlexNet's batch column is read at 8 times its value, as
the seed's note says; rows without a figure are left out, as are those whose one-GPU row at B / G
is missing.

Usage: scaling_table.py [--seed CSV] [--out FILE] RUN.json [RUN.json ...]
With no RUN files, the seed's table alone. Stdlib only; importable. Exit 2 on an unreadable input.
"""
import argparse
import csv
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SEED = os.path.join(ROOT, "results", "reference", "mxnet_training_seed.csv")


# Efficiency above 1 means G GPUs did more than G times one GPU's work: the figure is suspect
# (the seed's GTX 1080 AlexNet row at batch 16 x 8 reads 13,341.5 img/s between 723 and 1,839).
SUSPECT = " (above 1: the seed's figure is suspect)"


class InputError(Exception):
    pass


def read_seed(path):
    """{(source, gpu, network, gpus, batch): img/s} for rows with a figure, batch as images."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}")
    out = {}
    for line, r in enumerate(rows, start=2):
        try:
            if not r["images_per_sec"]:
                continue
            batch = int(r["batch"]) * (8 if "8*batch" in (r.get("note") or "") else 1)
            out[(r["source"], r["gpu"], r["network"], int(r["gpus"]), batch)] = float(
                r["images_per_sec"])
        except (KeyError, ValueError) as e:
            raise InputError(f"{path}:{line}: bad row ({e})")
    return out


def seed_scaling(seed):
    """Rows {source, gpu, network, gpus, batch, batch_per_gpu, img_s, one_gpu_img_s,
    efficiency} for every multi-GPU seed row whose one-GPU row at batch / gpus exists."""
    rows = []
    for (source, gpu, net, gpus, batch), ips in sorted(seed.items()):
        if gpus < 2 or batch % gpus:
            continue
        per = batch // gpus
        one = seed.get((source, gpu, net, 1, per))
        if not one:
            continue
        rows.append({"source": source, "gpu": gpu, "network": net, "gpus": gpus, "batch": batch,
                     "batch_per_gpu": per, "img_s": ips, "one_gpu_img_s": one,
                     "efficiency": ips / (gpus * one)})
    return rows


def read_runs(paths):
    """Our rows, each with the run's GPU name and NCCL version added."""
    rows = []
    for p in paths:
        try:
            with open(p) as f:
                doc = json.load(f)
        except OSError as e:
            raise InputError(f"{p}: {e.strerror}")
        except json.JSONDecodeError as e:
            raise InputError(f"{p}: not JSON ({e})")
        if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
            raise InputError(f"{p}: no 'results' list (not a cnnbench_dp file)")
        ctx = doc.get("context") or {}
        for r in doc["results"]:
            missing = [k for k in ("network", "precision", "batch_per_gpu", "world_size",
                                   "global_img_per_s", "one_gpu_img_per_s", "scaling_efficiency")
                       if k not in r]
            if missing:
                raise InputError(f"{p}: a result lacks {', '.join(missing)}")
            row = dict(r)
            row["gpu"] = ctx.get("gpu_name") or ctx.get("gpu") or "?"
            row["nccl"] = ctx.get("nccl_loaded", "?")
            rows.append(row)
    rows.sort(key=lambda r: (r["network"], r["precision"], r["batch_per_gpu"], r["world_size"]))
    return rows


def fmt(v, digits=0):
    return "—" if v is None else f"{v:,.{digits}f}"


def table(ours, seed_rows):
    lines = []
    if ours:
        lines += ["| network | precision | GPU | batch per GPU | GPUs | img/s | per GPU | one GPU "
                  "alone | efficiency | exposed comm ms |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in ours:
            lines.append(
                f"| {r['network']} | {r['precision']} | {r['gpu']} | {r['batch_per_gpu']} | "
                f"{r['world_size']} | {fmt(r['global_img_per_s'])} | "
                f"{fmt(r.get('per_gpu_img_per_s'))} | {fmt(r['one_gpu_img_per_s'])} | "
                f"{fmt(r['scaling_efficiency'], 3)} | {fmt(r.get('exposed_comm_ms'), 2)} |")
        lines.append("")
    lines += ["Seed (MXNet train_imagenet.py, LeaderGPU; efficiency = img/s on G GPUs / (G x one "
              "GPU's img/s at the same batch per GPU)):", "",
              "| network | GPU | GPUs | global batch | batch per GPU | img/s | one GPU | "
              "efficiency |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in seed_rows:
        lines.append(f"| {r['network']} | {r['gpu']} | {r['gpus']} | {r['batch']} | "
                     f"{r['batch_per_gpu']} | {fmt(r['img_s'], 1)} | {fmt(r['one_gpu_img_s'], 1)} | "
                     f"{fmt(r['efficiency'], 3)}{SUSPECT if r['efficiency'] > 1.05 else ''} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", help="cnnbench_dp --json files")
    ap.add_argument("--seed", default=DEFAULT_SEED)
    ap.add_argument("--out", help="write the table here (default: stdout)")
    a = ap.parse_args(argv)
    try:
        text = table(read_runs(a.runs), seed_scaling(read_seed(a.seed)))
    except InputError as e:
        print(f"scaling_table.py: {e}", file=sys.stderr)
        return 2
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
