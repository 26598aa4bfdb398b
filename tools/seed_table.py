#!/usr/bin/env python3
"""Markdown table of cnnbench (e.g. on an H200) next to the seed's MXNet inference images/s.

The seed (results/reference/mxnet_inference_seed.csv; a copy of shared/reference/) holds images/s
of MXNet's example/image-classification/benchmark_score.py: six networks (alexnet, vgg16,
inception_bn, inception_v3, resnet50, resnet152) at batches 1 to 32 on several GPUs, from several
sources (columns source,gpu,gpus,network,batch,images_per_sec,note). configs/mxnet_benchmark_score.yaml
runs the same sweep with cnnbench.

Rows: network x batch, networks in the seed's order; batches are those of the seed and of our runs
(--batches keeps a subset). Our names equal the seed's except alexnet: the seed's alexnet is MXNet's
symbols/alexnet.py, which is our alexnet_lrn. Input sizes are benchmark_score.py's: 299 for
inception_v3, 224 for the others, so alexnet_lrn is read at 224 (a "/size:224" benchmark, since
its default is 227); results at other sizes are left out.

Columns: our fp32 and fp16 images/s (graph mode; Google Benchmark's median aggregate where present,
else the median of the repetitions, read with tools/compare_pytorch.py's reader), then one column
per (seed GPU, seed source) in --gpus order and the CSV's source order: a GPU with several sources
(the Tesla P100 has LeaderGPU's own run and the MXNet page LeaderGPU quotes) gets one column per
source, so nothing is chosen away; then our fp16 over the best seed value of the row. Missing cells
are "—", failed benchmarks "error".

Several --cnnbench files are merged in order: a later file's result replaces an earlier one's,
except that an error never replaces a measurement.

--mode train reads our train rows ("<network>/<precision>/train/batch:N", configs/
mxnet_train_imagenet.yaml) beside the training seed (results/reference/mxnet_training_seed.csv,
MXNet's train_imagenet.py; the default --seed in this mode): a seed row whose note says "actual
batch = 8*batch" (its AlexNet rows) is read at 8 times its batch column, and seed rows without a
figure (an out-of-memory) are left out. The README markers are then <!-- train-seed-table:begin
--> and <!-- train-seed-table:end -->.

--readme FILE replaces what lies between the lines <!-- seed-table:begin --> and
<!-- seed-table:end --> with the table (exit 2, file untouched, if the markers are not there
exactly once each, in that order). --out FILE writes the table alone. Stdlib only; importable.

Exit status: 0 done; 2 an input could not be read, a --gpus name is not in the seed, or the README
markers are missing.
"""
import argparse
import csv
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402  (the Google Benchmark JSON reader)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SEED = os.path.join(ROOT, "results", "reference", "mxnet_inference_seed.csv")
DEFAULT_TRAIN_SEED = os.path.join(ROOT, "results", "reference", "mxnet_training_seed.csv")
DEFAULT_GPUS = "Tesla P100,GTX 1080 Ti"
BEGIN_MARKER = "<!-- seed-table:begin -->"
END_MARKER = "<!-- seed-table:end -->"
MISSING = "—"
PRECISIONS = ("fp32", "fp16")

SEED_TO_OURS = {"alexnet": "alexnet_lrn"}  # every other seed name is ours as it is
SEED_INPUT_SIZE = {"inception_v3": 299}    # benchmark_score.py: 299 for inception-v3, else 224
# Our networks' default input sizes (networks/registry.cpp): a benchmark name without "/size:S"
# ran at this size.
OUR_DEFAULT_SIZE = {"alexnet_lrn": 227, "inception_v3": 299, "efficientnet_b1": 240,
                    "efficientnet_b2": 260, "efficientnet_b3": 300, "efficientnet_b4": 380,
                    "efficientnet_b5": 456, "efficientnet_b6": 528, "efficientnet_b7": 600}


class InputError(Exception):
    """An input that cannot be used; main() reports it and exits 2."""


# --------------------------------------------------------------------------------------------
# cnnbench results
# --------------------------------------------------------------------------------------------
def parse_key(name):
    """'alexnet_lrn/fp16/graph/batch:8/size:224/manual_time' -> (alexnet_lrn, fp16, graph, 8, 224).

    Without a "/size:S" part the size is the network's default. None for names of another shape.
    """
    key = cp.parse_name(name)
    if key is None:
        return None
    size = OUR_DEFAULT_SIZE.get(key[0], 224)
    for part in name.split("/")[4:]:
        if part.startswith("size:"):
            digits = ""
            for ch in part[len("size:"):]:
                if not ch.isdigit():
                    break
                digits += ch
            if digits:
                size = int(digits)
            break
    return key + (size,)


def load_cnnbench_sized(path):
    """(context, {(network, precision, mode, batch, size): Cell}) of one Google Benchmark JSON.

    The same rules as compare_pytorch.load_cnnbench (median aggregate first, else the median of
    the repetitions; any failed repetition makes the cell an error), with the input size kept in
    the key: load_cnnbench's key has no size, so one network run at two sizes would mix.
    """
    doc = cp.read_benchmark_json(path)
    groups = {}
    for e in doc.get("benchmarks", []):
        key = parse_key(e.get("run_name") or e.get("name", ""))
        if key is None:
            continue
        g = groups.setdefault(key, {"iters": [], "median": None, "errors": []})
        if e.get("error_occurred"):
            g["errors"].append(str(e.get("error_message") or "error"))
        elif e.get("run_type", "iteration") == "aggregate":
            if e.get("aggregate_name") == "median":
                g["median"] = cp.entry_img_s(e)
        elif e.get("run_type", "iteration") == "iteration":
            v = cp.entry_img_s(e)
            if v is not None:
                g["iters"].append(v)
    cells = {}
    for key, g in groups.items():
        iters = sorted(g["iters"])
        median = g["median"]
        if median is None and iters:
            median = statistics.median(iters)
        if g["errors"] or median is None:
            cells[key] = cp.Cell(error=g["errors"][0] if g["errors"] else "no measurement")
        else:
            cells[key] = cp.Cell(median, iters[0] if iters else None,
                                 iters[-1] if iters else None, n=len(iters))
    context = dict(doc.get("context", {}))
    if doc.get("truncated"):
        context["truncated"] = True
    return context, cells


def merge_cnnbench(paths):
    """([(file name, context)], merged cells): later files win, but never with an error."""
    contexts, merged = [], {}
    for path in paths:
        try:
            context, cells = load_cnnbench_sized(path)
        except (OSError, ValueError) as e:
            raise InputError(f"cannot read cnnbench results {path}: {e}") from e
        contexts.append((os.path.basename(path), context))
        for key, cell in cells.items():
            old = merged.get(key)
            if old is not None and old.ok and not cell.ok:
                continue
            merged[key] = cell
    return contexts, merged


# --------------------------------------------------------------------------------------------
# The seed
# --------------------------------------------------------------------------------------------
def load_seed(path):
    """{"networks": [seed names in order], "sources": {gpu: [sources in order]},
    "values": {(gpu, source, network, batch): img/s}} from the seed CSV."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise InputError(f"cannot read the seed CSV {path}: {e}") from e
    need = {"source", "gpu", "network", "batch", "images_per_sec"}
    if not rows or not need <= set(rows[0]):
        raise InputError(f"{path} is not the seed CSV: it needs the columns "
                         f"{', '.join(sorted(need))}")
    networks, sources, values = [], {}, {}
    for i, r in enumerate(rows, start=2):
        if not (r.get("images_per_sec") or "").strip():
            continue  # no figure: the run failed (an out-of-memory, say)
        try:
            batch, img_s = int(r["batch"]), float(r["images_per_sec"])
        except (TypeError, ValueError) as e:
            raise InputError(f"{path} line {i}: {e}") from e
        if "actual batch = 8*batch" in (r.get("note") or ""):
            batch *= 8
        if r.get("gpus", "1").strip() not in ("", "1"):
            continue  # multi-GPU rows are not comparable with one GPU
        if r["network"] not in networks:
            networks.append(r["network"])
        src = sources.setdefault(r["gpu"], [])
        if r["source"] not in src:
            src.append(r["source"])
        values[(r["gpu"], r["source"], r["network"], batch)] = img_s
    return {"networks": networks, "sources": sources, "values": values}


# --------------------------------------------------------------------------------------------
# Table
# --------------------------------------------------------------------------------------------
def seed_columns(seed, gpus):
    """[(gpu, source)] for the requested GPUs; InputError for a GPU the seed does not have."""
    cols = []
    for gpu in gpus:
        if gpu not in seed["sources"]:
            raise InputError(f"the seed has no GPU {gpu!r}; it has: "
                             f"{', '.join(sorted(seed['sources']))}")
        cols += [(gpu, src) for src in seed["sources"][gpu]]
    return cols


def build_rows(cells, seed, columns, batches=None, mode="graph"):
    """One dict per (seed network, batch): our cells, seed values and the fp16 speed-up."""
    rows = []
    for net in seed["networks"]:
        ours = SEED_TO_OURS.get(net, net)
        size = SEED_INPUT_SIZE.get(net, 224)
        found = {k[3] for k in cells
                 if k[0] == ours and k[1] in PRECISIONS and k[2] == mode and k[4] == size}
        found |= {k[3] for k in seed["values"] if k[2] == net and k[:2] in columns}
        for b in sorted(found):
            if batches is not None and b not in batches:
                continue
            our = {p: cells.get((ours, p, mode, b, size)) for p in PRECISIONS}
            vals = [seed["values"].get((gpu, src, net, b)) for gpu, src in columns]
            best = max((v for v in vals if v is not None), default=None)
            fp16 = our["fp16"]
            speedup = fp16.img_s / best if fp16 is not None and fp16.ok and best else None
            rows.append({"seed_network": net, "network": ours, "size": size, "batch": b,
                         "ours": our, "seed": vals, "speedup": speedup})
    return rows


def fmt_value(v):
    return MISSING if v is None else cp.fmt_num(v)


def fmt_cell(c):
    if c is None:
        return MISSING
    return cp.fmt_num(c.img_s) if c.ok else "error"


def source_label(source):
    """'MXNet official page (via LeaderGPU article)' -> 'MXNet official page, via LeaderGPU
    article' (no parentheses inside the header's own)."""
    return source.replace(" (", ", ").replace("(", "").replace(")", "")


def short_gpu(name):
    return name[len("NVIDIA "):] if name.startswith("NVIDIA ") else name


def our_gpu(contexts):
    names = []
    for _, ctx in contexts:
        g = ctx.get("gpu_name")
        if g and short_gpu(g) not in names:
            names.append(short_gpu(g))
    return " / ".join(names) if names else "cnnbench"


def join_words(words):
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def render(rows, contexts, columns, gpus, seed_path, mode="graph"):
    """The Markdown block: title, table, footnotes."""
    gpu = our_gpu(contexts)
    train = mode == "train"
    lines = [f"**{gpu} (cnnbench) next to the seed's {join_words(list(gpus))}**: "
             f"{'training' if train else 'inference'} images/s, batches of random images", ""]
    header = ["network", "input (px)", "batch"]
    header += [f"{gpu} {p} img/s (cnnbench, {'train step' if train else 'graph'}, median) ¹"
               for p in PRECISIONS]
    header += [f"{g} img/s (seed: {source_label(src)}) ²" for g, src in columns]
    header += [f"{gpu} fp16 / best seed (x, speed-up) ³"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|---|---:|---:|" + "---:|" * (len(header) - 3))
    for r in rows:
        name = r["network"] if r["network"] == r["seed_network"] else \
            f"{r['network']} (seed: {r['seed_network']})"
        cells = [name, str(r["size"]), str(r["batch"])]
        cells += [fmt_cell(r["ours"][p]) for p in PRECISIONS]
        cells += [fmt_value(v) for v in r["seed"]]
        cells.append(f"{r['speedup']:.1f}x" if r["speedup"] is not None else MISSING)
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    multi = [g for g in gpus if sum(1 for c in columns if c[0] == g) > 1]
    if train:
        lines.append("¹ cnnbench: one training step (forward with BatchNorm in training mode, "
                     "softmax cross-entropy, backward, SGD with momentum), captured whole in a "
                     "CUDA graph and replayed; Google Benchmark's median aggregate over the "
                     "repetitions. Inputs at 299 px for inception_v3 and 224 px for the others. "
                     "alexnet_lrn mirrors MXNet's symbol; resnet50 and inception_v3 are "
                     "torchvision's definitions, like-sized, not identical, networks.")
    else:
        lines.append("¹ cnnbench: CUDA-graph replays, Google Benchmark's median aggregate over "
                     "the repetitions (else their median); inputs as MXNet's benchmark_score.py "
                     "feeds them, 299 px for inception_v3 and 224 px for the others (alexnet_lrn "
                     "at 224, not its default 227). alexnet_lrn and inception_bn mirror MXNet's "
                     "symbols; vgg16, inception_v3, resnet50 and resnet152 are torchvision's "
                     "definitions (MXNet's resnet symbol is the pre-activation variant and its "
                     "inception-v3 symbol differs in detail), so those rows compare like-sized, "
                     "not identical, networks.")
    lines.append("")
    script = ("MXNet's train_imagenet.py on synthetic data (float32; AlexNet's batch column x 8 "
              "read as the real batch)") if train else (
                  "MXNet's benchmark_score.py (float32, the script's default)")
    seed_note = (f"² Seed: `{display_path(seed_path)}`, one GPU, {script}, one column per source "
                 "as the CSV names it.")
    if multi:
        seed_note += (f" {join_words(multi)} {'has' if len(multi) == 1 else 'have'} more than "
                      "one source: each is shown, none is picked.")
    lines.append(seed_note)
    lines.append("")
    lines.append("³ Our fp16 images/s divided by the highest seed value in the row (any GPU, any "
                 "source shown); the seed ran float32.")
    lines.append("")
    for fname, ctx in contexts:
        keys = [k for k in ("gpu_name", "date", "cudnn_version_loaded", "cnnbench_git")
                if k in ctx]
        lines.append(f"- cnnbench run `{fname}`: " +
                     (", ".join(f"{k}={ctx[k]}" for k in keys) or "no context") +
                     (" (**cut off**: only the benchmarks it finished)"
                      if ctx.get("truncated") else ""))
    errors = [(r, p) for r in rows for p in PRECISIONS
              if r["ours"][p] is not None and not r["ours"][p].ok]
    for r, p in errors:
        lines.append(f"- error: {r['network']} {p} batch {r['batch']}: {r['ours'][p].error}")
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def display_path(path):
    """`path` relative to the repository when it lies inside it, else as given."""
    full = os.path.abspath(path)
    return os.path.relpath(full, ROOT) if os.path.commonpath([full, ROOT]) == ROOT else path


def build_table(cnnbench_paths, seed_path=DEFAULT_SEED, gpus=DEFAULT_GPUS, batches=None,
                mode="graph"):
    """The Markdown block for these inputs (gpus: a comma-separated string or a list)."""
    if isinstance(gpus, str):
        gpus = [g.strip() for g in gpus.split(",") if g.strip()]
    contexts, cells = merge_cnnbench(cnnbench_paths)
    seed = load_seed(seed_path)
    columns = seed_columns(seed, gpus)
    rows = build_rows(cells, seed, columns, batches, mode)
    return render(rows, contexts, columns, gpus, seed_path, mode)


# --------------------------------------------------------------------------------------------
# README
# --------------------------------------------------------------------------------------------
def replace_between_markers(text, block, begin=BEGIN_MARKER, end=END_MARKER):
    """`text` with the lines between the begin and end marker lines replaced by `block`."""
    lines = text.splitlines(keepends=True)
    begins = [i for i, line in enumerate(lines) if line.strip() == begin]
    ends = [i for i, line in enumerate(lines) if line.strip() == end]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise InputError(
            f"needs the line {begin} and, after it, the line {end}, each exactly "
            f"once (found {len(begins)} begin and {len(ends)} end marker lines"
            + (", the end before the begin" if len(begins) == len(ends) == 1 else "") + ")")
    b, e = begins[0], ends[0]
    if not lines[b].endswith("\n"):
        lines[b] += "\n"
    return "".join(lines[:b + 1]) + "\n" + block + "\n" + "".join(lines[e:])


def markers(mode):
    if mode == "train":
        return "<!-- train-seed-table:begin -->", "<!-- train-seed-table:end -->"
    return BEGIN_MARKER, END_MARKER


def update_readme(path, block, mode="graph"):
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e}") from e
    try:
        new = replace_between_markers(text, block, *markers(mode))
    except InputError as e:
        raise InputError(f"{path}: {e}") from e
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cnnbench", action="append", required=True,
                    help="Google Benchmark JSON from cnnbench (repeatable; later files win)")
    ap.add_argument("--mode", default="graph", choices=("graph", "train"),
                    help="our inference (graph) rows or training-step rows")
    ap.add_argument("--seed", default=None,
                    help="seed CSV (default: results/reference/mxnet_inference_seed.csv, or "
                         "mxnet_training_seed.csv with --mode train)")
    ap.add_argument("--gpus", default=DEFAULT_GPUS,
                    help=f"comma-separated seed GPUs, as the CSV names them (default: {DEFAULT_GPUS})")
    ap.add_argument("--batches", default=None, help="comma-separated batches to keep (default: all)")
    ap.add_argument("--out", default=None, help="also write the table here")
    ap.add_argument("--readme", default=None,
                    help="replace the lines between the mode's markers in this file")
    args = ap.parse_args(argv)
    seed = args.seed or (DEFAULT_TRAIN_SEED if args.mode == "train" else DEFAULT_SEED)
    batches = None
    if args.batches:
        try:
            batches = {int(b) for b in args.batches.split(",") if b.strip()}
        except ValueError:
            ap.error(f"--batches must be comma-separated integers, not {args.batches!r}")
    try:
        block = build_table(args.cnnbench, seed, args.gpus, batches, args.mode)
        if args.readme:
            update_readme(args.readme, block, args.mode)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(block, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
