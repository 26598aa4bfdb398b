#!/usr/bin/env python3
"""PyTorch's largest training batch under a memory cap (issue 5's peer).

cnnbench's `--max_batch --memory_limit=L` finds the largest batch whose training step fits a card
of L GiB; this tool answers the same question for PyTorch, for the same model, precision, input
size, classes and optimizer, under the same cap, so that the two largest batches can be set side
by side.

The step is tools/pytorch_train_baseline.py's (imported, not copied): torchvision model with
weights=None, channels_last, torch.backends.cudnn.benchmark as --cudnn-benchmark says (off by
default, PyTorch's own default and what a script that does not set it gets: with it on, every new
batch size is autotuned first, tens of seconds an attempt), CrossEntropyLoss on random
labels, the optimizer of --optimizer/--lr/... (--tiny-imagenet: 64 px, 200 classes, Adam at lr
1e-3), precisions as there (fp16: autocast with fp32 master weights and torch.amp.GradScaler; bf16;
tf32; fp32 with TF32 off). Eager mode only (--mode eager): whether a batch fits is decided by the
memory the step needs, and cnnbench's train-mode search is compared with PyTorch's plain eager
step; the whole-step CUDA graph (pytorch_train_baseline.py's graph mode) would add its private
memory pool and is not needed at the boundary.

The cap counts the CUDA context, as cnnbench's --memory_limit does (cnnbench allocates a ballast
so that the device's whole use, context and libraries included, cannot pass L). Here, once the
context exists and a warm-up step (the model at batch 2, no cap) has created the cuDNN and cuBLAS
handles and loaded their kernels, and again before every attempt (after the previous attempt's
memory is released):

    used0 = total - free            (torch.cuda.mem_get_info)
    outside = used0 - torch.cuda.memory_reserved()   (context, libraries: not the allocator's)
    allowed = L - outside           (what PyTorch's caching allocator may hold)
    torch.cuda.set_per_process_memory_fraction(allowed / total)

Memory a library takes outside the allocator during an attempt (kernels loaded lazily, a
library's own buffers) is therefore counted from the next attempt on, as cnnbench's fixed ballast
counts it; every attempt records the device's real use at its end (device_used_mib) so a reader
can see it. A limit at or above the device's memory means the whole device (fraction 1). A limit
that does not exceed what is used outside the allocator at a search's start ends the run with
exit 2 and one line, as cnnbench's --memory_limit does.

One attempt at batch b: a fresh model and optimizer, random input and labels, 2 training steps
that the optimizer took (fp16's GradScaler skips the optimizer's step on inf/NaN gradients, before
which the optimizer state does not exist; up to MAX_STEPS steps are run to get 2 taken), then
torch.cuda.synchronize(). Fits: no exception. Out of memory: torch.cuda.OutOfMemoryError or a
message naming a device allocation failure (pytorch_train_baseline.OOM_MARKERS: CUDA's, cuBLAS's
CUBLAS_STATUS_ALLOC_FAILED, cuDNN's allocation failures). Any other exception is an "error" that
stops that search. After every attempt: everything deleted, gc.collect(), torch.cuda.empty_cache(),
torch.cuda.reset_peak_memory_stats().

The search (search_max_batch, no torch needed; harness/max_batch.cpp's semantics): try --start
(clamped to [1, --cap]); double while batches fit (the cap fitting: "capped", the true largest may
be higher); halve while they fail (batch 1 failing: largest 0); then bisect until first_failed ==
largest + 1. A batch is never tried twice. --time-limit-s bounds each search: once a search has
run that long it tries no further batch and is recorded as cut off (its largest and first_failed
so far are then a lower and an upper bound; an attempt under way finishes first).

Output JSON (--out, rewritten after every attempt, so a killed run keeps what was measured):
torch, torchvision, cudnn, cuda, gpu, date (as pytorch_train_baseline.py), device_total_mib,
settings, and "searches": one per (model, precision, limit) in that order, each with model,
precision, input_size, num_classes, optimizer, memory_limit_gib (null: the whole device),
device_used_at_start_mib (used0), outside_allocator_mib, memory_fraction and allowed_mib (the cap
at the search's start), largest, first_failed (0: none failed), capped, cut_off, error (null, or
"batch N: message"), and attempts in the order tried: batch, fit ("fits", "out of memory",
"error"), peak_reserved_mib (torch.cuda.max_memory_reserved), device_used_mib (total - free at the
attempt's end, before its memory is released), allowed_mib (that attempt's cap), steps, seconds,
message (the exception's first line; "" where it fitted). stderr gets one line per attempt:
"pytorch max batch MODEL/PREC limit 8 GiB: batch N fits (X.X s)" (or "out of memory", or
"error" followed by ": " and the message); stdout a table of the searches at the end.

Usage: python3 tools/pytorch_max_batch.py --out results/pytorch_max_batch.json
       [--models efficientnet_b0] [--precisions fp16,fp32] [--memory-limit 8,16,24,48]
       [--start 64] [--cap 32768] [--time-limit-s S] [--tiny-imagenet] [--optimizer adam] ...
Exit status: 0 done (out-of-memory attempts and errors are outcomes), 2 bad arguments, no CUDA
device, or a limit below what the device already uses. Needs torch and torchvision with a CUDA
GPU (imported in main, so the rest is testable without).
"""
import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_train_baseline as ptb  # noqa: E402

FITS, OOM, ERROR = "fits", "out of memory", "error"  # cnnbench's fit_name
MIB = 2**20
GIB = 2**30
STEPS = 2          # optimizer steps taken per attempt
MAX_STEPS = 10     # steps run at most to get STEPS taken (fp16: GradScaler may skip some)
WARM_UP_BATCH = 2  # the uncapped step that creates the libraries' handles before a search


# --------------------------------------------------------------------------------------------
# The search (no torch)
# --------------------------------------------------------------------------------------------
def search_max_batch(try_batch, start, cap, stop=None, progress=None):
    """The largest batch that fits, as harness/max_batch.cpp's search_max_batch.

    try_batch(b) -> dict with "fit" (FITS, OOM or ERROR), "message" and any figures; it is
    recorded with "batch": b first. stop() (optional) is asked before every new batch: true ends
    the search with cut_off. progress(result) (optional) is called after every attempt.
    Returns {largest, first_failed, capped, error, cut_off, attempts}."""
    cap = max(int(cap), 1)
    r = {"largest": 0, "first_failed": 0, "capped": False, "error": None, "cut_off": False,
         "attempts": []}
    seen = {}

    def attempt(b):
        """Tries b once; False when the search ends here (an error, or stop())."""
        if b not in seen:
            if stop is not None and stop():
                r["cut_off"] = True
                return False
            seen[b] = {"batch": b, **try_batch(b)}
            r["attempts"].append(seen[b])
            fit = seen[b]["fit"]
            if fit == FITS:
                r["largest"] = max(r["largest"], b)
            elif fit == OOM and (r["first_failed"] == 0 or b < r["first_failed"]):
                r["first_failed"] = b
            elif fit == ERROR:
                r["error"] = f"batch {b}: {seen[b].get('message', '')}"
            if progress is not None:
                progress(r)
        return seen[b]["fit"] != ERROR

    b = min(max(int(start), 1), cap)
    # Bracket: one batch that fits and one that does not (or batch 1 failing, or the cap fitting).
    while True:
        if not attempt(b):
            return r
        if r["largest"] and r["first_failed"]:
            break
        if not r["first_failed"]:  # everything so far fitted
            if b == cap:
                r["capped"] = True
                return r
            b = min(2 * b, cap)
        else:  # everything so far failed
            if b == 1:
                return r
            b = max(1, b // 2)
    # Bisect between them.
    while r["first_failed"] - r["largest"] > 1:
        if not attempt(r["largest"] + (r["first_failed"] - r["largest"]) // 2):
            return r
    return r


# --------------------------------------------------------------------------------------------
# Arguments, records, output (no torch)
# --------------------------------------------------------------------------------------------
def parse_limits(values):
    """--memory-limit's values (each a number or a comma list, GiB) -> list of floats; raises
    ValueError naming a bad one."""
    out = []
    for text in values:
        for item in ptb.parse_list(text):
            try:
                g = float(item)
            except ValueError:
                raise ValueError(f"--memory-limit {item!r} is not a number of GiB") from None
            if not (math.isfinite(g) and g > 0):
                raise ValueError(f"--memory-limit must be a positive number of GiB, not {item!r}")
            out.append(g)
    return out


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch's largest training batch under a memory "
                                             "cap (issue 5's peer).")
    ap.add_argument("--models", default="efficientnet_b0",
                    help="comma-separated torchvision model names")
    ap.add_argument("--precisions", default="fp16,fp32",
                    help=f"comma list of {', '.join(ptb.PRECISIONS)}")
    ap.add_argument("--memory-limit", action="append", default=[], metavar="GIB",
                    help="the cap in GiB, CUDA context included; repeat it or give a comma list "
                         "(8,16,24,48) for several; absent: the whole device")
    ap.add_argument("--start", type=int, default=64, help="the first batch tried")
    ap.add_argument("--cap", type=int, default=32768, help="the largest batch tried")
    ap.add_argument("--mode", default="eager", choices=("eager",),
                    help="eager only (a CUDA graph is not needed at the boundary)")
    ap.add_argument("--cudnn-benchmark", action=argparse.BooleanOptionalAction, default=False,
                    help="torch.backends.cudnn.benchmark (default off, PyTorch's default)")
    ap.add_argument("--time-limit-s", type=float, default=None,
                    help="seconds a search may run; past them it tries no further batch and is "
                         "recorded as cut off")
    ptb.add_step_options(ap)
    ap.add_argument("--out", default=None, help="JSON output path (rewritten after every attempt)")
    args = ap.parse_args(argv)
    ptb.resolve_step_options(ap, args)
    args.precisions = ptb.parse_list(args.precisions)
    if not args.precisions:
        ap.error("--precisions is empty")
    for p in args.precisions:
        if p not in ptb.PRECISIONS:
            ap.error(f"unknown precision {p!r}; valid: {', '.join(ptb.PRECISIONS)}")
    try:
        args.memory_limits = parse_limits(args.memory_limit) or [None]
    except ValueError as e:
        ap.error(str(e))
    if args.start < 1:
        ap.error("--start must be at least 1")
    if args.cap < 1:
        ap.error("--cap must be at least 1")
    if args.time_limit_s is not None and not args.time_limit_s > 0:
        ap.error("--time-limit-s must be positive")
    return args


def limit_text(limit_gib):
    return "whole device" if limit_gib is None else f"{limit_gib:g} GiB"


def settings_of(args):
    return dict(ptb.step_settings(args), cudnn_benchmark=args.cudnn_benchmark, mode=args.mode,
                precisions=args.precisions,
                memory_limits_gib=args.memory_limits, start=args.start, cap=args.cap,
                time_limit_s=args.time_limit_s, steps=STEPS, max_steps=MAX_STEPS,
                warm_up_batch=WARM_UP_BATCH,
                cap_method="torch.cuda.set_per_process_memory_fraction((limit - (used - "
                           "reserved)) / total) before every attempt")


def new_search(name, precision, size, args, limit_gib, budget):
    """A search's record before its first attempt; `budget` as allocator_budget returns."""
    return {"model": name, "precision": precision, "input_size": size,
            "num_classes": args.num_classes, "optimizer": args.optimizer,
            "memory_limit_gib": limit_gib,
            "device_used_at_start_mib": budget["used"] / MIB,
            "outside_allocator_mib": budget["outside"] / MIB,
            "memory_fraction": budget["fraction"], "allowed_mib": budget["allowed"] / MIB,
            "largest": 0, "first_failed": 0, "capped": False, "cut_off": False, "error": None,
            "attempts": []}


def attempt_line(search, a):
    """The stderr line of one attempt."""
    line = (f"pytorch max batch {search['model']}/{search['precision']} limit "
            f"{limit_text(search['memory_limit_gib'])}: batch {a['batch']} {a['fit']} "
            f"({a['seconds']:.1f} s)")
    return line + (f": {a['message'][:160]}" if a["fit"] == ERROR else "")


def summary_lines(searches):
    out = [f"{'model':<16} {'prec':<5} {'limit':>12} {'largest':>8} {'failed':>8}  note"]
    for s in searches:
        note = ("error: " + s["error"][:60] if s["error"] else "capped" if s["capped"]
                else "cut off" if s["cut_off"] else "")
        out.append(f"{s['model']:<16} {s['precision']:<5} "
                   f"{limit_text(s['memory_limit_gib']):>12} {s['largest']:>8} "
                   f"{s['first_failed'] or '-':>8}  {note}")
    return out


# --------------------------------------------------------------------------------------------
# The GPU part (torch imported in main)
# --------------------------------------------------------------------------------------------
def allocator_budget(torch, device, limit_gib):
    """What the caching allocator may hold so that the device's whole use stays within
    `limit_gib` (None: the whole device): {total, used, outside, allowed, fraction} in bytes."""
    free, total = torch.cuda.mem_get_info(device)
    used = total - free
    outside = used - torch.cuda.memory_reserved(device)
    if limit_gib is None or limit_gib * GIB >= total:
        return {"total": total, "used": used, "outside": outside, "allowed": total - outside,
                "fraction": 1.0}
    allowed = int(limit_gib * GIB) - outside
    return {"total": total, "used": used, "outside": outside, "allowed": allowed,
            "fraction": min(max(allowed / total, 0.0), 1.0)}


def apply_budget(torch, device, limit_gib):
    budget = allocator_budget(torch, device, limit_gib)
    torch.cuda.set_per_process_memory_fraction(budget["fraction"], device)
    return budget


def run_attempt(torch, torchvision, name, precision, size, batch, args, device, limit_gib):
    """One batch tried under the cap (set anew from the device's use now); the attempt's dict."""
    budget = apply_budget(torch, device, limit_gib)
    t0 = time.perf_counter()
    model = opt = x = y = step = None
    taken = [0]  # optimizer steps taken (a GradScaler-skipped step does not call opt.step)
    steps = 0
    try:
        model = ptb.build_model(torch, torchvision, name, args, device)
        opt = ptb.build_optimizer(torch, model.parameters(), args, "eager")
        opt.register_step_post_hook(lambda *_: taken.__setitem__(0, taken[0] + 1))
        x, y = ptb.random_batch(torch, batch, size, args.num_classes, device)
        step = ptb.make_step(torch, model, opt, x, y, "eager", precision, args)[0]
        while steps < STEPS or (taken[0] < STEPS and steps < MAX_STEPS):
            step()
            steps += 1
        torch.cuda.synchronize()
        fit, message = FITS, ""
    except Exception as e:  # torch.cuda.OutOfMemoryError is a RuntimeError
        fit = OOM if ptb.is_out_of_memory(e) else ERROR
        message = ptb.first_line(e)
    a = {"fit": fit, "peak_reserved_mib": None, "device_used_mib": None,
         "allowed_mib": budget["allowed"] / MIB, "steps": steps, "seconds": None,
         "message": message}
    if fit != ERROR:  # after another error the device may not answer
        a["peak_reserved_mib"] = torch.cuda.max_memory_reserved(device) / MIB
        a["device_used_mib"] = ptb.device_used_bytes(torch, device) / MIB
    if fit == FITS and taken[0] < STEPS:
        a["message"] = (f"the optimizer took {taken[0]} of {steps} steps (GradScaler skipped "
                        f"the rest)")
    del model, opt, x, y, step
    ptb.release_memory(torch, device)
    a["seconds"] = time.perf_counter() - t0
    return a


def run_search(torch, torchvision, name, precision, size, args, device, limit_gib, record, save):
    """Fills `record` (new_search's) with the search's outcome; save() after every attempt."""
    t0 = time.monotonic()

    def stop():
        return args.time_limit_s is not None and time.monotonic() - t0 > args.time_limit_s

    def progress(r):
        record.update(r)
        print(attempt_line(record, r["attempts"][-1]), file=sys.stderr, flush=True)
        save()

    r = search_max_batch(
        lambda b: run_attempt(torch, torchvision, name, precision, size, b, args, device,
                              limit_gib),
        args.start, args.cap, stop=stop, progress=progress)
    record.update(r)
    save()


def main(argv=None):
    args = parse_args(argv)
    libs = ptb.import_torch()
    if libs is None:
        return 2
    torch, torchvision = libs
    if not ptb.check_setup(torch, torchvision, args.models):
        return 2

    device = torch.device("cuda", torch.cuda.current_device())  # an index: set_per_process_memory_fraction needs one
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    doc = dict(ptb.header_of(torch, torchvision, device),
               device_total_mib=torch.cuda.mem_get_info(device)[1] / MIB,
               settings=settings_of(args), searches=[])
    print(f"torch {doc['torch']}, torchvision {doc['torchvision']}, cudnn {doc['cudnn']}, "
          f"{doc['gpu']}", flush=True)

    def save():
        ptb.write_json(args.out, doc)

    for name in args.models:
        size = ptb.input_size_for(name, args.input_size)
        for precision in args.precisions:
            ptb.set_tf32(torch, precision != "fp32")
            warm = run_attempt(torch, torchvision, name, precision, size, WARM_UP_BATCH, args,
                               device, None)
            if warm["fit"] != FITS:
                print(f"pytorch max batch {name}/{precision}: warm-up at batch {WARM_UP_BATCH} "
                      f"{warm['fit']}: {warm['message']}", file=sys.stderr)
            for limit_gib in args.memory_limits:  # every limit checked before any search
                budget = allocator_budget(torch, device, limit_gib)
                if budget["allowed"] <= 0:
                    print(f"error: --memory-limit of {limit_gib:g} GiB is not above what the "
                          f"device already uses outside PyTorch's allocator "
                          f"({budget['outside'] / MIB:.0f} MiB: the CUDA context and "
                          f"libraries)", file=sys.stderr)
                    return 2
            for limit_gib in args.memory_limits:
                record = new_search(name, precision, size, args, limit_gib,
                                    allocator_budget(torch, device, limit_gib))
                doc["searches"].append(record)
                save()
                run_search(torch, torchvision, name, precision, size, args, device, limit_gib,
                           record, save)
    torch.cuda.set_per_process_memory_fraction(1.0, device)
    print()
    print("\n".join(summary_lines(doc["searches"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
