#!/usr/bin/env python3
"""Issue 4's speed table: cnnbench's training step beside PyTorch's, from one device call.

    python3 tools/compare_train.py --cnnbench train.json --pytorch pytorch_train.json
        [--precision fp16] [--out-md FILE] [--check]

--cnnbench: Google Benchmark JSON of `cnnbench --config=configs/train.yaml` (rows named
"<network>/<precision>/train/batch:<N>", medians of the repetitions; a cut-off file is read as far
as it goes). --pytorch: tools/pytorch_train_baseline.py's JSON (rows per model, mode "eager" or
"graph", precision, batch). One row per (network, batch) of the cnnbench file in --precision:

  cnnbench img/s (median), PyTorch eager and graph img/s, the ratio to the faster of the two;
  cnnbench's arena peak (everything it allocates: parameters, gradients, optimizer state,
  activations, workspace) and device peak (cudaMemGetInfo: the CUDA context and the libraries'
  own memory too), PyTorch's max_memory_reserved of the mode it is compared with (its caching
  allocator's pool, without the context), that mode's device use ("PyTorch device MiB": the row's
  device_used_mib, mem_get_info at its end: context, libraries and the pool, as cnnbench's device
  peak counts; a column only where the PyTorch file's rows carry it, "–" in a row without it), and
  the check.

The checks (--check makes a failure exit 1): cnnbench at least as fast as the faster PyTorch mode
that ran, and its arena peak no higher than that mode's max_memory_reserved. The arena is what
compares like with like: neither figure holds the CUDA context. A PyTorch row that ran out of
memory counts as slower and as larger. Exit 2 on unreadable input.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402


def load_cnnbench_train(path, precision):
    """(context, {(network, batch): {"img_s", "arena_mib", "device_mib", "skipped", "error"}})."""
    doc = cp.read_benchmark_json(path)
    groups = {}
    for e in doc.get("benchmarks", []):
        key = cp.parse_name(e.get("run_name") or e.get("name", ""))
        if key is None or key[2] != "train" or key[1] != precision:
            continue
        g = groups.setdefault((key[0], key[3]), {"iters": [], "median": None, "errors": [],
                                                 "entry": None})
        if e.get("error_occurred"):
            g["errors"].append(str(e.get("error_message") or "error"))
            continue
        if e.get("run_type") == "aggregate":
            if e.get("aggregate_name") == "median":
                g["median"] = cp.entry_img_s(e)
                g["entry"] = e
        else:
            v = cp.entry_img_s(e)
            if v is not None:
                g["iters"].append(v)
                g["entry"] = g["entry"] or e
    out = {}
    for key, g in groups.items():
        img_s = g["median"] if g["median"] is not None else (
            statistics.median(g["iters"]) if g["iters"] else None)
        if g["errors"] or img_s is None:
            out[key] = {"error": g["errors"][0] if g["errors"] else "no measurement"}
            continue
        e = g["entry"]
        out[key] = {"img_s": img_s, "arena_mib": e.get("arena_peak_mib"),
                    "device_mib": e.get("device_peak_mib"), "skipped": e.get("skipped_steps"),
                    "error": None}
    context = dict(doc.get("context", {}))
    if doc.get("truncated"):
        context["truncated"] = True
    return context, out


def load_pytorch_train(path, precision):
    """(header, {(network, batch): {mode: row}})."""
    import json
    with open(path) as f:
        doc = json.load(f)
    out = {}
    for r in doc.get("rows", []):
        if r.get("precision") != precision or r.get("mode") not in ("eager", "graph"):
            continue
        out.setdefault((r["model"], int(r["batch"])), {})[r["mode"]] = r
    header = {k: doc.get(k) for k in ("torch", "torchvision", "cudnn", "gpu", "date")}
    return header, out


def build_rows(cb, pt):
    rows = []
    for (net, batch) in sorted(cb, key=lambda k: (k[0], k[1])):
        c = cb[(net, batch)]
        modes = pt.get((net, batch), {})
        ran = {m: r for m, r in modes.items() if not r.get("error")}
        best = max(ran, key=lambda m: ran[m]["img_s"]) if ran else None
        row = {"network": net, "batch": batch, "cnnbench": c, "pytorch": modes, "best": best,
               "ratio": None, "status": "ok"}
        if c.get("error"):
            row["status"] = "FAIL: " + c["error"]
        elif not modes:
            row["status"] = "FAIL: PyTorch not measured"
        elif best is None:  # every PyTorch mode failed: out of memory counts as beaten
            oom = all("out of memory" in str(r.get("error")) for r in modes.values())
            row["status"] = "ok (PyTorch out of memory)" if oom else "FAIL: PyTorch failed"
        else:
            b = ran[best]
            row["ratio"] = c["img_s"] / b["img_s"]
            fails = []
            if row["ratio"] < 1.0:
                fails.append("slower")
            if c.get("arena_mib") is None or c["arena_mib"] > b["peak_reserved_mib"]:
                fails.append("more memory")
            if fails:
                row["status"] = "FAIL: " + ", ".join(fails)
        rows.append(row)
    return rows


def fmt(v, digits=0):
    return "–" if v is None else f"{v:,.{digits}f}"


def render(rows, cb_context, pt_header, precision):
    # The PyTorch device column only where the PyTorch file has the figure (older files do not).
    device_col = any(x.get("device_used_mib") is not None
                     for r in rows for x in r["pytorch"].values())
    lines = [f"Training step, {precision}: cnnbench (whole step as one CUDA graph) beside PyTorch "
             "(channels_last, cudnn.benchmark; eager and whole-step CUDA graph).", "",
             "| network | batch | cnnbench img/s | PyTorch eager img/s | PyTorch graph img/s | "
             "ratio | cnnbench arena MiB | cnnbench device MiB | PyTorch reserved MiB | "
             + ("PyTorch device MiB | " if device_col else "") + "status |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if device_col else "")
             + "---|"]
    for r in rows:
        c, pt = r["cnnbench"], r["pytorch"]

        def pt_cell(mode):
            x = pt.get(mode)
            if x is None:
                return "–"
            return "out of memory" if "out of memory" in str(x.get("error")) else (
                "error" if x.get("error") else fmt(x["img_s"]))
        best = pt[r["best"]] if r["best"] else {}
        reserved = best.get("peak_reserved_mib")
        device = f" {fmt(best.get('device_used_mib'))} |" if device_col else ""
        ours = "error" if c.get("error") else fmt(c["img_s"])
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] else "–"
        lines.append(
            f"| {r['network']} | {r['batch']} | {ours} | {pt_cell('eager')} | {pt_cell('graph')} "
            f"| {ratio} | {fmt(c.get('arena_mib'))} | {fmt(c.get('device_mib'))} | "
            f"{fmt(reserved)} |{device} {r['status']} |")
    lines += ["", "- cnnbench: " + ", ".join(
        f"{k}={cb_context[k]}" for k in ("gpu_name", "date", "cudnn_version_loaded", "cnnbench_git",
                                         "truncated") if k in cb_context),
              "- PyTorch: " + ", ".join(f"{k}={v}" for k, v in pt_header.items() if v)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cnnbench", required=True)
    ap.add_argument("--pytorch", required=True)
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--out-md", default=None)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    try:
        ctx, cb = load_cnnbench_train(args.cnnbench, args.precision)
        header, pt = load_pytorch_train(args.pytorch, args.precision)
    except (OSError, ValueError, KeyError) as e:
        print(f"compare_train: cannot read inputs: {e}", file=sys.stderr)
        return 2
    rows = build_rows(cb, pt)
    text = render(rows, ctx, header, args.precision)
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    failed = [r for r in rows if r["status"].startswith("FAIL")]
    if not rows:
        print(f"compare_train: no {args.precision} train rows in {args.cnnbench}", file=sys.stderr)
        return 1 if args.check else 0
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
