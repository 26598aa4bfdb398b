#!/usr/bin/env python3
"""PyTorch peer baseline: torchvision models in fp16 channels_last inference, eager and CUDA graph.

Meant to run on the same GPU, in the same device session, as the cnnbench sweep it is compared with
(tools/compare_pytorch.py reads both). Settings: weights=None (random init; speed does not depend
on the values), eval(), .half(), channels_last, torch.backends.cudnn.benchmark=True, everything
under torch.inference_mode(), input ~N(0,1).

Modes (row "mode" names match shared/reference/pytorch_h200_*.json):
  eager  -> "fp16cl"        each iteration is a plain model(x) call
  graph  -> "fp16cl_graph"  the forward captured once in a torch.cuda.CUDAGraph (after warm-up on a
                            side stream, so cuDNN autotuning happens outside the capture), replayed

Timing per (model, mode, batch): warm-up of >= --warmup-iters iterations and >= --warmup-s seconds;
then --reps repetitions, each timing k back-to-back iterations between two CUDA events, k chosen so
that a repetition lasts >= --rep-s. Row: median/min/max ms per iteration over repetitions,
img_s = batch / median, peak_mib = torch.cuda.max_memory_allocated() (reset before the row; it
includes the model's weights, which stay allocated).

Models: any torchvision classifier, among them all of our torchvision-defined networks (alexnet,
vgg16, vgg16_bn, vgg19, vgg19_bn, inception_v3, resnet50, resnet152, efficientnet_b0 ... b7).
inception_v3 is built as ours is, without the AuxLogits head. Each model runs at its own default
input size unless --input-size is given: 299 for inception_v3, 224/240/260/300/380/456/528/600 for
efficientnet_b0..b7, 224 otherwise (DEFAULT_INPUT_SIZE). Every row carries its "input_size".

Usage: python3 tools/pytorch_baseline.py --out results/pytorch.json [--models resnet50,resnet152]
       [--batches 1,8,32] [--modes eager,graph] [--reps 5] [--input-size N]
Needs torch and torchvision with a CUDA GPU.
"""
import argparse
import datetime
import gc
import json
import math
import os
import statistics
import sys
import time

import torch
import torchvision

MODE_NAMES = {"eager": "fp16cl", "graph": "fp16cl_graph"}
# Default input sizes (shared/reference/networks.md sections 5 and 7); every other model: 224.
DEFAULT_INPUT_SIZE = {"inception_v3": 299, "efficientnet_b0": 224, "efficientnet_b1": 240,
                      "efficientnet_b2": 260, "efficientnet_b3": 300, "efficientnet_b4": 380,
                      "efficientnet_b5": 456, "efficientnet_b6": 528, "efficientnet_b7": 600}
# Constructor arguments besides weights=None. init_weights is given because those constructors
# warn otherwise. inception_v3: no AuxLogits head, as our network (inference never runs it, but
# it would hold weights), and init_weights=False: the values do not matter for speed and the
# truncated-normal init is slow.
MODEL_KWARGS = {"inception_v3": {"aux_logits": False, "init_weights": False},
                "googlenet": {"init_weights": True}}
# Our networks with no torchvision counterpart (MXNet symbols), for a clearer error.
NOT_IN_TORCHVISION = {"alexnet_lrn": "MXNet's symbols/alexnet.py",
                      "inception_bn": "MXNet's symbols/inception-bn.py"}


def input_size_for(name, override=None):
    """The image side for model `name`: `override` if given, else its default."""
    return override or DEFAULT_INPUT_SIZE.get(name, 224)


def parse_list(text, conv=str):
    return [conv(t.strip()) for t in text.split(",") if t.strip()]


def build_model(name, device):
    model = getattr(torchvision.models, name)(weights=None, **MODEL_KWARGS.get(name, {}))
    return model.eval().to(device=device, dtype=torch.half, memory_format=torch.channels_last)


def make_step(model, x, mode):
    """A no-argument callable that runs one iteration of `mode` on the current stream."""
    if mode == "eager":
        return lambda: model(x)
    # Warm up on a side stream (cuDNN benchmark picks algorithms there, and the allocator's
    # state settles), then capture one forward; replay reruns it with the same buffers.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model(x)  # the output stays alive in the graph's private memory pool
    return graph.replay


def time_iterations(step, k):
    """Milliseconds per iteration of k back-to-back calls, timed with CUDA events."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(k):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / k


def measure(step, reps, warmup_iters, warmup_s, rep_s):
    """(list of per-repetition ms/iteration, k)."""
    t0, n = time.perf_counter(), 0
    while n < warmup_iters or time.perf_counter() - t0 < warmup_s:
        step()
        n += 1
        if n % 10 == 0:
            torch.cuda.synchronize()  # keep the wall clock honest: the GPU must keep up
    torch.cuda.synchronize()
    estimate = time_iterations(step, 10)  # ms per iteration, to size a repetition
    k = max(1, math.ceil(rep_s * 1e3 / max(estimate, 1e-3)))
    return [time_iterations(step, k) for _ in range(reps)], k


def run_row(model, name, mode, batch, size, args, device):
    """One result row; an error (e.g. out of memory) becomes a row with "error" instead of ms."""
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    row = {"model": name, "mode": MODE_NAMES[mode], "batch": batch, "input_size": size}
    step = x = None
    try:
        x = torch.randn(batch, 3, size, size, device=device, dtype=torch.half)
        x = x.contiguous(memory_format=torch.channels_last)
        step = make_step(model, x, mode)
        reps, k = measure(step, args.reps, args.warmup_iters, args.warmup_s, args.rep_s)
        ms = statistics.median(reps)
        row.update(ms=ms, ms_min=min(reps), ms_max=max(reps), img_s=batch / ms * 1e3,
                   peak_mib=torch.cuda.max_memory_allocated(device) / 2**20, reps=reps,
                   iters_per_rep=k)
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError is a RuntimeError too
        row["error"] = str(e).splitlines()[0][:300]
        print(f"  {name} {mode} batch {batch}: error: {row['error']}", file=sys.stderr)
    finally:
        del step, x  # frees the CUDA graph and its memory pool before the next row
        torch.cuda.synchronize()
    return row


def print_table(rows):
    print(f"{'model':<16} {'size':>4} {'mode':<13} {'batch':>5} {'ms':>9} {'min':>9} {'max':>9} "
          f"{'img/s':>10} {'peak MiB':>9}")
    for r in rows:
        head = f"{r['model']:<16} {r.get('input_size', ''):>4} {r['mode']:<13} {r['batch']:>5}"
        if "error" in r:
            print(f"{head}  error: {r['error'][:60]}")
            continue
        print(f"{head} {r['ms']:>9.4f} {r['ms_min']:>9.4f} {r['ms_max']:>9.4f} "
              f"{r['img_s']:>10.1f} {r['peak_mib']:>9.1f}")


def write_json(path, doc):
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch fp16 channels_last inference baseline.")
    ap.add_argument("--models", default="resnet50", help="comma-separated torchvision model names")
    ap.add_argument("--batches", default="1,2,4,8,16,32,64,128,256")
    ap.add_argument("--modes", default="eager,graph", help="eager and/or graph")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per row")
    ap.add_argument("--warmup-iters", type=int, default=20)
    ap.add_argument("--warmup-s", type=float, default=0.2)
    ap.add_argument("--rep-s", type=float, default=0.1, help="minimum seconds per repetition")
    ap.add_argument("--input-size", type=int, default=None,
                    help="image side for every model (default: each model's own, see "
                         "DEFAULT_INPUT_SIZE: 299 for inception_v3, 224..600 for "
                         "efficientnet_b0..b7, 224 otherwise)")
    ap.add_argument("--out", default=None, help="JSON output path (rewritten after every row)")
    args = ap.parse_args(argv)

    models, batches, modes = (parse_list(args.models), parse_list(args.batches, int),
                              parse_list(args.modes))
    for m in modes:
        if m not in MODE_NAMES:
            ap.error(f"unknown mode {m!r}; valid: {', '.join(MODE_NAMES)}")
    for m in models:
        if m in NOT_IN_TORCHVISION:
            ap.error(f"{m} is {NOT_IN_TORCHVISION[m]}, which torchvision does not have")
        if not callable(getattr(torchvision.models, m, None)):
            ap.error(f"torchvision.models has no model {m!r}")
    if not torch.cuda.is_available():
        print("error: no CUDA device; this baseline only measures GPU inference", file=sys.stderr)
        return 2

    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    doc = {"torch": torch.__version__, "torchvision": torchvision.__version__,
           "cudnn": torch.backends.cudnn.version(), "cuda": torch.version.cuda,
           "gpu": torch.cuda.get_device_name(device),
           "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "settings": {"dtype": "float16", "memory_format": "channels_last",
                        "cudnn_benchmark": True, "reps": args.reps, "rep_s": args.rep_s,
                        "warmup_iters": args.warmup_iters, "warmup_s": args.warmup_s,
                        "input_size": args.input_size or "per model (DEFAULT_INPUT_SIZE)"},
           "rows": []}
    print(f"torch {doc['torch']}, torchvision {doc['torchvision']}, cudnn {doc['cudnn']}, "
          f"{doc['gpu']}", flush=True)

    with torch.inference_mode():
        for name in models:
            size = input_size_for(name, args.input_size)
            model = build_model(name, device)
            for mode in modes:
                for batch in batches:
                    row = run_row(model, name, mode, batch, size, args, device)
                    doc["rows"].append(row)
                    if "error" not in row:
                        print(f"  {name} {size} {row['mode']} batch {batch}: {row['ms']:.4f} ms "
                              f"({row['img_s']:.1f} img/s)", flush=True)
                    write_json(args.out, doc)  # partial results survive a killed run
            del model
    print()
    print_table(doc["rows"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
