#!/usr/bin/env python3
"""Side-by-side table of cnnbench against PyTorch for one network and precision.

Inputs:
  --cnnbench X.json  Google Benchmark JSON from `cnnbench --benchmark_out=X.json`: benchmark names
                     "<network>/<precision>/<mode>/batch:<N>" (mode graph|eager), counters such as
                     img_per_s as top-level numbers, our device/library versions in "context".
  --pytorch Y.json   tools/pytorch_baseline.py output, or the reference file
                     shared/reference/pytorch_h200_*.json (rows with model/mode/batch/ms/img_s;
                     the reference lacks ms_min/ms_max and has graph rows for a few batches only).

cnnbench values: with repetitions, Google Benchmark writes one "iteration" entry per repetition
plus "aggregate" entries (mean/median/stddev/cv); the median aggregate is used when present, else
the median over the iteration entries; the min-max range always comes from the iteration entries.
Entries with "error_occurred" show as "error" cells.

--check exits 1 unless cnnbench graph img/s >= PyTorch graph img/s (--against eager: PyTorch
eager's) at every batch where both exist, and >= 1.5x (--batch1-ratio) at batch 1 (which must be
present in both). Stdlib only; importable.

A network measured at several input sizes (YOLOR at 640 and 1280, StyleGAN3 at 256 and 1024):
--input-size picks one. cnnbench names carry "/size:N" where N is not the network's default
(--default-size says what a name without it means); PyTorch rows carry "input_size".
--pytorch-model names the PyTorch rows where their model name differs ("stylegan2_f_1024").
"""
import argparse
import json
import statistics
import sys

# PyTorch row "mode" names for (precision, cnnbench mode); as written by pytorch_baseline.py and
# found in the reference file (which also has plain "fp32" eager rows).
PYTORCH_MODES = {
    "fp16": {"eager": "fp16cl", "graph": "fp16cl_graph"},
    "bf16": {"eager": "bf16cl", "graph": "bf16cl_graph"},
    "fp32": {"eager": "fp32", "graph": "fp32_graph"},
    "tf32": {"eager": "tf32", "graph": "tf32_graph"},
}
CONTEXT_KEYS = ("date", "host_name", "gpu_name", "gpu_sm_count", "gpu_memory_mib",
                "gpu_sm_clock_mhz", "gpu_mem_clock_mhz", "driver_version", "cuda_runtime_version",
                "cudnn_version_loaded", "cudnn_version_compiled", "cudnn_library_path",
                "cublas_version", "cnnbench_version", "cnnbench_git")
BATCH1_MIN_RATIO = 1.5
_TIME_UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


class Cell:
    """One measured value: median img/s with an optional min-max range, or an error."""

    def __init__(self, img_s=None, lo=None, hi=None, error=None, n=0):
        self.img_s, self.lo, self.hi, self.error, self.n = img_s, lo, hi, error, n

    @property
    def ok(self):
        return self.error is None and self.img_s is not None

    def __repr__(self):
        return f"Cell(img_s={self.img_s}, lo={self.lo}, hi={self.hi}, error={self.error!r})"


# --------------------------------------------------------------------------------------------
# Google Benchmark JSON
# --------------------------------------------------------------------------------------------
def parse_name(name):
    """'resnet50/fp16/graph/batch:32[/real_time][_median]' -> ('resnet50', 'fp16', 'graph', 32).

    Returns None for names of another shape.
    """
    parts = name.split("/")
    if len(parts) < 4:
        return None
    batch = None
    for p in parts[3:]:
        if p.startswith("batch:"):
            digits = ""
            for ch in p[len("batch:"):]:  # stop at an aggregate suffix such as "_median"
                if not ch.isdigit():
                    break
                digits += ch
            batch = int(digits) if digits else None
            break
    if batch is None:
        return None
    return parts[0], parts[1], parts[2], batch


def name_size(name):
    """The N of a "/size:N" part of a benchmark name, or None."""
    for p in name.split("/")[3:]:
        if p.startswith("size:"):
            digits = ""
            for ch in p[len("size:"):]:
                if not ch.isdigit():
                    break
                digits += ch
            return int(digits) if digits else None
    return None


def entry_img_s(e):
    """img/s of one entry: its img_per_s counter, else batch / real_time."""
    if isinstance(e.get("img_per_s"), (int, float)):
        return float(e["img_per_s"])
    t, batch = e.get("real_time"), e.get("batch")
    scale = _TIME_UNIT_S.get(e.get("time_unit", "ns"))
    if isinstance(t, (int, float)) and t > 0 and isinstance(batch, (int, float)) and scale:
        return float(batch) / (t * scale)
    return None


def read_benchmark_json(path):
    """A Google Benchmark JSON document, also when the run was cut off before it closed the file.

    Google Benchmark writes each finished benchmark as it goes and closes the "benchmarks" list
    at the end; a killed run leaves the list open. Then every complete entry is kept, and the
    document says so under "truncated".
    """
    with open(path) as f:
        text = f.read()
    if path.endswith(".jsonl"):
        return read_results_lines(text, path)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    end = text.rfind("\n    }")  # the last complete benchmark entry
    if end < 0 or '"benchmarks"' not in text:
        raise ValueError(f"{path} is not Google Benchmark JSON, nor a cut-off one")
    doc = json.loads(text[: end + len("\n    }")] + "\n  ]\n}\n")
    doc["truncated"] = True
    return doc


def read_results_lines(text, path="results lines"):
    """A cnnbench results-lines file (cnnbench --results_lines, harness/jsonl.h) as a Google
    Benchmark document: the first line's context, one benchmark entry per line. A last line cut
    off by a killed run is dropped and the document says "truncated". The batches a max-batch
    search tried ({"max_batch_attempt": {...}} lines) go to the document's "max_batch_attempts"
    list, not among the benchmarks."""
    doc = {"context": {}, "benchmarks": [], "max_batch_attempts": []}
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1 or not any(x.strip() for x in lines[i + 1:]):
                doc["truncated"] = True  # the line the run was writing when it died
                break
            raise ValueError(f"{path}, line {i + 1}: not JSON")
        if "context" in obj and len(obj) == 1:
            doc["context"] = obj["context"]
        elif "max_batch_attempt" in obj and len(obj) == 1:
            doc["max_batch_attempts"].append(obj["max_batch_attempt"])
        else:
            doc["benchmarks"].append(obj)
    return doc


def load_cnnbench(path, input_size=None, default_size=None):
    """(context dict, {(network, precision, mode, batch): Cell}); with input_size, only the
    entries at that size (a name without "/size:" is at default_size)."""
    doc = read_benchmark_json(path)
    groups = {}  # key -> {"iters": [img_s], "median": img_s, "errors": [msg]}
    for e in doc.get("benchmarks", []):
        name = e.get("run_name") or e.get("name", "")
        key = parse_name(name)
        if key is None:
            continue
        if input_size is not None:
            size = name_size(name)
            if (size if size is not None else default_size) != input_size:
                continue
        g = groups.setdefault(key, {"iters": [], "median": None, "errors": []})
        if e.get("error_occurred"):
            g["errors"].append(str(e.get("error_message") or "error"))
            continue
        run_type = e.get("run_type", "iteration")
        if run_type == "aggregate":
            if e.get("aggregate_name") == "median":
                g["median"] = entry_img_s(e)
        elif run_type == "iteration":
            v = entry_img_s(e)
            if v is not None:
                g["iters"].append(v)
    cells = {}
    for key, g in groups.items():
        iters = g["iters"]
        median = g["median"] if g["median"] is not None else (
            statistics.median(iters) if iters else None)
        if g["errors"] or median is None:  # any failed repetition makes the whole cell an error
            cells[key] = Cell(error=g["errors"][0] if g["errors"] else "no measurement")
            continue
        cells[key] = Cell(median, min(iters) if iters else None, max(iters) if iters else None,
                          n=len(iters))
    context = dict(doc.get("context", {}))
    if doc.get("truncated"):
        context["truncated"] = True
    return context, cells


# --------------------------------------------------------------------------------------------
# PyTorch JSON
# --------------------------------------------------------------------------------------------
def load_pytorch(path, network, precision, input_size=None):
    """(header dict, {(mode, batch): Cell}) for `network`; mode is our "eager"/"graph". With
    input_size, rows of another "input_size" are left out."""
    with open(path) as f:
        doc = json.load(f)
    wanted = {v: k for k, v in PYTORCH_MODES[precision].items()}  # "fp16cl" -> "eager"
    cells = {}
    for r in doc.get("rows", []):
        if r.get("model") != network or r.get("mode") not in wanted:
            continue
        if input_size is not None and r.get("input_size", input_size) != input_size:
            continue
        key = (wanted[r["mode"]], int(r["batch"]))
        if r.get("error"):
            cells[key] = Cell(error=str(r["error"]))
            continue
        img_s = r.get("img_s")
        if img_s is None and r.get("ms"):
            img_s = r["batch"] / r["ms"] * 1e3
        lo = r["batch"] / r["ms_max"] * 1e3 if r.get("ms_max") else None  # slowest rep
        hi = r["batch"] / r["ms_min"] * 1e3 if r.get("ms_min") else None
        cells[key] = Cell(img_s, lo, hi, n=len(r["reps"]) if isinstance(r.get("reps"), list) else 0)
    header = {k: v for k, v in doc.items() if k != "rows"}
    return header, cells


# --------------------------------------------------------------------------------------------
# Table, check, rendering
# --------------------------------------------------------------------------------------------
def build_rows(cb_cells, pt_cells, network, precision):
    """One dict per batch present on either side, in batch order."""
    batches = {k[3] for k in cb_cells if k[0] == network and k[1] == precision}
    batches |= {b for (_, b) in pt_cells}
    rows = []
    for b in sorted(batches):
        cb_g = cb_cells.get((network, precision, "graph", b))
        pt_g = pt_cells.get(("graph", b))
        pt_e = pt_cells.get(("eager", b))
        ratio = cb_g.img_s / pt_g.img_s if cb_g and pt_g and cb_g.ok and pt_g.ok else None
        ratio_e = cb_g.img_s / pt_e.img_s if cb_g and pt_e and cb_g.ok and pt_e.ok else None
        rows.append({"batch": b, "cb_graph": cb_g, "cb_eager": cb_cells.get(
            (network, precision, "eager", b)), "pt_eager": pt_e,
            "pt_graph": pt_g, "ratio": ratio, "ratio_eager": ratio_e})
    return rows


def check(rows, batch1_min_ratio=BATCH1_MIN_RATIO, against="graph"):
    """(ok, [failure messages]) for the --check criterion: cnnbench graph against PyTorch's
    `against` mode (graph or eager)."""
    failures, compared = [], 0
    ratio_key = "ratio" if against == "graph" else "ratio_eager"
    for r in rows:
        cb, pt, b = r["cb_graph"], r["pt_" + against], r["batch"]
        if pt is None or not pt.ok:
            continue  # nothing to beat at this batch
        if cb is None or not cb.ok:
            failures.append(f"batch {b}: PyTorch {against} has {pt.img_s:.1f} img/s but cnnbench "
                            f"graph has {'an error' if cb else 'no result'}")
            continue
        compared += 1
        need = batch1_min_ratio if b == 1 else 1.0
        if r[ratio_key] < need:
            failures.append(f"batch {b}: cnnbench graph {cb.img_s:.1f} img/s is "
                            f"{r[ratio_key]:.2f}x PyTorch {against} {pt.img_s:.1f} img/s "
                            f"(needs >= {need:g}x)")
    b1 = next((r for r in rows if r["batch"] == 1), None)
    if b1 is None or b1[ratio_key] is None:
        if not any(m.startswith("batch 1:") for m in failures):
            failures.append(f"batch 1: needs results from both cnnbench graph and PyTorch "
                            f"{against}")
    if compared == 0:
        failures.append(f"no batch has both a cnnbench graph and a PyTorch {against} result")
    return not failures, failures


def fmt_num(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def fmt_cell(c, with_range=True):
    if c is None:
        return "–"
    if not c.ok:
        return "error"
    s = fmt_num(c.img_s)
    if with_range and c.lo is not None and c.hi is not None and c.n != 1:  # no range of one
        s += f" ({fmt_num(c.lo)}–{fmt_num(c.hi)})"
    return s


def render_markdown(rows, context, pt_header, network, precision, input_size=None):
    size = f" at {input_size}" if input_size is not None else ""
    lines = [f"## {network} {precision}{size}: cnnbench vs PyTorch (images/s)", ""]
    lines.append("cnnbench: " + ", ".join(f"{k}={context[k]}" for k in CONTEXT_KEYS
                                         if k in context))
    lines.append("PyTorch: " + ", ".join(f"{k}={pt_header[k]}" for k in
                                        ("torch", "torchvision", "cudnn", "gpu", "date")
                                        if k in pt_header))
    if context.get("truncated"):
        lines.append("")
        lines.append("**The cnnbench run was cut off before it finished: only the benchmarks it "
                     "completed are shown.**")
    lines.append("")
    lines.append("| batch | cnnbench graph img/s (median, min–max) | cnnbench eager img/s | "
                 "PyTorch eager img/s | PyTorch graph img/s | cnnbench/PyTorch-graph | "
                 "cnnbench/PyTorch-eager |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else "–"
        ratio_e = f"{r['ratio_eager']:.2f}x" if r.get("ratio_eager") is not None else "–"
        lines.append(f"| {r['batch']} | {fmt_cell(r['cb_graph'])} | {fmt_cell(r['cb_eager'])} | "
                     f"{fmt_cell(r['pt_eager'])} | {fmt_cell(r['pt_graph'])} | {ratio} | "
                     f"{ratio_e} |")
    errors = [(r["batch"], name, r[key].error) for r in rows
              for key, name in (("cb_graph", "cnnbench graph"), ("cb_eager", "cnnbench eager"),
                                ("pt_eager", "PyTorch eager"), ("pt_graph", "PyTorch graph"))
              if r[key] is not None and not r[key].ok]
    if errors:
        lines.append("")
        lines += [f"- error at batch {b}, {name}: {msg}" for b, name, msg in errors]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description="cnnbench vs PyTorch side-by-side table.")
    ap.add_argument("--cnnbench", required=True, help="Google Benchmark JSON from cnnbench")
    ap.add_argument("--pytorch", required=True, help="pytorch_baseline.py JSON or reference file")
    ap.add_argument("--network", default="resnet50")
    ap.add_argument("--precision", default="fp16", choices=sorted(PYTORCH_MODES))
    ap.add_argument("--out-md", default=None, help="also write the markdown table here")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless cnnbench graph >= PyTorch graph at every common batch "
                         "and >= --batch1-ratio x at batch 1")
    ap.add_argument("--against", choices=("graph", "eager"), default="graph",
                    help="the PyTorch mode --check compares cnnbench graph with (default graph)")
    ap.add_argument("--input-size", type=int, default=None,
                    help="only this input size (cnnbench's /size:N, PyTorch's input_size)")
    ap.add_argument("--default-size", type=int, default=None,
                    help="the size of a cnnbench name without /size:N (the network's default)")
    ap.add_argument("--pytorch-model", default=None,
                    help="the PyTorch rows' model name, where not --network")
    ap.add_argument("--batch1-ratio", type=float, default=BATCH1_MIN_RATIO,
                    help=f"the speed-up --check demands at batch 1 (default {BATCH1_MIN_RATIO}; "
                         "the zoo's goal is 1.3)")
    args = ap.parse_args(argv)
    try:
        context, cb_cells = load_cnnbench(args.cnnbench, args.input_size, args.default_size)
        pt_header, pt_cells = load_pytorch(args.pytorch, args.pytorch_model or args.network,
                                           args.precision, args.input_size)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: cannot read inputs: {e}", file=sys.stderr)
        return 2
    rows = build_rows(cb_cells, pt_cells, args.network, args.precision)
    md = render_markdown(rows, context, pt_header, args.network, args.precision, args.input_size)
    print(md, end="")
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(md)
    if not rows:
        print(f"warning: no results for {args.network} {args.precision} in either file",
              file=sys.stderr)
    if args.check:
        ok, failures = check(rows, args.batch1_ratio, args.against)
        for msg in failures:
            print(f"check FAILED: {msg}")
        print("check passed" if ok else "check failed")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
