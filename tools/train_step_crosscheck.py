#!/usr/bin/env python3
"""Correctness check of one training step (issue 4), PyTorch half: one SGD step of a torchvision
network from the same .safetensors weights and batch must give the same loss, gradient norms and
updated weights as cnnbench's training step.

Steps:
  1. torch.manual_seed(seed); torchvision.models.<network>(weights=None, num_classes=C) (PyTorch's
     init; BN weight 1, bias 0, running stats 0 and 1), then x ~ N(0,1) float32 [B,3,S,S] and labels
     ~ U{0..C-1} int64 [B] from the same generator. Every dropout module's p is set to 0 (VGG and
     AlexNet; see Networks below).
  2. Writes, in --workdir (a temp dir otherwise):
       <network>_seed<seed>.safetensors       the state_dict in torchvision's names: every
                                              parameter, BN running_mean/running_var (F32) and
                                              num_batches_tracked (I64), as load_weights
                                              (networks/weights.cpp) takes it: num_batches_tracked
                                              is optional there, nothing else may be extra
       input_b<B>_s<S>_seed<seed>.safetensors  "input" F32 [B,3,S,S]
       labels_b<B>_c<C>_seed<seed>.safetensors "labels" I64 [B]
  3. The reference step on --device (default cuda) in fp32 with TF32 off (cuDNN convolutions and
     cuBLAS matmuls; torch >= 2.9's fp32_precision="ieee", else allow_tf32=False),
     cudnn.deterministic: model.train() (BatchNorm in training mode: batch statistics, running
     statistics updated with momentum 0.1 and the unbiased variance, num_batches_tracked + 1),
     loss = CrossEntropyLoss (mean over the batch), backward, torch.optim.SGD(lr, momentum,
     weight_decay).step() from a fresh optimizer (so the momentum buffer is grad + wd * w).
     With --fp64 also the same step in float64 on the same device (a deep copy of the initial model,
     .double(), x.double(), the same labels and SGD settings; TF32 does not apply).
  4. Writes reference_<network>_b<B>_seed<seed>.json: the settings, "loss", "grad_norms" (L2 norm
     of each parameter's gradient dL/dp, before weight decay), "updated_weight_norms",
     "relative_change" (||w1 - w0|| / ||w0|| per parameter) and "relative_change_summary" (with
     --fp64 also "fp64": the float64 step's "loss" and "grad_norms"); and
     reference_updated_<network>_b<B>_seed<seed>.safetensors: the state_dict after the fp32 step.
  5. Only with --binary PATH: runs
       PATH --network=N --weights=W --input=X --labels=Y --batch=B --input_size=S --num_classes=C
            --precision=fp32 --optimizer=sgd --lr=LR --momentum=M --weight_decay=WD
            --output=OURS.safetensors --report=OURS.json  [--dropout=0]  [--extra ...]
     (--dropout=0, the binary's override of every dropout probability of the graph, only for the
     networks that have dropout.)
     The binary's contract: load W (as cnnbench_infer --weights), X and Y; run one training step as
     in 3.; write OURS.safetensors holding every floating-point tensor of W, updated (parameters
     after the SGD step, BN running statistics after the forward), F32 (num_batches_tracked may be
     left out; where present it must equal the reference's); write OURS.json, an object with
     "loss": number (the mean cross-entropy of the step's forward, before the update) and
     "grad_norms": {parameter name: L2 norm of dL/dp before weight decay} for every trainable
     parameter (torchvision's named_parameters() names). Exit status 0 on success.
     Then compares (compare_loss, compare_norms, judge_rel_errors, all pure functions):
       loss relative error < --loss-tol (1e-4);
       per-parameter gradient-norm relative error < --grad-tol (1e-3), the worst --worst (10)
       listed; a parameter missing from grad_norms, an unknown one, or a non-finite value fails;
       each updated tensor's relative L2 error ||ours - ref|| / ||ref|| < --weight-tol (1e-4), the
       worst listed; a missing tensor fails.
  6. Only with --fp64 (which needs --binary): "is cnnbench's fp32 step as exact as PyTorch's fp32
     step". For the loss, each gradient norm and each updated floating-point tensor (parameters and
     BN running statistics), PyTorch fp32's relative error against the float64 step and ours'
     (compare_fp64, judge_fp64, fp64_verdict, pure functions), side by side, the worst --worst
     listed by ours' error, with the max and median of each. One fails where ours' error is over
     --fp64-factor (2) x PyTorch fp32's AND over a floor, the fp32 check's tolerance / 10 (loss
     1e-5, gradient norms 1e-4, tensors 1e-5 by default); a non-finite error (either side), a
     missing or unknown name fails too. Rounding noise is judged apart: where PyTorch fp32's own
     error is at least 1 (not one correct digit: the value is 0 in exact arithmetic, to fp32's
     precision; vgg16_bn's convolution biases ahead of BatchNorm, their gradients and, from 0,
     updated values) ours' fails only over --fp64-noise-factor (100) x PyTorch fp32's, so that
     noise against noise passes and a real error (orders of magnitude over it) does not; these
     are counted and listed as "noise" and left out of the max and median. Printed after the
     fp32 verdict, its lines starting "fp64"; --out's "fp64" key.

Exit status: 0 the reference was written (without --binary) or every check passed; 1 a check
failed; 2 bad arguments, no CUDA device (unless --device cpu), or the binary failed (non-zero
exit, timeout, missing or malformed output; its stderr is printed). With --fp64 the fp64 check
(6.) alone decides between 0 and 1; the fp32 verdict is still printed and is --out's "pass".
--out writes the verdict as JSON ("exit_status", and "verdict_from": "fp32" or "fp64").

Networks: resnet50 (default) and resnet152, which have no dropout or stochastic depth, so a step
is fully determined by weights and batch; vgg16, vgg16_bn and alexnet, whose classifiers have
nn.Dropout: the tool sets every dropout module's p to 0 before the step and passes --dropout=0 to
the binary, so theirs is too (AlexNet needs --input-size >= 63; VGG and AlexNet at 224, batch 8,
are fine). vgg16_bn's 13 convolution biases ahead of BatchNorm have gradients 0 in exact
arithmetic (and stay near their initial 0): PyTorch's fp32 values are rounding noise, which the
fp32 check compares as it stands (it fails there unless ours' noise is the same), --fp64 as noise
(step 6). Needs torch and torchvision (imported where used, so the comparison logic is testable
without them); the safetensors files are written by crosscheck_torchvision.write_safetensors (the
safetensors library where installed).
"""
import argparse
import copy
import datetime
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

NETWORKS = ("resnet50", "resnet152", "vgg16", "vgg16_bn", "alexnet")
DROPOUT_NETWORKS = ("vgg16", "vgg16_bn", "alexnet")  # run with dropout p = 0 (--dropout=0)
MIN_INPUT_SIZE = {"resnet50": (32, "ResNet's five stride-2 stages"),
                  "resnet152": (32, "ResNet's five stride-2 stages"),
                  "vgg16": (32, "VGG's five 2x2 max pools"),
                  "vgg16_bn": (32, "VGG's five 2x2 max pools"),
                  "alexnet": (63, "AlexNet's stride-4 11x11 convolution and three 3x3 stride-2 "
                                  "max pools")}
DEFAULTS = {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4}
LOSS_TOL, GRAD_TOL, WEIGHT_TOL = 1e-4, 1e-3, 1e-4
FP64_FACTOR = 2.0  # --fp64: ours' error against fp64 may be up to this x PyTorch fp32's
FP64_FLOOR_DIVISOR = 10  # --fp64: errors below the fp32 check's tolerance / this always pass
FP64_NOISE_LEVEL = 1.0  # --fp64: PyTorch fp32's error at least this: the value is rounding noise
FP64_NOISE_FACTOR = 100.0  # --fp64: ours' error on noise may be up to this x PyTorch fp32's


# --------------------------------------------------------------------------------------------
# Pure comparison logic (numbers, dicts and lists in; verdicts out)
# --------------------------------------------------------------------------------------------
def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def rel_err(ours, ref):
    """|ours - ref| / |ref| (|ours - ref| where ref is 0); inf where either is not finite."""
    if not (is_number(ours) and is_number(ref)) or not (math.isfinite(ours)
                                                         and math.isfinite(ref)):
        return math.inf
    diff = abs(ours - ref)
    return diff / abs(ref) if ref != 0 else diff


def compare_loss(ours, ref, tol=LOSS_TOL):
    e = rel_err(ours, ref)
    return {"ok": e < tol, "ours": ours, "ref": ref, "rel_err": e, "tol": tol}


def judge_rel_errors(errors, expected, tol, worst=10):
    """Per-tensor relative errors against their tolerance.

    errors: {name: relative error (float, inf/nan for non-finite)} of the tensors compared;
    expected: every name that must be there. Returns {"ok", "checked", "failing", "max_rel",
    "worst": [[name, rel], ...] largest first, "missing": [...], "extra": [...]}.
    """
    missing = sorted(set(expected) - set(errors))
    extra = sorted(set(errors) - set(expected))
    checked = {k: v for k, v in errors.items() if k in set(expected)}

    def key(kv):
        v = kv[1]
        return math.inf if not is_number(v) or math.isnan(v) else v

    ranked = sorted(checked.items(), key=lambda kv: (-key(kv), kv[0]))
    failing = [k for k, v in ranked if not key((k, v)) < tol]
    return {"ok": not failing and not missing and not extra, "checked": len(checked),
            "failing": len(failing), "max_rel": key(ranked[0]) if ranked else None,
            "worst": [[k, v] for k, v in ranked[:worst]], "missing": missing, "extra": extra,
            "tol": tol}


def compare_norms(ours, ref, tol=GRAD_TOL, worst=10):
    """Gradient norms {name: norm} of ours against the reference's, per parameter."""
    errors = {k: rel_err(v, ref[k]) for k, v in ours.items() if k in ref}
    errors.update({k: math.inf for k in ours if k not in ref})  # reported as extra
    res = judge_rel_errors(errors, list(ref), tol, worst)
    res["worst"] = [[k, e, ours.get(k), ref.get(k)] for k, e in res["worst"]]
    return res


def verdict(loss, grads, weights):
    """(passed, lines): the three checks' results as one verdict and a readable summary."""
    lines = [f"loss          ours {fmt(loss['ours'])}  ref {fmt(loss['ref'])}  rel err "
             f"{fmt(loss['rel_err'])}  (tol {loss['tol']:.0e})  {'ok' if loss['ok'] else 'FAIL'}"]
    for title, res in (("grad norms", grads), ("updated weights", weights)):
        lines.append(f"{title:<14}{res['checked']} compared, {res['failing']} over tol "
                     f"{res['tol']:.0e}, max rel err {fmt(res['max_rel'])}  "
                     f"{'ok' if res['ok'] else 'FAIL'}")
        if res["missing"]:
            lines.append(f"  missing ({len(res['missing'])}): {', '.join(res['missing'][:10])}")
        if res["extra"]:
            lines.append(f"  unknown ({len(res['extra'])}): {', '.join(res['extra'][:10])}")
        for w in res["worst"]:
            tail = f"  (ours {fmt(w[2])}, ref {fmt(w[3])})" if len(w) > 2 else ""
            lines.append(f"    {w[0]:<40} {fmt(w[1])}{tail}")
    passed = loss["ok"] and grads["ok"] and weights["ok"]
    lines.append("PASS" if passed else "FAIL")
    return passed, lines


def error_key(v):
    """An error as a sort key and statistic: inf for NaN or a non-number."""
    return math.inf if not is_number(v) or math.isnan(v) else v


def error_ratio(ours, torch32):
    """ours / torch32 of two errors; inf where only torch32's is 0; None where both are 0 or
    either is not finite."""
    o, t = error_key(ours), error_key(torch32)
    if not (math.isfinite(o) and math.isfinite(t)):
        return None
    if t > 0:
        return o / t
    return math.inf if o > 0 else None


def judge_fp64(ours, torch32, expected, floor, factor=FP64_FACTOR, worst=10,
               noise_factor=FP64_NOISE_FACTOR):
    """Ours' errors against PyTorch's float64 step beside PyTorch fp32's, per name.

    ours, torch32: {name: error against fp64 (relative; inf/NaN for non-finite)}; expected: every
    name that must be there. A name fails where either error is not finite, or where ours' is over
    factor x the largest torch32 error of the set (noise names aside) and over the absolute floor;
    the set fails too where ours' median error is over factor x torch32's median and the floor.
    Not per name against torch32's own error: two fp32 steps' rounding errors on one tensor are
    two draws of the same size, and on ResNet-50 (device call 18) their ratio ran from 0.4 to 19.5
    over 161 gradient norms while the two maxima (5.96e-3, 5.74e-3) and medians (3.8e-4, 2.7e-4)
    agreed. Each name's ours/torch32 ratio is still listed. A "noise" name, whose torch32 error is at least
    FP64_NOISE_LEVEL (1: not one correct digit, so the value is 0 in exact arithmetic to fp32's
    precision, as the gradient of a convolution's bias ahead of BatchNorm), fails only where ours'
    error is over noise_factor x torch32's: fp32 rounding noise against noise. The check fails on
    any failing name, a name missing from ours or torch32, or one in ours that is not expected.
    Returns {"ok", "checked", "failing" (count), "failing_names", "over" (ours > factor x torch32's
    largest and > floor: count), "median_ok", "noise_over" (noise names over noise_factor: count), "non_finite": [...],
    "noise": [...], "missing", "missing_torch32", "extra", "ours":
    {"max", "median"} and "torch32": {"max", "median"} (over the checked names but noise), "worst"
    and "noise_worst": [[name, ours, torch32, ratio], ...] by ours' error, largest first, "floor",
    "factor", "noise_factor"}.
    """
    exp = set(expected)
    missing = sorted(exp - set(ours))
    missing32 = sorted(exp - set(torch32))
    extra = sorted(set(ours) - exp)
    checked = [k for k in ours if k in exp and k in torch32]
    ranked = sorted(checked, key=lambda k: (-error_key(ours[k]), k))
    over, noise_over, non_finite, noise = [], [], [], []
    plain32 = [error_key(torch32[k]) for k in checked
               if math.isfinite(error_key(torch32[k])) and error_key(torch32[k]) < FP64_NOISE_LEVEL]
    max32 = max(plain32) if plain32 else 0.0
    for k in ranked:
        o, t = error_key(ours[k]), error_key(torch32[k])
        if not (math.isfinite(o) and math.isfinite(t)):
            non_finite.append(k)
        elif t >= FP64_NOISE_LEVEL:
            noise.append(k)
            if o > noise_factor * t:
                noise_over.append(k)
        elif o > factor * max32 and o > floor:
            over.append(k)

    def stats(vals):
        vals = [error_key(v) for v in vals]
        return ({"max": max(vals), "median": statistics.median(vals)} if vals else
                {"max": None, "median": None})

    def rows(names):
        return [[k, ours[k], torch32[k], error_ratio(ours[k], torch32[k])] for k in names[:worst]]

    bad, noisy = set(over) | set(noise_over) | set(non_finite), set(noise)
    failing = [k for k in ranked if k in bad]
    plain = [k for k in ranked if k not in noisy]
    so, st = stats(ours[k] for k in plain), stats(torch32[k] for k in plain)
    median_ok = (so["median"] is None or so["median"] <= floor
                 or so["median"] <= factor * st["median"])
    return {"ok": not failing and median_ok and not missing and not missing32 and not extra,
            "median_ok": median_ok,
            "checked": len(checked), "failing": len(failing), "failing_names": failing,
            "over": len(over), "noise_over": len(noise_over), "non_finite": non_finite,
            "noise": noise, "missing": missing, "missing_torch32": missing32, "extra": extra,
            "ours": so, "torch32": st,
            "worst": rows(plain), "noise_worst": rows(noise), "floor": floor, "factor": factor,
            "noise_factor": noise_factor}


def fp64_norm_errors(ours, torch32, fp64):
    """(ours', torch32's) {name: relative error against fp64's value} of {name: number} dicts,
    over the names fp64 has; ours' names that fp64 lacks get inf (judge_fp64: unknown)."""
    eo = {k: rel_err(v, fp64[k]) if k in fp64 else math.inf for k, v in ours.items()}
    et = {k: rel_err(v, fp64[k]) for k, v in torch32.items() if k in fp64}
    return eo, et


def compare_fp64(loss, grads, tensors, tensor_names, tols=(LOSS_TOL, GRAD_TOL, WEIGHT_TOL),
                 factor=FP64_FACTOR, worst=10, noise_factor=FP64_NOISE_FACTOR):
    """The --fp64 check: judge_fp64 of the loss, the gradient norms and the updated tensors.

    loss: (ours, torch32, fp64) numbers; grads: (ours, torch32, fp64) {name: norm}; tensors:
    (ours, torch32) {name: relative L2 error against fp64's updated tensor}; tensor_names: fp64's
    floating-point tensors (parameters and BN running statistics); tols: the fp32 check's (loss,
    grad, weight) tolerances, whose tenths (FP64_FLOOR_DIVISOR) are the floors. Returns {"loss"
    (with "ours_value", "torch32_value", "fp64_value"), "grad_norms", "updated_weights"}.
    """
    lo, lt, l64 = loss
    kw = {"factor": factor, "worst": worst, "noise_factor": noise_factor}
    res_loss = judge_fp64({"loss": rel_err(lo, l64)}, {"loss": rel_err(lt, l64)}, ["loss"],
                          tols[0] / FP64_FLOOR_DIVISOR, **kw)
    res_loss.update({"ours_value": lo, "torch32_value": lt, "fp64_value": l64})
    eo, et = fp64_norm_errors(*grads)
    res_grads = judge_fp64(eo, et, list(grads[2]), tols[1] / FP64_FLOOR_DIVISOR, **kw)
    res_weights = judge_fp64(tensors[0], tensors[1], tensor_names, tols[2] / FP64_FLOOR_DIVISOR,
                             **kw)
    return {"loss": res_loss, "grad_norms": res_grads, "updated_weights": res_weights}


def fp64_verdict(res):
    """(passed, lines) of compare_fp64's result; every summary line starts with "fp64"."""
    def ratio(r):
        return "n/a" if r is None else f"{r:.3g}"

    lw = res["loss"]
    factor = lw["factor"]
    lines = [f"fp64 check: errors against PyTorch's float64 step, ours beside PyTorch fp32's "
             f"(torch32); a tensor fails where ours > {factor:g}x torch32's largest error and > the "
             f"floor, a set where ours' median > {factor:g}x torch32's (noise, torch32 err >= "
             f"{FP64_NOISE_LEVEL:g}: ours > {lw['noise_factor']:g}x torch32's own)"]
    row = (lw["worst"] + lw["noise_worst"])[:1]
    if row:
        _, eo, et, r = row[0]
        lines.append(f"fp64 {'loss':<16}ours {fmt(eo)}  torch32 {fmt(et)}  ours/torch32 "
                     f"{ratio(r)}  (floor {lw['floor']:.0e})  {'ok' if lw['ok'] else 'FAIL'}")
    else:
        lines.append(f"fp64 {'loss':<16}not compared  FAIL")
    for title, key in (("grad norms", "grad_norms"), ("updated weights", "updated_weights")):
        r = res[key]
        lines.append(f"fp64 {title:<16}{r['checked']} compared, {r['over']} over {factor:g}x "
                     f"torch32's max and floor {r['floor']:.0e}, {len(r['non_finite'])} non-finite, "
                     f"{len(r['noise'])} noise ({r['noise_over']} over "
                     f"{r['noise_factor']:g}x); max ours {fmt(r['ours']['max'])} torch32 "
                     f"{fmt(r['torch32']['max'])}, median ours {fmt(r['ours']['median'])} "
                     f"torch32 {fmt(r['torch32']['median'])}"
                     f"{'' if r['median_ok'] else ' (median over)'}  {'ok' if r['ok'] else 'FAIL'}")
        for what, field in (("missing", "missing"), ("missing in torch32", "missing_torch32"),
                            ("unknown", "extra")):
            if r[field]:
                lines.append(f"  {what} ({len(r[field])}): {', '.join(r[field][:10])}")
        if r["worst"] or r["noise_worst"]:
            lines.append(f"    {'':<40} {'ours':<10} {'torch32':<10} ours/torch32")
        for name, eo, et, q in r["worst"] + r["noise_worst"]:
            mark = "  FAIL" if name in r["failing_names"] else ""
            tag = "  (noise)" if name in r["noise"] else ""
            lines.append(f"    {name:<40} {fmt(eo):<10} {fmt(et):<10} {ratio(q)}{tag}{mark}")
    passed = all(res[k]["ok"] for k in ("loss", "grad_norms", "updated_weights"))
    lines.append("fp64 PASS" if passed else "fp64 FAIL")
    return passed, lines


def parse_report(obj, path="report"):
    """(loss, grad_norms) of the binary's report JSON, or ValueError saying what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: not a JSON object")
    if not is_number(obj.get("loss")):
        raise ValueError(f"{path}: no number \"loss\"")
    norms = obj.get("grad_norms")
    if not isinstance(norms, dict) or not norms:
        raise ValueError(f"{path}: no object \"grad_norms\" of parameter name -> norm")
    bad = [k for k, v in norms.items() if not is_number(v)]
    if bad:
        raise ValueError(f"{path}: grad_norms[{bad[0]!r}] is not a number")
    return float(obj["loss"]), {k: float(v) for k, v in norms.items()}


def change_summary(changes):
    """{min, median, max, max_name} of {name: relative change}."""
    if not changes:
        return {}
    name = max(changes, key=lambda k: changes[k])
    vals = list(changes.values())
    return {"min": min(vals), "median": statistics.median(vals), "max": changes[name],
            "max_name": name}


def fmt(v):
    return "n/a" if v is None else f"{v:.3e}"


def binary_command(args, files):
    cmd = [args.binary, f"--network={args.network}", f"--weights={files['weights']}",
           f"--input={files['input']}", f"--labels={files['labels']}", f"--batch={args.batch}",
           f"--input_size={args.input_size}", f"--num_classes={args.num_classes}",
           "--precision=fp32", "--optimizer=sgd", f"--lr={args.lr!r}",
           f"--momentum={args.momentum!r}", f"--weight_decay={args.weight_decay!r}",
           f"--output={files['ours']}", f"--report={files['ours_report']}"]
    if args.network in DROPOUT_NETWORKS:
        cmd.append("--dropout=0")  # the binary's override of every dropout probability
    return cmd + shlex.split(args.extra)


def file_names(workdir, args):
    n, b, s, c, seed = args.network, args.batch, args.input_size, args.num_classes, args.seed
    j = os.path.join
    return {"weights": j(workdir, f"{n}_seed{seed}.safetensors"),
            "input": j(workdir, f"input_b{b}_s{s}_seed{seed}.safetensors"),
            "labels": j(workdir, f"labels_b{b}_c{c}_seed{seed}.safetensors"),
            "reference": j(workdir, f"reference_{n}_b{b}_seed{seed}.json"),
            "reference_updated": j(workdir, f"reference_updated_{n}_b{b}_seed{seed}.safetensors"),
            "ours": j(workdir, f"ours_updated_{n}_b{b}_seed{seed}.safetensors"),
            "ours_report": j(workdir, f"ours_report_{n}_b{b}_seed{seed}.json")}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="One SGD step of a torchvision network as the "
                                             "reference for cnnbench's training step.")
    ap.add_argument("--network", default="resnet50", choices=NETWORKS)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--input-size", type=int, default=224)
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=DEFAULTS["lr"])
    ap.add_argument("--momentum", type=float, default=DEFAULTS["momentum"])
    ap.add_argument("--weight-decay", type=float, default=DEFAULTS["weight_decay"])
    ap.add_argument("--device", default=None, choices=("cuda", "cpu"),
                    help="where the reference runs (default cuda; no CUDA device is an error)")
    ap.add_argument("--workdir", default=None, help="where the files go (kept); a temp dir "
                                                    "otherwise (then only useful with --binary)")
    ap.add_argument("--binary", default=None, help="cnnbench's training-step tool to check")
    ap.add_argument("--extra", default="", help="extra arguments appended to the binary's command")
    ap.add_argument("--timeout", type=float, default=600, help="seconds allowed for the binary")
    ap.add_argument("--loss-tol", type=float, default=LOSS_TOL)
    ap.add_argument("--grad-tol", type=float, default=GRAD_TOL)
    ap.add_argument("--weight-tol", type=float, default=WEIGHT_TOL)
    ap.add_argument("--worst", type=int, default=10, help="how many of the worst to list")
    ap.add_argument("--fp64", action="store_true",
                    help="also the step in float64: judge ours' and PyTorch fp32's errors against "
                         "it (this check decides the exit status; needs --binary)")
    ap.add_argument("--fp64-factor", type=float, default=FP64_FACTOR,
                    help="--fp64: ours' error may be up to this x PyTorch fp32's (default 2)")
    ap.add_argument("--fp64-noise-factor", type=float, default=FP64_NOISE_FACTOR,
                    help="--fp64: the same for rounding noise, where PyTorch fp32's error is at "
                         "least 1 (default 100; --fp64-factor's value: the plain rule)")
    ap.add_argument("--out", default=None, help="write the verdict JSON here")
    args = ap.parse_args(argv)
    if args.batch < 1:
        ap.error(f"--batch must be positive, not {args.batch}")
    least, why = MIN_INPUT_SIZE[args.network]
    if args.input_size < least:
        ap.error(f"--input-size must be at least {least} for {args.network} ({why}), not "
                 f"{args.input_size}")
    if args.num_classes < 2:
        ap.error("--num-classes must be at least 2")
    if not args.lr > 0:
        ap.error("--lr must be positive")
    if args.momentum < 0 or args.weight_decay < 0:
        ap.error("--momentum and --weight-decay must not be negative")
    for k in ("loss_tol", "grad_tol", "weight_tol"):
        if not getattr(args, k) > 0:
            ap.error(f"--{k.replace('_', '-')} must be positive")
    if args.worst < 0:
        ap.error("--worst must not be negative")
    for k in ("fp64_factor", "fp64_noise_factor"):
        if not getattr(args, k) > 0:
            ap.error(f"--{k.replace('_', '-')} must be positive")
    if args.fp64 and not args.binary:
        ap.error("--fp64 compares the binary's step against float64: it needs --binary")
    return args


# --------------------------------------------------------------------------------------------
# The torch part
# --------------------------------------------------------------------------------------------
def disable_dropout(torch, model):
    """Sets every dropout module's p to 0; how many there are."""
    kinds = getattr(torch.nn.modules.dropout, "_DropoutNd", torch.nn.Dropout)  # Dropout, 2d, ...
    n = 0
    for m in model.modules():
        if isinstance(m, kinds):
            m.p = 0.0
            n += 1
    return n


def make_problem(torch, torchvision, args):
    """(model on the CPU in train mode, dropout p = 0, x, labels), all from
    torch.manual_seed(seed)."""
    torch.manual_seed(args.seed)
    model = getattr(torchvision.models, args.network)(weights=None, num_classes=args.num_classes)
    n = disable_dropout(torch, model)
    if (n > 0) != (args.network in DROPOUT_NETWORKS):  # the binary gets --dropout=0 by the list
        raise RuntimeError(f"{args.network} has {n} dropout modules: DROPOUT_NETWORKS is wrong")
    x = torch.randn(args.batch, 3, args.input_size, args.input_size, dtype=torch.float32)
    labels = torch.randint(0, args.num_classes, (args.batch,), dtype=torch.int64)
    return model.train(), x, labels


def reference_step(torch, model, x, labels, args, device, dtype=None):
    """One SGD step on `device` (in place: `model` is moved and stepped) in `dtype` where given
    (model and x converted to it; float32 as they are otherwise); (loss, grad norms, updated
    state_dict on the CPU)."""
    kw = {} if dtype is None else {"dtype": dtype}
    model = model.to(device, **kw).train()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay)
    opt.zero_grad(set_to_none=True)
    out = model(x.to(device, **kw))
    loss = torch.nn.functional.cross_entropy(out, labels.to(device))
    loss.backward()
    grad_norms = {n: p.grad.double().norm().item() for n, p in model.named_parameters()
                  if p.grad is not None}
    opt.step()
    updated = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    return loss.item(), grad_norms, updated


def tensor_rel_errors(torch, ours, ref):
    """{name: ||ours - ref|| / ||ref|| in float64} over ref's floating-point tensors present in
    ours (inf for a shape mismatch or non-finite values); integer tensors: 0 if equal, else inf."""
    out = {}
    for k, r in ref.items():
        if k not in ours:
            continue
        o = ours[k]
        if tuple(o.shape) != tuple(r.shape):
            out[k] = math.inf
        elif not r.is_floating_point():
            out[k] = 0.0 if torch.equal(o.to(r.dtype), r) else math.inf
        else:
            d = (o.double() - r.double()).norm().item()
            n = r.double().norm().item()
            e = d / n if n > 0 else d
            out[k] = e if math.isfinite(e) else math.inf
    return out


def set_tf32_off(torch):
    cudnn_conv = getattr(torch.backends.cudnn, "conv", None)
    if cudnn_conv is not None and hasattr(cudnn_conv, "fp32_precision"):
        cudnn_conv.fp32_precision = "ieee"
        torch.backends.cuda.matmul.fp32_precision = "ieee"
    else:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False


def write_json(path, obj):
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def run_binary(cmd, timeout):
    """(ok, completed process or None, message)."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
    except (FileNotFoundError, PermissionError) as e:
        return False, None, f"cannot run the binary {cmd[0]}: {e.strerror}"
    except subprocess.TimeoutExpired:
        return False, None, f"binary timed out after {timeout:g} s"
    if p.returncode != 0:
        return False, p, f"binary exited with status {p.returncode}"
    return True, p, ""


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
        import torchvision
    except ImportError as e:
        print(f"error: this check needs torch and torchvision ({e})", file=sys.stderr)
        return 2
    device = args.device or "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA device (--device cpu runs the reference on the CPU)",
              file=sys.stderr)
        return 2
    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="cnnbench_train_crosscheck_")
        workdir = tmp.name
    else:
        workdir = args.workdir
        os.makedirs(workdir, exist_ok=True)
    try:
        return check(torch, torchvision, args, torch.device(device), workdir)
    finally:
        if tmp is not None:
            tmp.cleanup()


def check(torch, torchvision, args, device, workdir):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import crosscheck_torchvision as xc  # its safetensors writer and reader

    files = file_names(workdir, args)
    for k in ("ours", "ours_report"):
        if os.path.exists(files[k]):
            os.remove(files[k])  # never compare against a previous run's output
    model, x, labels = make_problem(torch, torchvision, args)
    before = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    xc.write_safetensors(before, files["weights"])
    xc.write_safetensors({"input": x.contiguous()}, files["input"])
    xc.write_safetensors({"labels": labels.contiguous()}, files["labels"])

    set_tf32_off(torch)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    model64 = copy.deepcopy(model) if args.fp64 else None  # the initial model: steps are in place
    loss, grad_norms, updated = reference_step(torch, model, x, labels, args, device)
    ref64 = None
    if model64 is not None:
        ref64 = reference_step(torch, model64, x, labels, args, device, torch.float64)
    del model, model64  # the results are on the CPU: leave the GPU to the binary
    if device.type == "cuda":
        torch.cuda.empty_cache()
    params = list(grad_norms)
    changes = {k: ((updated[k].double() - before[k].double()).norm()
                   / before[k].double().norm().clamp_min(1e-300)).item() for k in params}
    xc.write_safetensors(updated, files["reference_updated"])
    head = {"network": args.network, "batch": args.batch, "input_size": args.input_size,
            "num_classes": args.num_classes, "seed": args.seed, "precision": "fp32",
            "tf32": False, "optimizer": "sgd", "lr": args.lr, "momentum": args.momentum,
            "weight_decay": args.weight_decay, "device": str(device),
            "dropout": 0.0 if args.network in DROPOUT_NETWORKS else None,
            "files": {k: files[k] for k in ("weights", "input", "labels", "reference_updated")}}
    reference = {**head, "loss": loss, "grad_norms": grad_norms,
                 "updated_weight_norms": {k: updated[k].double().norm().item() for k in params},
                 "relative_change": changes, "relative_change_summary": change_summary(changes),
                 "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                              "cudnn": torch.backends.cudnn.version(),
                              "gpu": (torch.cuda.get_device_name(device)
                                      if device.type == "cuda" else None)},
                 "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}
    if ref64 is not None:
        reference["fp64"] = {"loss": ref64[0], "grad_norms": ref64[1]}
    write_json(files["reference"], reference)
    s = reference["relative_change_summary"]
    print(f"reference: {args.network} batch {args.batch} at {args.input_size} px on {device}: "
          f"loss {loss:.6f}, {len(params)} parameters, relative change median "
          f"{s['median']:.3e}, max {s['max']:.3e} ({s['max_name']})")
    if ref64 is not None:
        print(f"  float64 step: loss {ref64[0]:.6f} (the fp32 step's relative error "
              f"{fmt(rel_err(loss, ref64[0]))})")
    print(f"  written: {files['reference']}")
    if not args.binary:
        write_json(args.out, {**head, "reference": files["reference"], "checked": False})
        return 0

    cmd = binary_command(args, files)
    print("running:", " ".join(shlex.quote(c) for c in cmd), flush=True)
    ok, proc, msg = run_binary(cmd, args.timeout)
    ours_loss = ours_norms = ours_tensors = None
    if ok:
        if proc.stderr.strip():
            sys.stderr.write(proc.stderr)
        try:
            for k in ("ours", "ours_report"):
                if not os.path.exists(files[k]):
                    raise ValueError(f"the binary exited 0 but wrote no {files[k]}")
            with open(files["ours_report"]) as f:
                ours_loss, ours_norms = parse_report(json.load(f), files["ours_report"])
            ours_tensors, _ = xc.read_safetensors(files["ours"])
        except Exception as e:  # noqa: BLE001 - any unreadable output is the binary's failure
            ok, msg = False, str(e)
    if not ok:
        print(f"FAIL: {msg}", file=sys.stderr)
        if proc is not None and proc.returncode != 0:
            sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-20000:])
        write_json(args.out, {**head, "pass": False, "binary_failed": True, "error": msg,
                              "command": cmd})
        return 2

    expected = [k for k, v in updated.items() if v.is_floating_point()]
    expected += [k for k, v in updated.items() if not v.is_floating_point() and k in ours_tensors]
    errors = tensor_rel_errors(torch, ours_tensors, updated)
    errors.update({k: math.inf for k in ours_tensors if k not in updated})
    res_loss = compare_loss(ours_loss, loss, args.loss_tol)
    res_grads = compare_norms(ours_norms, grad_norms, args.grad_tol, args.worst)
    res_weights = judge_rel_errors(errors, expected, args.weight_tol, args.worst)
    passed, lines = verdict(res_loss, res_grads, res_weights)
    print("\n".join(lines))
    doc = {**head, "pass": passed, "command": cmd, "loss": res_loss, "grad_norms": res_grads,
           "updated_weights": res_weights, "reference": files["reference"], "verdict_from": "fp32",
           "exit_status": 0 if passed else 1}
    if ref64 is not None:
        loss64, norms64, updated64 = ref64
        names64 = [k for k, v in updated64.items() if v.is_floating_point()]
        ours64 = tensor_rel_errors(torch, ours_tensors, updated64)
        ours64 = {k: v for k, v in ours64.items() if updated64[k].is_floating_point()}
        ours64.update({k: math.inf for k in ours_tensors if k not in updated64})
        torch64 = tensor_rel_errors(torch, updated, updated64)
        res64 = compare_fp64((ours_loss, loss, loss64), (ours_norms, grad_norms, norms64),
                             (ours64, torch64), names64,
                             (args.loss_tol, args.grad_tol, args.weight_tol), args.fp64_factor,
                             args.worst, args.fp64_noise_factor)
        passed64, lines64 = fp64_verdict(res64)
        print("\n".join([""] + lines64))
        print(f"exit status from the fp64 check: {'PASS' if passed64 else 'FAIL'} (fp32 check: "
              f"{'PASS' if passed else 'FAIL'})")
        doc.update({"fp64": {"pass": passed64, "factor": args.fp64_factor,
                             "noise_factor": args.fp64_noise_factor, **res64},
                    "verdict_from": "fp64", "exit_status": 0 if passed64 else 1})
    write_json(args.out, doc)
    return doc["exit_status"]


if __name__ == "__main__":
    sys.exit(main())
