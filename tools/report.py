#!/usr/bin/env python3
"""The GPU-choice report (issue 7): from cnnbench result JSON files (one per GPU, as a fleet of
hosts would produce them) and the seeds' CSVs, the decisions the seed articles make.

    python3 tools/report.py RESULT.json [RESULT.json ...] --out-dir results/<run>/report

Writes report.md and a self-contained report.html (PNG plots inlined) in --out-dir, the plots also
as PNG files. Tables:
  - images/s by network x batch, per GPU (ours: --precision, graph replay; the seed's MXNet rows);
  - time and cost of 1,000,000 images at --batch (32, as the seed), per network and GPU;
  - time to solution and single-run cost of the article's tasks where a run measured them: an
    epoch of training (train rows' epoch_s), N video frames of YOLOR at 1280 to final boxes
    (cnnbench's `video` rows), 5 kimg of StyleGAN3-T training (cnnbench_stylegan_train --json
    files, told apart from Google Benchmark's by their "settings" and "rows");
  - the largest batch per network from max-batch rows, and cost per batch item;
  - training on several GPUs, from cnnbench_dp --json files among the inputs, beside the seed's
    multi-GPU rows (tools/scaling_table.py's table);
  - recommendations per metric: fastest, best cost per million, cheapest per hour, largest batch,
    best largest batch per unit of currency; ties listed together.
Prices come from configs/prices.yaml (--prices), joined by GPU name; a GPU without a price gets
a note, never a made-up cost. Costs are never converted between currencies: a recommendation by
cost compares GPUs priced in one currency (the most common among the candidates) and says so.

Plots need matplotlib (Debian: python3-matplotlib); without it the report says they were skipped.
"""
import argparse
import base64
import csv
import html
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402  (the Google Benchmark JSON reader)
import scaling_table  # noqa: E402  (cnnbench_dp's files beside the seed's multi-GPU rows)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = os.path.join(os.path.dirname(ROOT), "shared", "reference")
DEFAULT_PRICES = os.path.join(ROOT, "configs", "prices.yaml")
DEFAULT_SEED = os.path.join(REF, "mxnet_inference_seed.csv")
DEFAULT_COST_SEED = os.path.join(REF, "mxnet_cost_per_million_seed.csv")
SUPPORTED_SCHEMA_MAJOR = 0  # cnnbench_version 0.x
IMAGES = 1_000_000
# The seed's alexnet is MXNet's symbols/alexnet.py, our alexnet_lrn; every other name is ours.
SEED_TO_OURS = {"alexnet": "alexnet_lrn"}
# The seed's GPU names as prices.yaml and the cost CSV spell them.
SEED_GPU_ALIASES = {"Tesla K80 (one GPU of the board)": "Tesla K80"}


class InputError(Exception):
    """An input that cannot be used; main() reports it and exits 2."""


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------
def load_prices(path):
    """{gpu: {"provider", "currency", "per_hour", "source"}} (the first entry of a GPU wins)."""
    try:
        import yaml
    except ImportError as e:
        raise InputError("reading prices needs PyYAML (Debian: python3-yaml)") from e
    try:
        with open(path) as f:
            doc = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"cannot read prices {path}: {e}") from e
    out = {}
    for i, p in enumerate(doc.get("prices") or []):
        missing = [k for k in ("gpu", "currency", "per_hour") if k not in (p or {})]
        if missing:
            raise InputError(f"{path}: price entry {i + 1} lacks {', '.join(missing)}")
        try:
            per_hour = float(p["per_hour"])
        except (TypeError, ValueError) as e:
            raise InputError(f"{path}: price entry {i + 1}: per_hour is not a number") from e
        if not per_hour > 0:
            raise InputError(f"{path}: price entry {i + 1}: per_hour must be positive")
        out.setdefault(str(p["gpu"]), {"provider": str(p.get("provider", "")),
                                       "currency": str(p["currency"]), "per_hour": per_hour,
                                       "source": str(p.get("source", ""))})
    return out


def schema_major(context, path):
    version = context.get("cnnbench_version")
    if not version:
        raise InputError(f"{path}: not a cnnbench results file (its context has no "
                         "cnnbench_version)")
    try:
        major = int(str(version).split(".")[0])
    except ValueError as e:
        raise InputError(f"{path}: cnnbench_version '{version}' is not a version") from e
    if major > SUPPORTED_SCHEMA_MAJOR:
        raise InputError(f"{path}: written by cnnbench {version}; this report reads results of "
                         f"cnnbench {SUPPORTED_SCHEMA_MAJOR}.x")
    return major


def median_counter(entries, name):
    """A counter of a benchmark: its median aggregate's, else the median of its repetitions."""
    agg = [e[name] for e in entries if e.get("run_type") == "aggregate"
           and e.get("aggregate_name") == "median" and isinstance(e.get(name), (int, float))]
    if agg:
        return float(agg[0])
    it = [e[name] for e in entries if e.get("run_type", "iteration") == "iteration"
          and isinstance(e.get(name), (int, float))]
    return float(statistics.median(it)) if it else None


def load_run(path):
    """One result file: {"gpu", "context", "path", "rows": {(net, prec, mode, batch): {...}},
    "max_batch": {(net, prec, mode): {...}}}."""
    try:
        doc = cp.read_benchmark_json(path)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read results {path}: {e}") from e
    if not isinstance(doc, dict) or "benchmarks" not in doc:
        raise InputError(f"{path}: not Google Benchmark JSON (no 'benchmarks')")
    context = dict(doc.get("context") or {})
    schema_major(context, path)
    # A run under --memory_limit stands for a smaller card: its context says which.
    try:
        cap_gib = float(context.get("memory_limit_mib") or 0) / 1024 or None
    except (TypeError, ValueError):
        cap_gib = None
    try:  # the whole device's memory, where a search ran uncapped
        device_gib = float(context.get("gpu_memory_mib") or 0) / 1024 or None
    except (TypeError, ValueError):
        device_gib = None
    groups, maxb, maxb_errors, ceiling = {}, {}, [], {}
    for e in doc["benchmarks"]:
        name = e.get("run_name") or e.get("name", "")
        parts = name.split("/")
        if len(parts) >= 3 and parts[0] == "gemm" and parts[2] == "ceiling":
            if not e.get("error_occurred"):
                ceiling.setdefault(parts[1], []).append(e)
            continue
        if len(parts) >= 4 and parts[3] == "max_batch":
            if e.get("error_occurred"):
                maxb_errors.append(f"{'/'.join(parts[:3])}: "
                                   f"{str(e.get('error_message') or 'error')[:160]}")
            elif isinstance(e.get("largest_batch"), (int, float)):
                # "train" or, for an entry with its own input size or classes, "train size:64
                # classes:200" (the article's tiny-imagenet case beside ImageNet's).
                extra = [p for p in parts[4:] if p.split(":")[0] in ("size", "classes")]
                mode = " ".join([parts[2]] + extra)
                maxb[(parts[0], parts[1], mode)] = {
                    "largest": int(e["largest_batch"]),
                    "first_failed": e.get("first_failed"),
                    "capped": bool(e.get("capped")),  # the search's cap fitted: at least this
                    "memory_limit_gib": cap_gib, "device_gib": device_gib}
            continue
        key = cp.parse_name(name)
        if key is None:
            continue
        groups.setdefault(key, []).append(e)
    # The batches that ran out of memory in each search (its attempt lines): a search capped in
    # one run whose next batch failed in another is exact (merged in build()).
    maxb_failed = {}
    for a in doc.get("max_batch_attempts", []):
        parts = str(a.get("search", "")).split("/")
        if len(parts) >= 4 and parts[3] == "max_batch" and a.get("fit") == "out of memory":
            extra = [p for p in parts[4:] if p.split(":")[0] in ("size", "classes")]
            maxb_failed.setdefault((parts[0], parts[1], " ".join([parts[2]] + extra)),
                                   set()).add(int(a.get("batch", 0)))
    rows = {}
    for key, es in groups.items():
        errors = [str(e.get("error_message") or "error") for e in es if e.get("error_occurred")]
        if errors:
            rows[key] = {"error": errors[0]}
            continue
        ok = [e for e in es if not e.get("error_occurred")]
        img_s = median_counter(ok, "img_per_s")
        if img_s is None:
            vals = [v for v in (cp.entry_img_s(e) for e in ok) if v is not None]
            img_s = statistics.median(vals) if vals else None
        rows[key] = {"img_s": img_s, "peak_mib": median_counter(ok, "device_peak_mib"),
                     "arena_mib": median_counter(ok, "arena_peak_mib"),
                     "tflops": median_counter(ok, "tflops"),
                     "epoch_s": median_counter(ok, "epoch_s"),
                     # mode video: N frames from the host to final boxes (the article's task)
                     "time_to_completion_s": median_counter(ok, "time_to_completion_s"),
                     "frames": median_counter(ok, "frames"),
                     "size": cp.name_size(es[0].get("run_name") or es[0].get("name", ""))}
    gpu = context.get("gpu_name") or "unknown GPU"
    peaks = {prec: median_counter(es, "tflops") for prec, es in ceiling.items()}
    return {"gpu": gpu, "context": context, "path": path, "rows": rows, "max_batch": maxb,
            "max_batch_failed": maxb_failed, "memory_limit_gib": cap_gib,
            "max_batch_errors": maxb_errors, "ceiling": {k: v for k, v in peaks.items() if v},
            "truncated": bool(doc.get("truncated"))}


def input_kind(path):
    """What a result file is, read once: "stylegan_train" (cnnbench_stylegan_train --json: one
    object with "settings" naming a discriminator and "rows"; PyTorch's peer has no
    discriminator, and is not ours to price), "data_parallel" (cnnbench_dp --json: "results" and
    a context naming NCCL), else "benchmark" (Google Benchmark's JSON or its JSON lines, which
    load_run reads and judges)."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return "benchmark"
    if not isinstance(doc, dict) or "benchmarks" in doc:
        return "benchmark"
    settings = doc.get("settings")
    if isinstance(settings, dict) and "discriminator" in settings and "rows" in doc:
        return "stylegan_train"
    if isinstance(doc.get("results"), list) and "nccl_loaded" in (doc.get("context") or {}):
        return "data_parallel"
    return "benchmark"


def is_stylegan_train(path):
    return input_kind(path) == "stylegan_train"


def is_data_parallel(path):
    return input_kind(path) == "data_parallel"


def load_stylegan_train(path):
    """cnnbench_stylegan_train --json: {"gpu", "context", "path", "settings", "rows": [{batch,
    img_s, s_per_5kimg, ...}]} (rows that did not fit are kept with their error)."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"cannot read results {path}: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list) or \
            not isinstance(doc.get("settings"), dict):
        raise InputError(f"{path}: not a cnnbench_stylegan_train file (no 'settings' and 'rows')")
    context = dict(doc.get("context") or {})
    schema_major(context, path)
    for i, r in enumerate(doc["rows"]):
        if not isinstance(r, dict) or "batch" not in r or (r.get("fits") and not isinstance(
                r.get("s_per_5kimg"), (int, float))):
            raise InputError(f"{path}: row {i + 1} lacks batch or s_per_5kimg")
    return {"gpu": context.get("gpu_name") or "unknown GPU", "context": context, "path": path,
            "settings": doc["settings"], "rows": doc["rows"]}


def load_seed(path):
    """{(gpu, network, batch): img/s} of the seed's one-GPU rows (the LeaderGPU figures first)."""
    out = {}
    try:
        f = open(path, newline="")
    except OSError as e:
        raise InputError(f"cannot read the seed {path}: {e}") from e
    with f:
        reader = csv.DictReader(f)
        for r in reader:
            try:
                if r.get("gpus", "1") != "1" or not r.get("images_per_sec"):
                    continue
                gpu = SEED_GPU_ALIASES.get(r["gpu"], r["gpu"])
                key = (gpu, r["network"], int(r["batch"]))
                value = float(r["images_per_sec"])
            except (KeyError, TypeError, ValueError) as e:
                raise InputError(f"{path}, line {reader.line_num}: a bad row ({e})") from e
            if key not in out or r.get("source") == "LeaderGPU":
                out[key] = value
    return out


def load_cost_seed(path):
    """The seed's cost rows: [{"gpu", "network", "batch", "images", "time_s", "per_min",
    "total"}]."""
    try:
        f = open(path, newline="")
    except OSError as e:
        raise InputError(f"cannot read the cost seed {path}: {e}") from e
    rows = []
    with f:
        reader = csv.DictReader(f)
        for r in reader:
            try:
                rows.append({"gpu": r["gpu"], "network": r["network"], "batch": int(r["batch"]),
                             "images": int(r["images"]), "time_s": float(r["time_s"]),
                             "per_min": float(r["price_eur_per_min"]),
                             "total": float(r["total_cost_eur"])})
            except (KeyError, TypeError, ValueError) as e:
                raise InputError(f"{path}, line {reader.line_num}: a bad row ({e})") from e
    return rows


# --------------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------------
def run_cost(seconds, per_hour):
    """The article's single-run cost: seconds / 3600 x price per hour."""
    return seconds / 3600.0 * per_hour


def million_images(img_s, per_hour, images=IMAGES):
    """(seconds, cost) of `images` at img_s; cost None without a price."""
    seconds = images / img_s
    return seconds, (run_cost(seconds, per_hour) if per_hour is not None else None)


def recommend(candidates, key, best="max"):
    """The candidates ({name: value}, None values left out) that share the best value, sorted by
    name: [(name, value)]. Ties within 1e-9 relative are all listed."""
    vals = {k: v for k, v in candidates.items() if v is not None and math.isfinite(v)}
    if not vals:
        return []
    top = max(vals.values()) if best == "max" else min(vals.values())
    return sorted((k, v) for k, v in vals.items() if abs(v - top) <= 1e-9 * max(abs(top), 1e-30))


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------
def fmt(v, digits=0):
    if v is None:
        return "–"
    return f"{v:,.{digits}f}"


def figure(v):
    """A recommendation's figure: whole numbers from 100 up, four significant digits below."""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.4g}"


def money(v, currency):
    return "–" if v is None else f"{v:,.3f} {currency}"


PLATEAU_SHARE = 0.9  # "saturates": the first batch whose img/s reaches 90% of the plateau
STILL_RISING = 1.05  # the largest batch measured gained more than 5% on the one before it


def saturation(gpus, throughput, max_batch, mode):
    """How throughput grows with batch, per cnnbench GPU and network (issue 9's scaling figures):
    img/s and ms per batch at each measured batch, the plateau (the highest img/s measured and
    its batch), the first batch reaching PLATEAU_SHARE of it, whether the curve was still rising
    at the largest batch measured (then the plateau is a lower bound), and the largest batch that
    fits the whole device in this mode, where a max-batch row says so. Networks measured at one
    batch only are left out."""
    out = []
    for gpu, kind in gpus:
        if kind != "ours":
            continue
        t = throughput.get(gpu, {})
        for net in sorted({n for n, _ in t}):
            pts = sorted((b, v) for (n, b), v in t.items() if n == net and v)
            if len(pts) < 2:
                continue
            plateau_batch, plateau = max(pts, key=lambda p: (p[1], -p[0]))
            batch_90 = next(b for b, v in pts if v >= PLATEAU_SHARE * plateau)
            rising = plateau_batch == pts[-1][0] and pts[-1][1] > STILL_RISING * pts[-2][1]
            fits = [m["largest"] for m in max_batch if m["gpu"] == gpu and m["network"] == net
                    and m["mode"] == mode and not m["memory_limit_gib"]]
            out.append({"gpu": gpu, "network": net, "batches": [b for b, _ in pts],
                        "img_s": [v for _, v in pts],
                        "ms_per_batch": [1000.0 * b / v for b, v in pts],
                        "plateau_img_s": plateau, "plateau_batch": plateau_batch,
                        "batch_90": batch_90, "still_rising": rising,
                        "largest_batch": max(fits) if fits else None})
    return out


def build(runs, seed, cost_seed, prices, batch=32, precision="fp16", mode="graph", sg_runs=()):
    """Everything the report shows, as plain data: {"gpus", "throughput", "cost", "tasks",
    "max_batch", "recommendations", "notes"}."""
    notes = []
    gpus = []  # (gpu label, kind: "ours" | "seed")
    throughput = {}  # gpu -> {(network, batch): img/s}
    peaks = {}  # gpu -> {(network, batch): MiB}
    # Files of one GPU merge (a later file's figure replaces an earlier one's; a failure never
    # replaces a figure, and is noted only where no file has one).
    failed = {}
    tflops, ceiling = {}, {}  # gpu -> {(network, batch): TFLOP/s}; gpu -> GEMM TFLOP/s
    for r in runs:
        label = r["gpu"]
        if label not in throughput:
            gpus.append((label, "ours"))
        t = throughput.setdefault(label, {})
        p = peaks.setdefault(label, {})
        tf = tflops.setdefault(label, {})
        if precision in r["ceiling"]:
            ceiling[label] = r["ceiling"][precision]
        for (net, prec, m, b), row in sorted(r["rows"].items()):
            if prec != precision or m != mode:
                continue
            if "error" in row:
                failed.setdefault((label, net, b), row["error"])
                continue
            t[(net, b)] = row["img_s"]
            if row.get("tflops"):
                tf[(net, b)] = row["tflops"]
            # The model's own high-water mark (the arena: weights, activations, workspace): the
            # device's peak also holds whatever the process had before it, which varies by run.
            if row.get("arena_mib") is not None:
                p[(net, b)] = row["arena_mib"]
        if r["truncated"]:
            notes.append(f"{r['path']} was cut off: the rows it holds are used")
    for (label, net, b), why in sorted(failed.items()):
        if (net, b) not in throughput[label]:
            notes.append(f"{label}: {net} at batch {b} failed: {why[:120]}")
    for gpu in sorted({g for g, _, _ in seed}):
        gpus.append((gpu, "seed"))
        throughput[gpu] = {(SEED_TO_OURS.get(n, n), b): v for (g, n, b), v in seed.items()
                           if g == gpu}
    missing = [g for g, _ in gpus if g not in prices]
    for g in missing:
        notes.append(f"no price for {g} in prices.yaml: its costs are left blank")
    for g, _ in gpus:
        if g in prices and "example" in prices[g]["source"].lower():
            notes.append(f"the price of {g} ({prices[g]['per_hour']:g} {prices[g]['currency']}/h) "
                         "is an example, not a quote: set yours in prices.yaml")

    cost = []  # per network and GPU at `batch`
    for gpu, kind in gpus:
        price = prices.get(gpu)
        for (net, b), img_s in sorted(throughput[gpu].items()):
            if b != batch or not img_s:
                continue
            seconds, c = million_images(img_s, price["per_hour"] if price else None)
            tf = tflops.get(gpu, {}).get((net, b))
            cost.append({"gpu": gpu, "kind": kind, "network": net, "img_s": img_s,
                         "seconds": seconds, "cost": c,
                         "currency": price["currency"] if price else None, "tflops": tf,
                         "efficiency": tf / ceiling[gpu] if tf and gpu in ceiling else None})
    # The seed's own cost rows, recomputed from its times and per-minute prices (a check that
    # the arithmetic is the article's: 303 s at 0.06 EUR/min = 0.303 EUR).
    seed_costs = [dict(r, cost=run_cost(r["time_s"] * IMAGES / r["images"], r["per_min"] * 60))
                  for r in cost_seed if r["batch"] == batch]
    if seed:
        notes.append("the seed's alexnet is MXNet's symbols/alexnet.py (with LRN): its rows sit "
                     "under our alexnet_lrn")

    tasks = []
    for r in runs:
        for (net, prec, m, b), row in sorted(r["rows"].items()):
            if m == "train" and row.get("epoch_s"):
                price = prices.get(r["gpu"])
                tasks.append({"gpu": r["gpu"], "task": f"one epoch of {net} training, {prec}, "
                              f"batch {b}", "seconds": row["epoch_s"],
                              "cost": run_cost(row["epoch_s"], price["per_hour"]) if price else None,
                              "currency": price["currency"] if price else None})
    for gpu, kind in gpus:
        if kind == "ours" and gpu not in ceiling:
            notes.append(f"{gpu}: no {precision} GEMM ceiling in these results (cnnbench "
                         "--gemm_ceiling): the efficiency column is blank")
    if not tasks:
        notes.append("time to solution: no training rows with an epoch figure in these results")

    def task(gpu, what, seconds):
        price = prices.get(gpu)
        return {"gpu": gpu, "task": what, "seconds": seconds,
                "cost": run_cost(seconds, price["per_hour"]) if price else None,
                "currency": price["currency"] if price else None}
    video = 0
    for r in runs:  # the article's YOLOR task: a video's frames at 1280 to final boxes
        for (net, prec, m, b), row in sorted(r["rows"].items()):
            if m == "video" and row.get("time_to_completion_s") and row.get("frames"):
                size = f" at {row['size']} px" if row.get("size") else ""
                tasks.append(task(r["gpu"], f"{row['frames']:,.0f} frames of {net}{size} to "
                                  f"final boxes, {prec}, batch {b}", row["time_to_completion_s"]))
                video += 1
    if not video:
        notes.append("time to solution of YOLOR's video task: no `video` rows in these results "
                     "(configs/yolor.yaml runs them)")
    for sg in sg_runs:  # the article's StyleGAN task: 5 kimg of training
        st = sg["settings"]
        for row in sg["rows"]:
            if row.get("fits") and row.get("s_per_5kimg"):
                tasks.append(task(sg["gpu"], f"5 kimg of {st.get('network', 'StyleGAN')} training "
                                  f"at {st.get('resolution', '?')} px, {st.get('precision', '?')}"
                                  f", batch {row['batch']}", row["s_per_5kimg"]))
    if not sg_runs:
        notes.append("time to solution of StyleGAN's 5 kimg: no cnnbench_stylegan_train --json "
                     "file among the inputs")

    # One entry per (GPU, network, precision, mode, memory cap), merged over the runs: the largest
    # batch any of them fitted, "at least" only while no run saw the batch above it fail.
    merged, failed = {}, {}
    for r in runs:
        for why in r["max_batch_errors"]:
            notes.append(f"{r['gpu']}: a max-batch search failed ({os.path.basename(r['path'])}): "
                         f"{why}")
        for (net, prec, m), mb in r["max_batch"].items():
            key = (r["gpu"], net, prec, m, mb["memory_limit_gib"])
            have = merged.get(key)
            if have is None or mb["largest"] > have["largest"] or (
                    mb["largest"] == have["largest"] and not mb.get("capped")):
                merged[key] = mb
        for (net, prec, m), batches in r.get("max_batch_failed", {}).items():
            failed.setdefault((r["gpu"], net, prec, m, r.get("memory_limit_gib")),
                              set()).update(batches)
    max_batch = []
    for key in sorted(merged, key=lambda k: (k[1], k[3], k[2], k[4] is None, k[4] or 0, k[0])):
        gpu, net, prec, m, cap = key
        mb = merged[key]
        capped = bool(mb.get("capped")) and mb["largest"] + 1 not in failed.get(key, set())
        # A capped run stands for a smaller card, whose price is not this GPU's: no price.
        price = prices.get(gpu)
        priced = price if not cap else None
        per_item = priced["per_hour"] / mb["largest"] if priced and mb["largest"] else None
        max_batch.append({"gpu": gpu, "network": net, "precision": prec, "mode": m,
                          "largest": mb["largest"], "capped": capped,
                          "memory_limit_gib": cap, "per_item_per_hour": per_item,
                          # the memory the batch had: the cap, or the whole device's
                          "card_gib": cap or mb.get("device_gib"),
                          "currency": priced["currency"] if priced else None})

    scaling = saturation(gpus, throughput, max_batch, mode)
    recs = []
    nets = sorted({c["network"] for c in cost})
    for net in nets:
        rows = [c for c in cost if c["network"] == net]
        recs.append((f"fastest, {net} at batch {batch}",
                     recommend({c["gpu"]: c["img_s"] for c in rows}, "img_s"), "img/s", None))
        # Costs compare within one currency: a recommendation per currency priced.
        priced = [c for c in rows if c["cost"] is not None]
        for currency in sorted({c["currency"] for c in priced}):
            recs.append((f"best cost per million images, {net} ({currency})",
                         recommend({c["gpu"]: c["cost"] for c in priced
                                    if c["currency"] == currency}, "cost", "min"),
                         currency, currency))
    hourly = {g: p["per_hour"] for g, p in prices.items() if g in dict(gpus)}
    for currency in sorted({prices[g]["currency"] for g in hourly}):
        recs.append((f"cheapest per hour ({currency})", recommend(
            {g: v for g, v in hourly.items() if prices[g]["currency"] == currency}, "price",
            "min"), f"{currency}/h", currency))
    # Which GPU fits the largest batch: runs on the whole device only (a capped run predicts a
    # smaller card, not the GPU it ran on); the table and the plot show the capped ones.
    whole = [m for m in max_batch if not m["memory_limit_gib"]]
    for net in sorted({m["network"] for m in whole}):
        rows = [m for m in whole if m["network"] == net]
        recs.append((f"largest batch, {net}",
                     recommend({f"{m['gpu']} {m['mode']}": m["largest"] for m in rows}, "batch"),
                     "images", None))
        priced = [m for m in rows if m["per_item_per_hour"] is not None]
        for currency in sorted({m["currency"] for m in priced}):
            recs.append((f"best largest batch per {currency}/h, {net}", recommend(
                {f"{m['gpu']} {m['mode']}": m["largest"] / prices[m["gpu"]]["per_hour"]
                 for m in priced if m["currency"] == currency}, "batch"),
                f"images per {currency}/h", currency))
    return {"gpus": gpus, "throughput": throughput, "peaks": peaks, "cost": cost,
            "seed_costs": seed_costs, "tasks": tasks, "max_batch": max_batch,
            "recommendations": recs, "notes": notes, "batch": batch, "precision": precision,
            "mode": mode, "ceiling": ceiling, "scaling": scaling}


def report_json(data):
    """What the report derives, as JSON (report.json): the scaling figures, the cost and task
    rows, the largest batches, the recommendations and the notes."""
    keys = ("precision", "mode", "batch", "scaling", "cost", "tasks", "max_batch", "notes")
    out = {k: data[k] for k in keys}
    out["ceiling_tflops"] = data["ceiling"]
    out["recommendations"] = [{"metric": m, "choice": [{"gpu": g, "figure": v} for g, v in picks],
                               "unit": unit} for m, picks, unit, _ in data["recommendations"]]
    return out


def render_markdown(data, runs, prices, plots):
    out = ["# cnnbench report", ""]
    out.append("Results:")
    for r in runs:
        c = r["context"]
        out.append(f"- `{os.path.basename(r['path'])}`: {r['gpu']}, {c.get('date', '?')}, "
                   f"cuDNN {c.get('cudnn_version_loaded', '?')}, driver "
                   f"{c.get('driver_version', '?')}, cnnbench {c.get('cnnbench_git', '?')}")
    out.append(f"- seed: MXNet's figures of the LeaderGPU article (batch 1-32, fp32); ours "
               f"{data['precision']} {data['mode']} replay")
    out += ["", f"## Images/s by network and batch ({data['precision']} {data['mode']} for "
            "cnnbench runs, the seed's MXNet for the others)", ""]
    for gpu, kind in data["gpus"]:
        t = data["throughput"][gpu]
        if not t:
            continue
        batches = sorted({b for _, b in t})
        nets = sorted({n for n, _ in t})
        out.append(f"**{gpu}** ({'cnnbench' if kind == 'ours' else 'seed'})")
        out.append("")
        out.append("| network | " + " | ".join(str(b) for b in batches) + " |")
        out.append("|---|" + "---:|" * len(batches))
        for n in nets:
            out.append(f"| {n} | " + " | ".join(fmt(t.get((n, b))) for b in batches) + " |")
        out.append("")
    out += [f"## 1,000,000 images at batch {data['batch']}", ""]
    for gpu, peak in sorted(data["ceiling"].items()):
        out.append(f"{gpu}'s {data['precision']} GEMM ceiling (cnnbench --gemm_ceiling, 8192^3): "
                   f"{peak:,.0f} TFLOP/s; \"of ceiling\" is a network's TFLOP/s (forward MACs x "
                   "2 per image) against it.")
        out.append("")
    out += ["| network | GPU | img/s | time | price / h | cost | TFLOP/s | of ceiling |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    for c in sorted(data["cost"], key=lambda c: (c["network"], c["seconds"])):
        p = prices.get(c["gpu"])
        eff = f"{100 * c['efficiency']:.1f}%" if c.get("efficiency") else "–"
        out.append(f"| {c['network']} | {c['gpu']} | {fmt(c['img_s'])} | {fmt(c['seconds'], 1)} s"
                   f" | {money(p['per_hour'], p['currency']) if p else '–'} | "
                   f"{money(c['cost'], c['currency']) if c['currency'] else '–'} | "
                   f"{fmt(c.get('tflops'), 1)} | {eff} |")
    out += ["", "The seed's own rows, recomputed from its times and prices (seconds / 3600 x price "
            "per hour):", "", "| network | GPU | time | EUR / min | cost | the seed's cost |",
            "|---|---|---:|---:|---:|---:|"]
    for s in data["seed_costs"]:
        out.append(f"| {s['network']} | {s['gpu']} | {fmt(s['time_s'])} s | {s['per_min']:.2f} | "
                   f"{s['cost']:.4f} | {s['total']:.4f} |")
    out += ["", "## Time to solution", ""]
    if data["tasks"]:
        out += ["| GPU | task | time | cost |", "|---|---|---:|---:|"]
        for t in data["tasks"]:
            out.append(f"| {t['gpu']} | {t['task']} | {fmt(t['seconds'], 1)} s | "
                       f"{money(t['cost'], t['currency']) if t['currency'] else '–'} |")
    else:
        out.append("None of these results measures one of the article's tasks (a training "
                   "epoch, YOLOR's video, StyleGAN's 5 kimg).")
    if data.get("data_parallel"):
        out += ["", "## Training on several GPUs", "",
                "cnnbench_dp's runs (data-parallel over NCCL; efficiency: per-GPU img/s over the "
                "same step alone on one GPU), then the seed's multi-GPU rows with their efficiency "
                "computed the same way:", "", data["data_parallel"].rstrip("\n")]
    if data.get("scaling"):
        out += ["", "## How throughput grows with batch", "",
                f"Where each network saturates ({data['precision']} {data['mode']}): the plateau is "
                f"the highest img/s measured; \"saturates at\" is the first batch reaching "
                f"{PLATEAU_SHARE:.0%} of it. A plateau at the largest batch measured that still "
                f"gained over {STILL_RISING - 1:.0%} on the batch before is a lower bound "
                "(\">=\"). \"fits\": the largest batch of a max-batch search on the whole device.",
                "", "| network | GPU | batches | img/s at the first | ms per batch, first / "
                "saturated / last | plateau img/s (batch) | saturates at | fits |",
                "|---|---|---|---:|---|---:|---:|---:|"]
        for sc in data["scaling"]:
            i90 = sc["batches"].index(sc["batch_90"])
            ms = " / ".join(f"{sc['ms_per_batch'][i]:,.2f}" for i in (0, i90, -1))
            plateau = (">= " if sc["still_rising"] else "") + \
                f"{sc['plateau_img_s']:,.0f} ({sc['plateau_batch']})"
            fits = fmt(sc["largest_batch"]) if sc["largest_batch"] else "–"
            out.append(f"| {sc['network']} | {sc['gpu']} | {sc['batches'][0]}-{sc['batches'][-1]}"
                       f" ({len(sc['batches'])}) | {fmt(sc['img_s'][0])} | {ms} | {plateau} | "
                       f"{sc['batch_90']} | {fits} |")
    out += ["", "## The largest batch", ""]
    if data["max_batch"]:
        out += ["| network | GPU | mode | memory cap | largest batch | price / h per item |",
                "|---|---|---|---:|---:|---:|"]
        for m in data["max_batch"]:
            cap = f"{m['memory_limit_gib']:g} GiB" if m["memory_limit_gib"] else "whole GPU"
            largest = f"{'>= ' if m.get('capped') else ''}{m['largest']:,}"
            out.append(f"| {m['network']} | {m['gpu']} | {m['mode']} | {cap} | {largest} | "
                       f"{money(m['per_item_per_hour'], m['currency']) if m['currency'] else '–'} |")
    else:
        out.append("No max-batch rows in these results (`cnnbench --max_batch`).")
    out += ["", "## Recommendations", "", "| metric | choice | figure |", "|---|---|---:|"]
    for metric, picks, unit, _ in data["recommendations"]:
        if not picks:
            out.append(f"| {metric} | – | no figures |")
            continue
        out.append(f"| {metric} | {', '.join(p for p, _ in picks)}"
                   f"{' (tied)' if len(picks) > 1 else ''} | {figure(picks[0][1])} {unit} |")
    if plots:
        out += ["", "## Plots", ""]
        for name, title in plots:
            out.append(f"![{title}]({name})")
    if data["notes"]:
        out += ["", "## Notes", ""] + [f"- {n}" for n in data["notes"]]
    out += ["", "Prices: `configs/prices.yaml` (" + "; ".join(
        f"{g}: {p['per_hour']:g} {p['currency']}/h, {p['source']}" for g, p in sorted(prices.items()))
        + ")."]
    return "\n".join(out) + "\n"


def make_plots(data, out_dir):
    """[(file name, title)] of the PNG plots written, or [] without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        data["notes"].append("plots skipped: matplotlib is not installed (Debian: "
                             "python3-matplotlib)")
        return []
    plots = []

    def save(fig, name, title):
        if name != "throughput.png":
            fig.tight_layout()
        fig.savefig(os.path.join(out_dir, name), dpi=100)
        plt.close(fig)
        plots.append((name, title))

    nets = sorted({n for t in data["throughput"].values() for n, _ in t})
    if nets:
        cols = min(3, len(nets))
        rows = math.ceil(len(nets) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows + 0.8),
                                 squeeze=False)
        colors = {g: f"C{i % 10}" for i, (g, _) in enumerate(data["gpus"])}
        handles = {}
        for ax, net in zip(axes.flat, nets):
            for gpu, kind in data["gpus"]:
                pts = sorted((b, v) for (n, b), v in data["throughput"][gpu].items() if n == net)
                if pts:
                    (line,) = ax.plot([b for b, _ in pts], [v for _, v in pts], marker="o",
                                      markersize=3, color=colors[gpu],
                                      linestyle="-" if kind == "ours" else "--")
                    handles.setdefault(gpu, (line, f"{gpu} ({data['precision']}, cnnbench)"
                                             if kind == "ours" else f"{gpu} (seed, MXNet)"))
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(net)
            ax.set_xlabel("batch")
            ax.set_ylabel("images/s")
            ax.grid(alpha=0.3, which="both")
        for ax in list(axes.flat)[len(nets):]:
            ax.axis("off")
        fig.legend([h for h, _ in handles.values()], [t for _, t in handles.values()],
                   loc="lower center", ncol=min(4, len(handles)), fontsize=8)
        fig.tight_layout(rect=(0, 0.8 / (3.2 * rows + 0.8) + 0.02, 1, 1))
        save(fig, "throughput.png", "images/s against batch")
    if any(data["peaks"].values()):
        fig, ax = plt.subplots(figsize=(6, 4))
        for gpu, pk in data["peaks"].items():
            for net in sorted({n for n, _ in pk}):
                pts = sorted((b, v) for (n, b), v in pk.items() if n == net)
                ax.plot([b for b, _ in pts], [v / 1024 for _, v in pts], marker="o",
                        label=f"{net} ({gpu})")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch")
        ax.set_ylabel("planned high-water mark, GiB (arena)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
        save(fig, "memory.png", "memory high-water mark against batch")
    priced = [c for c in data["cost"] if c["cost"] is not None]
    if priced:
        # One panel per currency (never converted): networks along x, one bar per GPU.
        currencies = sorted({c["currency"] for c in priced})
        fig, axes = plt.subplots(1, len(currencies), figsize=(7 * len(currencies), 4),
                                 squeeze=False)
        for ax, cur in zip(axes.flat, currencies):
            rows = [c for c in priced if c["currency"] == cur]
            nets = sorted({c["network"] for c in rows})
            gpus = sorted({c["gpu"] for c in rows})
            width = 0.8 / len(gpus)
            for i, gpu in enumerate(gpus):
                xs, ys = [], []
                for j, net in enumerate(nets):
                    v = [c["cost"] for c in rows if c["gpu"] == gpu and c["network"] == net]
                    if v:
                        xs.append(j + (i - (len(gpus) - 1) / 2) * width)
                        ys.append(v[0])
                ax.bar(xs, ys, width=width, label=gpu)
            ax.set_xticks(range(len(nets)), nets, rotation=30, fontsize=8)
            ax.set_yscale("log")
            ax.set_ylabel(f"cost of 1M images at batch {data['batch']}, {cur}")
            ax.grid(alpha=0.3, axis="y", which="both")
            ax.legend(fontsize=7)
        save(fig, "cost.png", "cost per million images")
    mb = [m for m in data["max_batch"] if m.get("card_gib")]
    if mb:
        fig, ax = plt.subplots(figsize=(6, 4))
        for key in sorted({(m["network"], m["mode"]) for m in mb}):
            pts = sorted((m["card_gib"], m["largest"], m.get("capped", False))
                         for m in mb if (m["network"], m["mode"]) == key)
            line, = ax.plot([p for p, _, _ in pts], [v for _, v, _ in pts], marker="o",
                            label=" ".join(key))
            at_cap = [(p, v) for p, v, c in pts if c]  # at least this: drawn hollow
            if at_cap:
                ax.scatter([p for p, _ in at_cap], [v for _, v in at_cap], s=90,
                           facecolors="white", edgecolors=line.get_color(), zorder=3)
        if any(m.get("capped") for m in mb):
            ax.set_title("hollow: the search's cap fitted (at least that)", fontsize=8)
        ax.set_xlabel("card memory, GiB")
        ax.set_ylabel("largest batch")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        save(fig, "max_batch.png", "largest batch against card memory")
    return plots


def inline(text):
    """Markdown's **bold** and `code` of one escaped line, as HTML."""
    out = html.escape(text)
    for mark, tag in (("**", "b"), ("`", "code")):
        parts = out.split(mark)
        if len(parts) % 2 == 1:  # balanced
            out = "".join(p if i % 2 == 0 else f"<{tag}>{p}</{tag}>" for i, p in enumerate(parts))
    return out


def render_html(markdown_text, out_dir, plots):
    """A self-contained page: the report's text, its tables, the PNGs inlined."""
    body, table = [], []

    def flush():
        if not table:
            return
        rows = [r.strip().strip("|").split("|") for r in table if not set(r) <= set("|-:")]
        body.append("<table>")
        for i, r in enumerate(rows):
            tag = "th" if i == 0 else "td"
            body.append("<tr>" + "".join(f"<{tag}>{inline(c.strip())}</{tag}>" for c in r)
                        + "</tr>")
        body.append("</table>")
        table.clear()

    for line in markdown_text.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush()
        if line.startswith("!["):
            name = line[line.index("(") + 1:-1]
            with open(os.path.join(out_dir, name), "rb") as f:
                data = base64.b64encode(f.read()).decode()
            body.append(f'<p><img alt="{html.escape(name)}" src="data:image/png;base64,{data}"></p>')
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{html.escape(line[level:].strip())}</h{level}>")
        elif line.startswith("- "):
            body.append(f"<li>{inline(line[2:])}</li>")
        elif line.strip():
            body.append(f"<p>{inline(line)}</p>")
    flush()
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:"
             "collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
             "td:first-child,th:first-child{text-align:left}img{max-width:100%}")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>cnnbench report</title>"
            f"<style>{style}</style></head><body>" + "\n".join(body) + "</body></html>\n")


README_BEGIN = "<!-- report-headline:begin -->"
README_END = "<!-- report-headline:end -->"


def headline(data, network="resnet50"):
    """The README's table: `network`'s million images at the report's batch on every GPU, and
    the recommendations for it."""
    rows = sorted((c for c in data["cost"] if c["network"] == network), key=lambda c: c["seconds"])
    out = [f"1,000,000 images of {network} at batch {data['batch']} (cnnbench: "
           f"{data['precision']} {data['mode']} replay; seed: MXNet, as the LeaderGPU article "
           "measured it):", "", "| GPU | img/s | time | price / h | cost |",
           "|---|---:|---:|---:|---:|"]
    for c in rows:
        out.append(f"| {c['gpu']} | {fmt(c['img_s'])} | {fmt(c['seconds'], 1)} s | " +
                   (f"{data['prices'][c['gpu']]['per_hour']:g} {c['currency']} | "
                    f"{money(c['cost'], c['currency'])}" if c["currency"] else "– | –") + " |")
    recs = [(m, p, u) for m, p, u, _ in data["recommendations"] if network in m]
    if recs:
        out.append("")
        for m, p, u in recs:
            if p:
                out.append(f"- {m}: {', '.join(g for g, _ in p)} ({figure(p[0][1])} {u})")
    return "\n".join(out) + "\n"


def update_readme(path, block):
    import seed_table  # the marker replacement the seed table uses
    try:
        with open(path) as f:
            text = f.read()
        new = seed_table.replace_between_markers(text, block, README_BEGIN, README_END)
    except (OSError, seed_table.InputError) as e:
        raise InputError(f"{path}: {e}") from e
    with open(path, "w") as f:
        f.write(new)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", help="cnnbench JSON files (one per GPU), and "
                    "cnnbench_stylegan_train --json files")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--prices", default=DEFAULT_PRICES)
    ap.add_argument("--seed", default=DEFAULT_SEED, help="the seed's images/s CSV ('' for none)")
    ap.add_argument("--cost-seed", default=DEFAULT_COST_SEED, help="the seed's cost CSV")
    ap.add_argument("--batch", type=int, default=32, help="the batch costs are priced at")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--mode", default="graph")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--readme", help="rewrite this file's block between " + README_BEGIN +
                    " and " + README_END + " with the headline table")
    ap.add_argument("--headline-network", default="resnet50")
    args = ap.parse_args(argv)
    try:
        if args.batch < 1:
            raise InputError("--batch must be at least 1")
        prices = load_prices(args.prices)
        kinds = {p: input_kind(p) for p in args.results}
        sg_runs = [load_stylegan_train(p) for p in args.results if kinds[p] == "stylegan_train"]
        dp_paths = [p for p in args.results if kinds[p] == "data_parallel"]
        runs = [load_run(p) for p in args.results if kinds[p] == "benchmark"]
        dp_rows = scaling_table.read_runs(dp_paths) if dp_paths else []
        seed = load_seed(args.seed) if args.seed else {}
        cost_seed = load_cost_seed(args.cost_seed) if args.cost_seed else []
    except (InputError, scaling_table.InputError) as e:
        print(f"report: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    data = build(runs, seed, cost_seed, prices, args.batch, args.precision, args.mode, sg_runs)
    if dp_rows:  # training on several GPUs, beside the seed's multi-GPU rows
        try:
            seed_rows = scaling_table.seed_scaling(scaling_table.read_seed(
                scaling_table.DEFAULT_SEED))
        except scaling_table.InputError:
            seed_rows = []
        data["data_parallel"] = scaling_table.table(dp_rows, seed_rows)
    data["prices"] = prices
    plots = [] if args.no_plots else make_plots(data, args.out_dir)
    md = render_markdown(data, runs + sg_runs, prices, plots)
    with open(os.path.join(args.out_dir, "report.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out_dir, "report.json"), "w") as f:
        json.dump(report_json(data), f, indent=1)
        f.write("\n")
    with open(os.path.join(args.out_dir, "report.html"), "w") as f:
        f.write(render_html(md, args.out_dir, plots))
    print(f"report: wrote {os.path.join(args.out_dir, 'report.md')} and report.html"
          f"{' with ' + str(len(plots)) + ' plots' if plots else ''}")
    if args.readme:
        try:
            update_readme(args.readme, headline(data, args.headline_network))
        except InputError as e:
            print(f"report: {e}", file=sys.stderr)
            return 2
        print(f"report: updated the headline table in {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
