#!/usr/bin/env python3
"""PyTorch training peer (issue 4): one training step of torchvision models, eager and CUDA graph.

The speed check of issue 4 compares cnnbench's training step with this one, on the same GPU in the
same device session. A step = optimizer.zero_grad(set_to_none=True), forward in train() mode
(BatchNorm in training mode: batch statistics, running statistics updated), CrossEntropyLoss on
random integer labels in [0, --num-classes), backward, optimizer step. Settings: weights=None
(random init), channels_last, torch.backends.cudnn.benchmark=True, input x ~ N(0,1) float32
[batch,3,S,S] in channels_last (autocast casts it in the first conv, as a real input pipeline's
batch would be), labels int64 [batch]; both stay the same for every step.

Precisions (--precision, default fp16):
  fp16  torch.autocast(float16) with fp32 weights (master weights) and torch.amp.GradScaler
        (dynamic loss scale) in eager mode; TF32 on for what stays fp32
  bf16  torch.autocast(bfloat16), no loss scaling; TF32 on
  tf32  fp32 weights and activations, TF32 on (cuDNN convolutions and cuBLAS matmuls)
  fp32  fp32, TF32 off

Optimizers (--optimizer): sgd (default: lr 0.1, momentum 0.9, weight_decay 1e-4, torchvision's
ResNet recipe, as configs/train.yaml) or adam (default: lr 0.001, weight_decay 0, betas and eps
torch's defaults, as configs/train_tiny_imagenet.yaml); --lr, --momentum, --weight-decay override.
--tiny-imagenet is short for --input-size 64 --num-classes 200 --optimizer adam --lr 0.001
--epoch-images 100000 (each can still be given).

Modes (row "mode"):
  eager  each step is plain Python: GradScaler.step() reads found_inf on the host (one sync a step)
  graph  the whole step captured once with torch.cuda.graph and replayed, following PyTorch's
         "whole network capture" recipe (CUDA semantics notes): static input and label tensors,
         3 warm-up steps on a side stream (cuDNN autotuning and the optimizer's lazy state happen
         there), zero_grad(set_to_none=True) before the capture, autocast with cache_enabled=False,
         Adam with capturable=True (its step count stays on the device). GradScaler cannot be
         captured (its step() syncs to skip a step on inf/NaN), so fp16 graph rows use a FIXED loss
         scale (--graph-loss-scale, default 1024): loss * scale backward, gradients multiplied by
         1/scale, no step ever skipped; the row's "notes" say so.

Inception-v3 is built with aux_logits=True (init_weights=False: the values do not matter for
speed) and trains its AuxLogits head: loss = main + 0.4 * aux (cnnbench's kAuxLossWeight,
networks/train_plan.h). Its AuxLogits head's unpadded 5x5 conv needs Mixed_6e at >= 17x17, i.e. an
input of >= 299 px; without the head (--no-inception-aux) torchvision's minimum is 75 px
(min_input_size). Input size per model: --input-size, else DEFAULT_INPUT_SIZE (299 inception_v3,
224..600 efficientnet_b0..b7, 224 otherwise).

Timing per (model, mode, batch), as tools/pytorch_baseline.py: warm-up of >= --warmup-iters steps
and >= --warmup-s seconds, then --reps repetitions of k back-to-back steps between two CUDA events,
k chosen so a repetition lasts >= --rep-s. Every row builds a fresh model and optimizer after
gc.collect(), torch.cuda.empty_cache() and torch.cuda.reset_peak_memory_stats(), so its memory
figures are the whole step's: weights, gradients, optimizer state, activations, workspaces.

Row (make_row): model, mode, precision, batch, input_size, num_classes, optimizer, lr, momentum,
weight_decay, ms (median ms per step), ms_min, ms_max, img_s (= batch / median), epoch_s (where
--epoch-images is known: epoch_images / img_s), peak_allocated_mib
(torch.cuda.max_memory_allocated), peak_reserved_mib (torch.cuda.max_memory_reserved, which issue 4
compares with cnnbench's peak), peak_mib (= peak_allocated_mib, as pytorch_baseline.py),
device_used_mib (total - free of torch.cuda.mem_get_info right after the timed repetitions: the
device's use at the row's end: the CUDA context, cuDNN/cuBLAS and the caching allocator's reserved
memory — what cnnbench's device_peak_mib counts), reps, iters_per_rep, loss (of the last step, a
sanity figure), notes (list of strings). A row whose step runs out of memory has "error": "out of
memory" instead of the figures, and the next row still runs; "largest_batch" at the top level
gives, per "model/mode/precision", the largest batch that ran. Out of memory is
torch.cuda.OutOfMemoryError or a message naming a device allocation failure (OOM_MARKERS: CUDA's,
cuBLAS's, cuDNN's); other failures: "error" holds the first line of the exception.

Output JSON: the top-level fields of pytorch_baseline.py (torch, torchvision, cudnn, cuda, gpu,
date, settings, rows) plus largest_batch; rewritten after every row.

Usage: python3 tools/pytorch_train_baseline.py --out results/pytorch_train.json
       [--models resnet50,efficientnet_b0] [--batches 32,64,256] [--modes eager,graph]
       [--precision fp16|bf16|tf32|fp32] [--optimizer sgd|adam] [--tiny-imagenet]
Exit status: 0 done (rows with "error" included), 2 bad arguments or no CUDA device.
Needs torch and torchvision with a CUDA GPU (imported in main, so the rest is testable without).
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

MODES = ("eager", "graph")
PRECISIONS = ("fp16", "bf16", "tf32", "fp32")
OPTIMIZERS = ("sgd", "adam")
# Per optimizer: the defaults of lr, momentum and weight_decay (configs/train*.yaml).
OPTIMIZER_DEFAULTS = {"sgd": {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4},
                      "adam": {"lr": 0.001, "momentum": None, "weight_decay": 0.0}}
TINY_IMAGENET = {"input_size": 64, "num_classes": 200, "optimizer": "adam", "lr": 0.001,
                 "epoch_images": 100_000}
IMAGENET_EPOCH_IMAGES = 1_281_167  # ImageNet-1k's training images (configs/train.yaml)
AUX_LOSS_WEIGHT = 0.4  # cnnbench's kAuxLossWeight (networks/train_plan.h)
DEFAULT_GRAPH_LOSS_SCALE = 1024.0
# Default input sizes, as pytorch_baseline.py; every other model: 224.
DEFAULT_INPUT_SIZE = {"inception_v3": 299, "efficientnet_b0": 224, "efficientnet_b1": 240,
                      "efficientnet_b2": 260, "efficientnet_b3": 300, "efficientnet_b4": 380,
                      "efficientnet_b5": 456, "efficientnet_b6": 528, "efficientnet_b7": 600}
NOT_IN_TORCHVISION = {"alexnet_lrn": "MXNet's symbols/alexnet.py",
                      "inception_bn": "MXNet's symbols/inception-bn.py"}


def model_kwargs(name, num_classes, inception_aux=True):
    """torchvision constructor arguments besides weights=None."""
    kw = {"num_classes": num_classes}
    if name == "inception_v3":
        kw.update(aux_logits=inception_aux, init_weights=False)
    elif name == "googlenet":
        kw.update(aux_logits=False, init_weights=False)
    return kw


def input_size_for(name, override=None):
    return override or DEFAULT_INPUT_SIZE.get(name, 224)


def _conv(side, k, s=1, p=0):
    return (side + 2 * p - k) // s + 1


def inception_v3_sides(size):
    """(Mixed_6e's side, the side AuxLogits' 5x5 conv gets, Mixed_7c's side) at input `size`."""
    s = _conv(size, 3, 2)           # Conv2d_1a_3x3
    s = _conv(s, 3)                 # Conv2d_2a_3x3 (2b is padded)
    s = _conv(s, 3, 2)              # maxpool1
    s = _conv(s, 3)                 # Conv2d_4a_3x3 (3b is 1x1)
    s = _conv(s, 3, 2)              # maxpool2; Mixed_5b..5d keep it
    m6 = _conv(s, 3, 2)             # Mixed_6a; 6b..6e keep it
    aux = _conv(m6, 5, 3)           # AuxLogits' 5x5/3 average pool
    m7 = _conv(m6, 3, 2)            # Mixed_7a
    return m6, aux, m7


def min_input_size(name, inception_aux=True):
    """Smallest input side the model trains at (None: no limit checked here)."""
    if name != "inception_v3":
        return None
    for size in range(1, 1000):
        m6, aux, m7 = inception_v3_sides(size)
        if m7 >= 1 and (not inception_aux or aux >= 5):
            return size
    return None


def parse_list(text, conv=str):
    return [conv(t.strip()) for t in text.split(",") if t.strip()]


def add_step_options(ap):
    """The options of the step itself: optimizer, input size, classes, Inception's head, and
    --tiny-imagenet (also tools/pytorch_max_batch.py's). resolve_step_options completes them."""
    ap.add_argument("--optimizer", default=None, choices=OPTIMIZERS, help="default sgd")
    ap.add_argument("--lr", type=float, default=None, help="default 0.1 sgd, 0.001 adam")
    ap.add_argument("--momentum", type=float, default=None, help="sgd only; default 0.9")
    ap.add_argument("--weight-decay", type=float, default=None, help="default 1e-4 sgd, 0 adam")
    ap.add_argument("--input-size", type=int, default=None,
                    help="image side for every model (default: each model's own, see "
                         "DEFAULT_INPUT_SIZE)")
    ap.add_argument("--num-classes", type=int, default=None, help="default 1000")
    ap.add_argument("--tiny-imagenet", action="store_true",
                    help="defaults of Tiny ImageNet: 64 px, 200 classes, adam at lr 0.001 "
                         "(and 100,000 images an epoch where the tool has --epoch-images)")
    ap.add_argument("--inception-aux", action=argparse.BooleanOptionalAction, default=True,
                    help="train inception_v3 with its AuxLogits head (loss weight 0.4; needs "
                         ">= 299 px)")


def resolve_step_options(ap, args):
    """Fills in the defaults of add_step_options' options (--tiny-imagenet's first, then the
    optimizer's), splits args.models (a comma list) and checks them all; ap.error (exit 2) names
    a bad one."""
    if args.tiny_imagenet:
        for k, v in TINY_IMAGENET.items():
            if hasattr(args, k) and getattr(args, k) is None:  # epoch_images: where the tool has it
                setattr(args, k, v)
    if args.optimizer is None:
        args.optimizer = "sgd"
    defaults = OPTIMIZER_DEFAULTS[args.optimizer]
    for k in ("lr", "momentum", "weight_decay"):
        if getattr(args, k) is None:
            setattr(args, k, defaults[k])
    if args.optimizer == "adam" and args.momentum is not None:
        ap.error("--momentum is for sgd; adam uses torch's default betas (0.9, 0.999)")
    if args.num_classes is None:
        args.num_classes = 1000
    args.models = parse_list(args.models)
    if not args.models:
        ap.error("--models is empty")
    for m in args.models:
        if m in NOT_IN_TORCHVISION:
            ap.error(f"{m} is {NOT_IN_TORCHVISION[m]}, which torchvision does not have")
    if args.input_size is not None and args.input_size < 1:
        ap.error("--input-size must be at least 1")
    if args.num_classes < 2:
        ap.error("--num-classes must be at least 2")
    if not args.lr > 0:
        ap.error("--lr must be positive")
    if args.weight_decay < 0 or (args.momentum is not None and args.momentum < 0):
        ap.error("--momentum and --weight-decay must not be negative")
    for m in args.models:
        size = input_size_for(m, args.input_size)
        least = min_input_size(m, args.inception_aux)
        if least is not None and size < least:
            why = ("its AuxLogits head's 5x5 conv needs Mixed_6e at >= 17x17; "
                   "--no-inception-aux lowers the minimum to 75 px" if args.inception_aux
                   else "torchvision's minimum")
            ap.error(f"{m} needs an input of at least {least} px, not {size} ({why})")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch training-step baseline (issue 4's peer).")
    ap.add_argument("--models", default="resnet50", help="comma-separated torchvision model names")
    ap.add_argument("--batches", default="32,64,128,256")
    ap.add_argument("--modes", default="eager,graph", help="eager and/or graph")
    ap.add_argument("--precision", default="fp16", choices=PRECISIONS)
    add_step_options(ap)
    ap.add_argument("--epoch-images", type=int, default=None,
                    help="images an epoch, for the rows' epoch_s (default 1,281,167 at 1000 "
                         "classes, none otherwise)")
    ap.add_argument("--graph-loss-scale", type=float, default=DEFAULT_GRAPH_LOSS_SCALE,
                    help="fixed loss scale of fp16 graph rows (GradScaler cannot be captured)")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per row")
    ap.add_argument("--warmup-iters", type=int, default=10)
    ap.add_argument("--warmup-s", type=float, default=0.5)
    ap.add_argument("--rep-s", type=float, default=0.2, help="minimum seconds per repetition")
    ap.add_argument("--out", default=None, help="JSON output path (rewritten after every row)")
    args = ap.parse_args(argv)
    resolve_step_options(ap, args)
    if args.epoch_images is None and args.num_classes == 1000:
        args.epoch_images = IMAGENET_EPOCH_IMAGES

    try:
        args.batches = parse_list(args.batches, int)
    except ValueError as e:
        ap.error(f"--batches must be comma-separated integers ({e})")
    args.modes = parse_list(args.modes)
    if not args.batches:
        ap.error("--batches is empty")
    for b in args.batches:
        if b < 1:
            ap.error(f"batch {b} is not positive")
    for m in args.modes:
        if m not in MODES:
            ap.error(f"unknown mode {m!r}; valid: {', '.join(MODES)}")
    if args.epoch_images is not None and args.epoch_images < 1:
        ap.error("--epoch-images must be positive")
    if not args.graph_loss_scale > 0:
        ap.error("--graph-loss-scale must be positive")
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    return args


def row_notes(mode, precision, optimizer, graph_loss_scale, name, inception_aux):
    """The notes a row carries about how its step differs from the plain recipe."""
    notes = []
    if precision == "fp16":
        if mode == "graph":
            notes.append(f"fixed loss scale {graph_loss_scale:g} (GradScaler's dynamic scaling "
                         f"syncs in step() and cannot be captured); no step skipped on inf/NaN")
        else:
            notes.append("torch.amp.GradScaler, dynamic loss scale")
    if mode == "graph" and optimizer == "adam":
        notes.append("Adam(capturable=True)")
    if name == "inception_v3" and inception_aux:
        notes.append(f"AuxLogits trained: loss = main + {AUX_LOSS_WEIGHT} * aux")
    if name.startswith("efficientnet_"):
        notes.append("torchvision's dropout and stochastic depth active (train mode)")
    return notes


def make_row(name, mode, precision, batch, size, args, reps=None, iters_per_rep=None,
             peak_allocated=None, peak_reserved=None, loss=None, error=None, notes=(),
             device_used=None):
    """One result row; `reps` in ms per step, memory figures in bytes; `error` replaces figures."""
    row = {"model": name, "mode": mode, "precision": precision, "batch": batch,
           "input_size": size, "num_classes": args.num_classes, "optimizer": args.optimizer,
           "lr": args.lr, "momentum": args.momentum, "weight_decay": args.weight_decay,
           "notes": list(notes)}
    if error is not None:
        row["error"] = error
        return row
    ms = statistics.median(reps)
    row.update(ms=ms, ms_min=min(reps), ms_max=max(reps), img_s=batch / ms * 1e3)
    if args.epoch_images:
        row["epoch_s"] = args.epoch_images / row["img_s"]
    row.update(peak_allocated_mib=peak_allocated / 2**20, peak_reserved_mib=peak_reserved / 2**20,
               peak_mib=peak_allocated / 2**20,
               device_used_mib=None if device_used is None else device_used / 2**20,
               reps=list(reps), iters_per_rep=iters_per_rep, loss=loss)
    return row


def largest_batches(rows):
    """{"model/mode/precision": the largest batch of a row without "error"}."""
    out = {}
    for r in rows:
        if "error" in r:
            continue
        key = f"{r['model']}/{r['mode']}/{r['precision']}"
        out[key] = max(out.get(key, 0), r["batch"])
    return out


# Lower-case pieces of a message that mean the device ran out of memory: CUDA's (and the caching
# allocator's), cudaErrorMemoryAllocation, cuBLAS's, cuDNN 8's and cuDNN 9's allocation failures.
OOM_MARKERS = ("out of memory", "cudaerrormemoryallocation", "cublas_status_alloc_failed",
               "cudnn_status_alloc_failed", "cudnn_status_internal_error_device_allocation_failed")


def is_out_of_memory(exc):
    text = str(exc).lower()
    return type(exc).__name__ == "OutOfMemoryError" or any(m in text for m in OOM_MARKERS)


def error_text(exc):
    """"out of memory" for any device out-of-memory failure, else the message's first line."""
    return "out of memory" if is_out_of_memory(exc) else first_line(exc)


def first_line(exc):
    """The exception message's first line (at most 300 characters), else its type's name."""
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


# --------------------------------------------------------------------------------------------
# The GPU part (torch imported in main)
# --------------------------------------------------------------------------------------------
def set_tf32(torch, enabled):
    """As crosscheck_torchvision.set_tf32: the fp32_precision API where torch has it."""
    cudnn_conv = getattr(torch.backends.cudnn, "conv", None)
    if cudnn_conv is not None and hasattr(cudnn_conv, "fp32_precision"):
        value = "tf32" if enabled else "ieee"
        cudnn_conv.fp32_precision = value
        torch.backends.cuda.matmul.fp32_precision = value
    else:
        torch.backends.cudnn.allow_tf32 = enabled
        torch.backends.cuda.matmul.allow_tf32 = enabled


def build_optimizer(torch, params, args, mode):
    if args.optimizer == "adam":
        return torch.optim.Adam(params, lr=args.lr, weight_decay=args.weight_decay,
                                capturable=(mode == "graph"))
    return torch.optim.SGD(params, lr=args.lr, momentum=args.momentum,
                           weight_decay=args.weight_decay)


def make_step(torch, model, opt, x, y, mode, precision, args):
    """(step callable, last-loss tensor holder): one training step on the current stream."""
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    ce = torch.nn.CrossEntropyLoss()
    params = [p for p in model.parameters() if p.requires_grad]

    def loss_of(out):
        if isinstance(out, tuple):  # InceptionOutputs(logits, aux_logits) in train mode
            main, *aux = [o for o in out if o is not None]
            loss = ce(main, y)
            for a in aux:
                loss = loss + AUX_LOSS_WEIGHT * ce(a, y)
            return loss
        return ce(out, y)

    def forward(cache):
        if amp_dtype is None:
            return loss_of(model(x))
        with torch.autocast("cuda", dtype=amp_dtype, cache_enabled=cache):
            return loss_of(model(x))

    if mode == "eager":
        scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
        last = {}

        def eager_step():
            opt.zero_grad(set_to_none=True)
            loss = forward(True)
            if scaler is None:
                loss.backward()
                opt.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            last["loss"] = loss
        return eager_step, last

    scale = args.graph_loss_scale if precision == "fp16" else None

    def graph_body():
        loss = forward(False)
        if scale is None:
            loss.backward()
        else:
            (loss * scale).backward()
            grads = [p.grad for p in params if p.grad is not None]
            if hasattr(torch, "_foreach_mul_"):
                torch._foreach_mul_(grads, 1.0 / scale)
            else:
                for g in grads:
                    g.mul_(1.0 / scale)
        opt.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            graph_body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = graph_body()  # gradients and the loss live in the graph's memory pool
    return graph.replay, {"loss": static_loss}


def time_iterations(torch, step, k):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(k):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / k


def measure(torch, step, args):
    """(list of per-repetition ms/step, k), as pytorch_baseline.measure."""
    t0, n = time.perf_counter(), 0
    while n < args.warmup_iters or time.perf_counter() - t0 < args.warmup_s:
        step()
        n += 1
        if n % 5 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    estimate = time_iterations(torch, step, 3)
    k = max(1, math.ceil(args.rep_s * 1e3 / max(estimate, 1e-3)))
    return [time_iterations(torch, step, k) for _ in range(args.reps)], k


def release_memory(torch, device):
    """Frees what the caching allocator holds unused and restarts its peak figures."""
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)


def device_used_bytes(torch, device):
    """total - free of cudaMemGetInfo: everything on the device, the CUDA context included."""
    free, total = torch.cuda.mem_get_info(device)
    return total - free


def build_model(torch, torchvision, name, args, device):
    """A fresh torchvision model (weights=None) on `device`, channels_last, in train mode."""
    kw = model_kwargs(name, args.num_classes, args.inception_aux)
    model = getattr(torchvision.models, name)(weights=None, **kw)
    return model.to(device=device, memory_format=torch.channels_last).train()


def random_batch(torch, batch, size, num_classes, device):
    """(x ~ N(0,1) float32 [batch,3,size,size] channels_last, int64 labels in [0, num_classes))."""
    x = torch.randn(batch, 3, size, size, device=device)
    x = x.contiguous(memory_format=torch.channels_last)
    return x, torch.randint(0, num_classes, (batch,), device=device)


def run_row(torch, torchvision, name, mode, batch, size, args, device):
    precision = args.precision
    notes = row_notes(mode, precision, args.optimizer, args.graph_loss_scale, name,
                      args.inception_aux)
    release_memory(torch, device)
    model = opt = x = y = step = last = None
    try:
        model = build_model(torch, torchvision, name, args, device)
        opt = build_optimizer(torch, model.parameters(), args, mode)
        x, y = random_batch(torch, batch, size, args.num_classes, device)
        step, last = make_step(torch, model, opt, x, y, mode, precision, args)
        reps, k = measure(torch, step, args)
        device_used = device_used_bytes(torch, device)
        loss = float(last["loss"].detach().float().item())
        row = make_row(name, mode, precision, batch, size, args, reps=reps, iters_per_rep=k,
                       peak_allocated=torch.cuda.max_memory_allocated(device),
                       peak_reserved=torch.cuda.max_memory_reserved(device), loss=loss,
                       notes=notes, device_used=device_used)
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError is a RuntimeError too
        row = make_row(name, mode, precision, batch, size, args, error=error_text(e),
                       notes=notes)
        print(f"  {name} {mode} batch {batch}: error: {row['error']}", file=sys.stderr)
    finally:
        del model, opt, x, y, step, last  # frees the graph and its pool before the next row
        gc.collect()
        torch.cuda.synchronize()
    return row


def print_table(rows):
    print(f"{'model':<16} {'size':>4} {'mode':<6} {'prec':<5} {'batch':>5} {'ms':>9} {'min':>9} "
          f"{'max':>9} {'img/s':>9} {'alloc MiB':>9} {'rsrv MiB':>9}")
    for r in rows:
        head = (f"{r['model']:<16} {r['input_size']:>4} {r['mode']:<6} {r['precision']:<5} "
                f"{r['batch']:>5}")
        if "error" in r:
            print(f"{head}  error: {r['error'][:60]}")
            continue
        print(f"{head} {r['ms']:>9.3f} {r['ms_min']:>9.3f} {r['ms_max']:>9.3f} "
              f"{r['img_s']:>9.1f} {r['peak_allocated_mib']:>9.0f} {r['peak_reserved_mib']:>9.0f}")


def write_json(path, doc):
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)


def step_settings(args):
    """The settings of the step itself (add_step_options' options and the fixed ones)."""
    return {"memory_format": "channels_last", "cudnn_benchmark": True,
            "optimizer": args.optimizer, "lr": args.lr, "momentum": args.momentum,
            "weight_decay": args.weight_decay, "num_classes": args.num_classes,
            "input_size": args.input_size or "per model (DEFAULT_INPUT_SIZE)",
            "inception_aux": args.inception_aux, "aux_loss_weight": AUX_LOSS_WEIGHT}


def settings_of(args):
    return dict(step_settings(args), precision=args.precision, epoch_images=args.epoch_images,
                graph_loss_scale=args.graph_loss_scale, reps=args.reps, rep_s=args.rep_s,
                warmup_iters=args.warmup_iters, warmup_s=args.warmup_s)


def header_of(torch, torchvision, device):
    """The output's top-level fields that say what ran: versions, GPU and date."""
    return {"torch": torch.__version__, "torchvision": torchvision.__version__,
            "cudnn": torch.backends.cudnn.version(), "cuda": torch.version.cuda,
            "gpu": torch.cuda.get_device_name(device),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}


def import_torch():
    """(torch, torchvision), or None after saying on stderr what is missing."""
    try:
        import torch
        import torchvision
    except ImportError as e:
        print(f"error: this baseline needs torch and torchvision ({e})", file=sys.stderr)
        return None
    return torch, torchvision


def check_setup(torch, torchvision, models):
    """False, after one line on stderr, where a model is not torchvision's or there is no GPU."""
    for m in models:
        if not callable(getattr(torchvision.models, m, None)):
            print(f"error: torchvision.models has no model {m!r}", file=sys.stderr)
            return False
    if not torch.cuda.is_available():
        print("error: no CUDA device; this baseline only measures GPU training", file=sys.stderr)
        return False
    return True


def main(argv=None):
    args = parse_args(argv)
    libs = import_torch()
    if libs is None:
        return 2
    torch, torchvision = libs
    if not check_setup(torch, torchvision, args.models):
        return 2

    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    set_tf32(torch, args.precision != "fp32")
    doc = dict(header_of(torch, torchvision, device), settings=settings_of(args), rows=[],
               largest_batch={})
    print(f"torch {doc['torch']}, torchvision {doc['torchvision']}, cudnn {doc['cudnn']}, "
          f"{doc['gpu']}", flush=True)
    for name in args.models:
        size = input_size_for(name, args.input_size)
        for mode in args.modes:
            for batch in args.batches:
                row = run_row(torch, torchvision, name, mode, batch, size, args, device)
                doc["rows"].append(row)
                doc["largest_batch"] = largest_batches(doc["rows"])
                if "error" not in row:
                    print(f"  {name} {size} {mode} {args.precision} batch {batch}: "
                          f"{row['ms']:.3f} ms ({row['img_s']:.1f} img/s, "
                          f"{row['peak_reserved_mib']:.0f} MiB reserved)", flush=True)
                write_json(args.out, doc)  # partial results survive a killed run
    print()
    print_table(doc["rows"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
