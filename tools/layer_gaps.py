#!/usr/bin/env python3
"""Where a recorded inference run's time goes, from what it already recorded: each autotuned
layer's own time (the layer table's tuned_us, its winner timed alone) summed per model against the
model's CUDA-graph time, the ops that autotune does not time (pools, LRN, adds, copies) with their
roofline bound, and the layers furthest from theirs. No GPU and no further run: what
`cnnbench_infer --breakdown` measures directly, read from a sweep's own JSON.

  python3 tools/layer_gaps.py RUN.json [--model REGEX] [--top 10] [--tflops 900] [--gbps 4300]
                              [--out-md FILE]

RUN.json: cnnbench's --benchmark_out; RUN.layers.json beside it (--layers_out) is read too. A
shared shape's time counts at every layer of that shape. Bounds: max(FLOPs / --tflops, bytes
(inputs, output, weights; 2 bytes an element, as fp16) / --gbps).
"""
import argparse
import json
import math
import re
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402  (the Google Benchmark reader, cut-off runs too)

SHAPE = re.compile(r"in (\d+)x(\d+)x(\d+)x(\d+) -> out (\d+)x(\d+)x(\d+)x(\d+)"
                   r"(?: k(\d+)(?:x(\d+))? s(\d+)(?: g(\d+))?)?")
LINEAR = re.compile(r"in (\d+)x(\d+) -> out (\d+)x(\d+)$")


def layer_cost(layer, elem_bytes=2):
    """(FLOPs, bytes) of one layer from its record's op and shape; (0, 0) where unknown."""
    op, shape = layer.get("op", ""), layer.get("shape", "")
    m = LINEAR.match(shape)
    if m:
        n, k_in, _, k_out = map(int, m.groups())
        return 2.0 * n * k_in * k_out, elem_bytes * (n * k_in + n * k_out + k_in * k_out)
    m = SHAPE.match(shape)
    if not m:
        return 0.0, 0.0
    n, c, h, w, _, k, oh, ow = map(int, m.groups()[:8])
    x_bytes, y_bytes = elem_bytes * n * c * h * w, elem_bytes * n * k * oh * ow
    if not op.startswith("conv"):  # a pool or another op of one input and one output
        return 0.0, float(x_bytes + y_bytes)
    kh = int(m.group(9) or 1)
    kw = int(m.group(10) or kh)
    groups = int(m.group(12) or 1)
    macs = n * oh * ow * k * (c // groups) * kh * kw
    w_bytes = elem_bytes * k * (c // groups) * kh * kw
    z_bytes = y_bytes if "+add" in op else 0
    return 2.0 * macs, float(x_bytes + y_bytes + w_bytes + z_bytes)


def graph_times(run):
    """{(network, precision, batch): median ms per batch} of the run's CUDA-graph rows."""
    out, from_median = {}, set()
    for b in run.get("benchmarks", []):
        m = re.match(r"([\w.]+)/(\w+)/graph/batch:(\d+)", b.get("name", ""))
        median = b.get("aggregate_name") == "median"
        if not m or not (median or b.get("aggregate_name") is None):
            continue
        key = (m.group(1), m.group(2), int(m.group(3)))
        ms = b.get("ms_per_batch", b.get("real_time"))
        if ms is None or (key in from_median and not median):
            continue  # a median row wins over single repetitions, in any order
        out[key] = float(ms)
        if median:
            from_median.add(key)
    return out


def analyse(model, graph_ms, tflops, gbps, top):
    """One model's summary: graph and timed milliseconds, untimed ops, worst layers."""
    shape_us = {}
    timed_us, rows, untimed = 0.0, [], defaultdict(lambda: [0, 0.0])
    in_graph, shape_graph = 0, {}
    for layer in model["layers"]:
        key = (layer.get("shape"), layer.get("op"))
        us = float(layer.get("tuned_us", 0.0))
        if us > 0:
            shape_us[key] = us
            shape_graph[key] = bool(layer.get("tuned_in_graph", False))
        us = shape_us.get(key, us)
        in_graph += us > 0 and shape_graph.get(key, False)
        flops, nbytes = layer_cost(layer)
        bound = max(flops / (tflops * 1e6), nbytes / (gbps * 1e3))  # microseconds
        if us > 0:
            timed_us += us
            rows.append((us - bound, us, bound, layer))
        else:
            kind = layer.get("op", "?").split(" ")[0]
            untimed[kind][0] += 1
            untimed[kind][1] += bound
    rows.sort(key=lambda r: -r[0])
    return {"model": model["model"], "graph_ms": graph_ms, "timed_ms": timed_us / 1000.0,
            "timed_layers": len(rows), "timed_in_graph": in_graph,
            "outside_share": (graph_ms - timed_us / 1000.0) / graph_ms if graph_ms else math.nan,
            "untimed": {k: {"ops": v[0], "bound_ms": v[1] / 1000.0} for k, v in untimed.items()},
            "worst": [{"name": r[3].get("name"), "op": r[3].get("op"), "shape": r[3].get("shape"),
                       "us": r[1], "bound_us": r[2], "ratio": r[1] / r[2] if r[2] else math.inf,
                       "engine": r[3].get("engine")} for r in rows[:top]]}


def markdown(summaries, tflops, gbps):
    out = [f"Bounds at {tflops:g} TFLOP/s and {gbps:g} GB/s (2 bytes an element).", ""]
    for s in summaries:
        out.append(f"## {s['model']}")
        out.append("")
        out.append(f"Graph {s['graph_ms']:.3f} ms; the autotuned layers' own times "
                   f"{s['timed_ms']:.3f} ms; outside them {100 * s['outside_share']:.1f}%.")
        if s["timed_in_graph"]:
            out.append(f"{s['timed_in_graph']} of the {s['timed_layers']} timed layers' times are "
                       "CUDA-graph replays (autotune's graph round, tuned_in_graph); the rest "
                       "eager launches.")
        if s["outside_share"] < 0:
            out.append("(Each layer was timed alone, launch included: at small batches the "
                       "launches dominate and the layers' sum exceeds the graph's time.)")
        if s["untimed"]:
            parts = ", ".join(f"{k} x{v['ops']} (bound {v['bound_ms']:.3f} ms)"
                              for k, v in sorted(s["untimed"].items()))
            out.append(f"Untimed ops: {parts}.")
        out.append("")
        out.append("| layer | op | shape | us | bound us | x bound | engine |")
        out.append("|---|---|---|---:|---:|---:|---|")
        for w in s["worst"]:
            out.append(f"| {w['name']} | {w['op']} | {w['shape']} | {w['us']:.1f} | "
                       f"{w['bound_us']:.1f} | {w['ratio']:.1f} | {w['engine']} |")
        out.append("")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run")
    ap.add_argument("--model", default=".", help="a regular expression over 'net/prec/batch:N'")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--tflops", type=float, default=900.0)
    ap.add_argument("--gbps", type=float, default=4300.0)
    ap.add_argument("--out-md")
    args = ap.parse_args(argv)
    layers_path = re.sub(r"\.json$", "", args.run) + ".layers.json"
    path = args.run
    try:
        run = cp.read_benchmark_json(path)  # a run cut off before it closed its file, too
        path = layers_path
        with open(layers_path) as f:
            layers = json.load(f)
    except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
        print(f"layer_gaps: cannot read {path}: {e}", file=sys.stderr)
        return 2
    if args.tflops <= 0 or args.gbps <= 0 or args.top < 1:
        print("layer_gaps: --tflops, --gbps and --top must be positive", file=sys.stderr)
        return 2
    times = graph_times(run)
    summaries = []
    for model in layers.get("models", []):
        m = re.match(r"([\w.]+)/(\w+)/batch:(\d+)$", model.get("model", ""))
        if not m or model.get("mode") == "train" or not re.search(args.model, model["model"]):
            continue
        key = (m.group(1), m.group(2), int(m.group(3)))
        if key not in times:
            continue
        summaries.append(analyse(model, times[key], args.tflops, args.gbps, args.top))
    if not summaries:
        print("layer_gaps: no model of the layer table has a CUDA-graph time in the run",
              file=sys.stderr)
        return 1
    text = markdown(summaries, args.tflops, args.gbps)
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
