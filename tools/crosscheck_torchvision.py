#!/usr/bin/env python3
"""Correctness check of our native networks against torchvision on the same weights and input.

Networks: every one of ours that torchvision defines (NETWORKS): alexnet, vgg16/vgg19 (+_bn),
inception_v3, resnet50, resnet152, efficientnet_b0..b7.

Steps:
  1. torch.manual_seed(seed); build torchvision.models.<network>(weights=None, MODEL_KWARGS) and
     give every BatchNorm non-trivial affine parameters and running statistics (see
     randomize_batchnorm), so that our BN folding is exercised (alexnet and vgg16/vgg19 have no
     BN: nothing to randomize); eval(). inception_v3 is built as ours: aux_logits=False,
     transform_input=False (init_weights=False: PyTorch's default init, faster). For ResNet-152
     the residual branches are damped to keep activations within fp16 range (see
     DEFAULT_BRANCH_SCALE).
  2. Save its state_dict (all entries, num_batches_tracked included) and a random input
     x ~ N(0,1) [batch,3,S,S] float32 (single tensor "input") as safetensors files; S is the
     network's input size (INPUT_SIZE: 299 for inception_v3, the EfficientNet resolutions,
     224 otherwise; --input-size overrides). --dry-run stops here, after reading the files'
     headers back and checking every tensor's name, dtype, shape and byte range.
  3. Run  <binary> --network N --precision P --batch B --weights W --input X --output Y
     --input_size S <extra>; the binary writes Y with the tensor "logits" float32 [batch,1000].
  4. Compare with torchvision in float64 (GPU if available, else CPU): relative L2 error,
     max abs difference, top-1 agreement. For information also torch's own float32 error
     (TF32 off) and, on a GPU, torch's own error at the requested precision.

Exit status: 0 pass (or, with --dry-run, the files were written and read back correctly);
1 relative L2 > threshold or anything non-finite (--dry-run: a written file is wrong); 2 the
binary failed (its stderr is printed) or did not write the expected output.

Needs torch and torchvision; safetensors is used to write and read the files where it is
installed (imported only there), else a minimal writer/reader of the same format in this file.
"""
import argparse
import copy
import datetime
import json
import math
import os
import shlex
import struct
import subprocess
import sys
import tempfile

import torch
import torchvision

NETWORKS = ("alexnet", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn", "inception_v3", "resnet50",
            "resnet152") + tuple(f"efficientnet_b{i}" for i in range(8))
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
DEFAULT_THRESHOLD = {"fp32": 1e-4, "tf32": 1e-3, "fp16": 2e-2, "bf16": 2e-2}
NUM_CLASSES = 1000
# Input side per network (our defaults, shared/reference/networks.md); every other one: 224.
INPUT_SIZE = {"inception_v3": 299, "efficientnet_b1": 240, "efficientnet_b2": 260,
              "efficientnet_b3": 300, "efficientnet_b4": 380, "efficientnet_b5": 456,
              "efficientnet_b6": 528, "efficientnet_b7": 600}
# torchvision constructor arguments besides weights=None: inception_v3 as our network builds it.
MODEL_KWARGS = {"inception_v3": {"aux_logits": False, "transform_input": False,
                                 "init_weights": False}}


def input_size_for(network, override=None):
    return override or INPUT_SIZE.get(network, 224)


# --------------------------------------------------------------------------------------------
# Model and data
# --------------------------------------------------------------------------------------------
# Untrained torchvision ResNets with eval-mode BN that normalises nothing (running stats ~1, not
# the activations' real statistics) have a residual stream that grows ~1.4x per block: fine for
# ResNet-50 (largest activation ~6e3), but ResNet-152's reach ~1e12 and overflow fp16 (max 65504).
# So the last conv of every bottleneck is scaled down by this factor (the branch then adds ~10% of
# the stream's variance per block; largest activation ~8e2). Measured on CPU with fp16-rounding
# emulation, seed 0: both defaults stay finite and keep the model well conditioned (torch fp32
# rel L2 ~1e-6). Override with --branch-scale.
DEFAULT_BRANCH_SCALE = {"resnet50": 1.0, "resnet152": 0.3}


@torch.no_grad()
def randomize_batchnorm(model):
    """Every BN: weight ~U(0.5,1.5), bias ~N(0,0.1), running_mean ~N(0,0.1), running_var ~U(0.5,1.5).

    num_batches_tracked is left as it is (0); it is saved with the state_dict all the same.
    """
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.weight.uniform_(0.5, 1.5)
            m.bias.normal_(0.0, 0.1)
            m.running_mean.normal_(0.0, 0.1)
            m.running_var.uniform_(0.5, 1.5)


@torch.no_grad()
def scale_residual_branches(model, scale):
    """Multiplies conv3.weight of every torchvision Bottleneck by `scale` (no-op for 1.0)."""
    if scale == 1.0:
        return
    for m in model.modules():
        if isinstance(m, torchvision.models.resnet.Bottleneck):
            m.conv3.weight.mul_(scale)


def build_model(network, seed, branch_scale=None):
    """Seeded torchvision model with randomized BN, in eval mode, float32 on the CPU."""
    if branch_scale is None:
        branch_scale = DEFAULT_BRANCH_SCALE.get(network, 1.0)
    torch.manual_seed(seed)
    model = getattr(torchvision.models, network)(weights=None, **MODEL_KWARGS.get(network, {}))
    scale_residual_branches(model, branch_scale)
    randomize_batchnorm(model)
    return model.eval()


def make_input(batch, size=224):
    """x ~ N(0,1), drawn from the global generator right after the model (same seed stream)."""
    return torch.randn(batch, 3, size, size, dtype=torch.float32)


def state_dict_for_saving(model):
    return {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}


# --------------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------------
def set_tf32(enabled):
    """TF32 for cuDNN convolutions and cuBLAS matmuls on or off.

    torch >= 2.9 has fp32_precision settings and warns about the allow_tf32 flags (mixing the two
    can be refused), so the new API is used where it exists.
    """
    cudnn_conv = getattr(torch.backends.cudnn, "conv", None)
    if cudnn_conv is not None and hasattr(cudnn_conv, "fp32_precision"):
        value = "tf32" if enabled else "ieee"
        cudnn_conv.fp32_precision = value
        torch.backends.cuda.matmul.fp32_precision = value
    else:
        torch.backends.cudnn.allow_tf32 = enabled
        torch.backends.cuda.matmul.allow_tf32 = enabled


@torch.inference_mode()
def run_reference(model, x, dtype, device, channels_last=False):
    """Logits of a copy of `model` in `dtype` on `device`, returned as float64 on the CPU."""
    m = copy.deepcopy(model).to(device=device, dtype=dtype).eval()
    xi = x.to(device=device, dtype=dtype)
    if channels_last:
        m = m.to(memory_format=torch.channels_last)
        xi = xi.contiguous(memory_format=torch.channels_last)
    y = m(xi).double().cpu()
    del m
    return y


def references(model, x, precision, device):
    """ref64 (float64), torch float32 with TF32 off, and on CUDA torch at `precision` (else None).

    Leaves TF32 off unless `precision` is tf32 (this script runs nothing else afterwards).
    """
    set_tf32(False)
    ref64 = run_reference(model, x, torch.float64, device)
    torch32 = run_reference(model, x, torch.float32, device)
    same = None
    if device.type == "cuda" and precision != "fp32":
        if precision == "tf32":
            set_tf32(True)
            same = run_reference(model, x, torch.float32, device)
        else:
            dt = torch.float16 if precision == "fp16" else torch.bfloat16
            same = run_reference(model, x, dt, device, channels_last=True)
    return ref64, torch32, same


# --------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------
def rel_l2(a, ref):
    """||a - ref|| / ||ref||, or None where that is not a finite number."""
    a, ref = a.double(), ref.double()
    v = ((a - ref).norm() / ref.norm()).item()
    return v if math.isfinite(v) else None


def compare(ours, ref64):
    """Metrics of `ours` [batch,classes] against ref64; all plain Python numbers."""
    ours, ref64 = ours.double(), ref64.double()
    finite = bool(torch.isfinite(ours).all()) and bool(torch.isfinite(ref64).all())
    agree = int((ours.argmax(dim=1) == ref64.argmax(dim=1)).sum()) if finite else 0
    return {  # None (JSON null) where a metric is undefined because of non-finite values
        "finite": finite,
        "rel_l2": rel_l2(ours, ref64) if finite else None,  # None also if ||ref|| == 0
        "max_abs_diff": (ours - ref64).abs().max().item() if finite else None,
        "top1_agree": agree,
        "top1_total": int(ours.shape[0]),
        "ref_abs_max": ref64.abs().max().item(),
    }


def fmt(v):
    return "n/a (non-finite)" if v is None else f"{v:.3e}"


def versions(device):
    v = {"torch": torch.__version__, "torchvision": torchvision.__version__,
         "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
         "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
         "reference_device": str(device)}
    try:
        import safetensors
        v["safetensors"] = safetensors.__version__
    except (ImportError, AttributeError):
        pass
    return v


# --------------------------------------------------------------------------------------------
# Files and the binary
# --------------------------------------------------------------------------------------------
# safetensors: 8-byte little-endian header length, a JSON header {name: {"dtype", "shape",
# "data_offsets": [begin, end]}, "__metadata__": {str: str}} padded with spaces, then the data.
ST_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
             torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32", torch.int16: "I16",
             torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}


def have_safetensors():
    try:
        import safetensors.torch  # noqa: F401
        return True
    except ImportError:
        return False


def write_safetensors(tensors, path, metadata=None):
    """The safetensors library's save_file where installed, else the same format written here."""
    if have_safetensors():
        from safetensors.torch import save_file
        save_file(tensors, path, metadata=metadata)
        return
    header, blobs, offset = {}, [], 0
    # Like the library: widest elements first, then by name, so every tensor's data is aligned.
    for name, t in sorted(tensors.items(), key=lambda kv: (-kv[1].element_size(), kv[0])):
        data = t.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = dict(metadata)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors_header(path):
    """(header dict without __metadata__, metadata dict, data start, file size); stdlib only."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: shorter than a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        if n > size - 8:
            raise ValueError(f"{path}: header length {n} runs past the end of the file")
        header = json.loads(f.read(n))
    meta = header.pop("__metadata__", None) or {}
    return header, meta, 8 + n, size


def read_safetensors(path):
    """({name: tensor}, metadata): the library where installed, else read here."""
    if have_safetensors():
        from safetensors import safe_open
        with safe_open(path, framework="pt") as f:
            return {k: f.get_tensor(k) for k in f.keys()}, f.metadata() or {}
    header, meta, start, _ = read_safetensors_header(path)
    by_name = {v: k for k, v in ST_DTYPES.items()}
    with open(path, "rb") as f:
        blob = f.read()[start:]
    out = {}
    for name, h in header.items():
        b, e = h["data_offsets"]
        t = torch.frombuffer(bytearray(blob[b:e]), dtype=torch.uint8) if e > b else \
            torch.empty(0, dtype=torch.uint8)
        out[name] = t.view(by_name[h["dtype"]]).reshape(h["shape"])
    return out, meta


def check_safetensors_file(path, tensors):
    """Problems (strings) of the file at `path` against the tensors it should hold: names, dtypes,
    shapes, byte ranges that tile the data exactly; and the bytes themselves."""
    header, _, start, size = read_safetensors_header(path)
    problems = []
    if set(header) != set(tensors):
        problems.append(f"{path}: names differ: missing {sorted(set(tensors) - set(header))}, "
                        f"extra {sorted(set(header) - set(tensors))}")
    ranges = []
    for name, t in tensors.items():
        h = header.get(name)
        if h is None:
            continue
        b, e = h["data_offsets"]
        if h["dtype"] != ST_DTYPES[t.dtype] or h["shape"] != list(t.shape):
            problems.append(f"{path}: {name} is {h['dtype']} {h['shape']}, expected "
                            f"{ST_DTYPES[t.dtype]} {list(t.shape)}")
        if e - b != t.numel() * t.element_size():
            problems.append(f"{path}: {name} has {e - b} bytes, expected "
                            f"{t.numel() * t.element_size()}")
        ranges.append((b, e))
    ranges.sort()
    pos = 0
    for b, e in ranges:
        if b != pos:
            problems.append(f"{path}: data ranges leave a gap or overlap at byte {pos}")
            break
        pos = e
    if start + pos != size:
        problems.append(f"{path}: {size - start} data bytes, the header accounts for {pos}")
    if not problems:
        back, _ = read_safetensors(path)
        for name, t in tensors.items():
            if not torch.equal(back[name], t.detach().cpu()):
                problems.append(f"{path}: {name} reads back with other values")
    return problems


def save_inputs(model, x, weights_path, input_path):
    weights = state_dict_for_saving(model)
    inputs = {"input": x.contiguous()}
    write_safetensors(weights, weights_path)
    write_safetensors(inputs, input_path)
    return weights, inputs


def load_logits(path, batch):
    """The "logits" tensor of our output file, or raise ValueError saying what is wrong."""
    if not os.path.exists(path):
        raise ValueError(f"the binary exited 0 but wrote no output file {path}")
    tensors, meta = read_safetensors(path)
    if "logits" not in tensors:
        raise ValueError(f"{path} has no tensor 'logits' (has: {sorted(tensors)})")
    logits = tensors["logits"]
    if logits.dtype != torch.float32 or tuple(logits.shape) != (batch, NUM_CLASSES):
        raise ValueError(f"{path}: 'logits' is {logits.dtype} {list(logits.shape)}, "
                         f"expected float32 [{batch}, {NUM_CLASSES}]")
    return logits, meta


def run_binary(cmd, timeout):
    """Runs our binary; returns (ok, completed-process-or-None, message)."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
    except FileNotFoundError:
        return False, None, f"binary not found: {cmd[0]}"
    except subprocess.TimeoutExpired:
        return False, None, f"binary timed out after {timeout} s"
    if p.returncode != 0:
        return False, p, f"binary exited with status {p.returncode}"
    return True, p, ""


# --------------------------------------------------------------------------------------------
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Check cnnbench_infer against torchvision.")
    ap.add_argument("--binary", default="build/release/cnnbench_infer")
    ap.add_argument("--network", default="resnet50", choices=NETWORKS)
    ap.add_argument("--precision", default="fp32", choices=PRECISIONS)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=None,
                    help="where weights/input/output files go (kept); a temp dir otherwise")
    ap.add_argument("--out", default=None, help="write the JSON result here")
    ap.add_argument("--threshold", type=float, default=None,
                    help="max relative L2 error (default: 1e-4 fp32, 1e-3 tf32, 2e-2 fp16/bf16)")
    ap.add_argument("--extra", default="", help="extra arguments appended to the binary's command")
    ap.add_argument("--input-size", type=int, default=None,
                    help="image side (default: the network's own: 299 inception_v3, 224..600 "
                         "efficientnet_b0..b7, 224 otherwise)")
    ap.add_argument("--dry-run", action="store_true",
                    help="build the model, write and check the weights and input files, print "
                         "the command, and stop before running the binary (use with --workdir "
                         "to keep the files)")
    ap.add_argument("--branch-scale", type=float, default=None,
                    help="factor on every bottleneck's conv3 weights (default: 1.0 resnet50, "
                         "0.3 resnet152, which keeps resnet152's activations within fp16 range)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds allowed for the binary")
    args = ap.parse_args(argv)
    if args.threshold is None:
        args.threshold = DEFAULT_THRESHOLD[args.precision]
    if args.branch_scale is None:
        args.branch_scale = DEFAULT_BRANCH_SCALE.get(args.network, 1.0)
    if args.input_size is not None and args.input_size < 1:
        ap.error("--input-size must be at least 1")
    args.input_size = input_size_for(args.network, args.input_size)
    return args


def main(argv=None):
    args = parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="cnnbench_crosscheck_")
        workdir = tmp.name
    else:
        workdir = args.workdir
        os.makedirs(workdir, exist_ok=True)
    try:
        return check(args, device, workdir)
    finally:
        if tmp is not None:
            tmp.cleanup()


def check(args, device, workdir):
    size = args.input_size
    weights = os.path.join(workdir, f"{args.network}_seed{args.seed}.safetensors")
    inp = os.path.join(workdir, f"input_b{args.batch}_s{size}_seed{args.seed}.safetensors")
    out = os.path.join(workdir, f"logits_{args.network}_{args.precision}_b{args.batch}.safetensors")
    if os.path.exists(out):
        os.remove(out)  # never compare against a previous run's output

    model = build_model(args.network, args.seed, args.branch_scale)
    x = make_input(args.batch, size)
    saved_weights, saved_inputs = save_inputs(model, x, weights, inp)

    cmd = [args.binary, "--network", args.network, "--precision", args.precision,
           "--batch", str(args.batch), "--weights", weights, "--input", inp, "--output", out,
           "--input_size", str(size)]
    cmd += shlex.split(args.extra)
    head = {"network": args.network, "precision": args.precision, "batch": args.batch,
            "input_size": size, "seed": args.seed, "branch_scale": args.branch_scale,
            "threshold": args.threshold, "command": cmd}
    if args.dry_run:
        return dry_run(args, head, cmd, model, (weights, saved_weights), (inp, saved_inputs))
    print("running:", " ".join(shlex.quote(c) for c in cmd), flush=True)
    ok, proc, msg = run_binary(cmd, args.timeout)
    if ok:
        if proc.stderr.strip():
            sys.stderr.write(proc.stderr)  # warnings are worth seeing even when it succeeds
        try:
            ours, meta = load_logits(out, args.batch)
        except Exception as e:  # noqa: BLE001 - any unreadable output is the binary's failure
            ok, msg = False, str(e)
    if not ok:
        print(f"FAIL: {msg}", file=sys.stderr)
        if proc is not None and proc.returncode != 0:
            sys.stderr.write(proc.stdout[-4000:] + proc.stderr)
        write_json(args.out, {**head, "pass": False, "binary_failed": True, "error": msg,
                              "stderr": proc.stderr[-20000:] if proc is not None else ""})
        return 2

    ref64, torch32, same = references(model, x, args.precision, device)
    res = compare(ours, ref64)
    result = {
        **head,
        **res,
        "torch_fp32_rel_l2": rel_l2(torch32, ref64),
        "torch_same_precision_rel_l2": rel_l2(same, ref64) if same is not None else None,
        "versions": versions(device),
        "binary_metadata": meta,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    passed = res["finite"] and res["rel_l2"] is not None and res["rel_l2"] <= args.threshold
    result["pass"] = passed

    print(f"{args.network} {args.precision} batch {args.batch} seed {args.seed} "
          f"(reference: float64 on {device})")
    print(f"  rel L2 error      {fmt(res['rel_l2'])}   (threshold {args.threshold:.1e})")
    print(f"  max abs diff      {fmt(res['max_abs_diff'])}   (max |ref| {res['ref_abs_max']:.3e})")
    print(f"  top-1 agreement   {res['top1_agree']}/{res['top1_total']}")
    print(f"  torch fp32 rel L2 {fmt(result['torch_fp32_rel_l2'])}   (TF32 off, for information)")
    if same is not None:
        print(f"  torch {args.precision} rel L2 {fmt(result['torch_same_precision_rel_l2'])}"
              f"   (for information)")
    v = result["versions"]
    print(f"  torch {v['torch']}, torchvision {v['torchvision']}, cudnn {v['cudnn']}, "
          f"gpu {v['gpu']}")
    if not res["finite"]:
        print("FAIL: non-finite values in the logits or the reference")
    print("PASS" if passed else "FAIL")

    write_json(args.out, result)
    return 0 if passed else 1


def dry_run(args, head, cmd, model, *files):
    """--dry-run: check the written files against what was saved; print the command; stop."""
    problems = []
    for path, tensors in files:
        problems += check_safetensors_file(path, tensors)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"dry run: {args.network}, input [{args.batch}, 3, {head['input_size']}, "
          f"{head['input_size']}], {len(files[0][1])} state_dict entries, {n_params:,} trainable "
          f"parameters, files written with "
          f"{'safetensors' if have_safetensors() else 'the built-in safetensors writer'}"
          f"{' and checked' if not problems else ''}")
    print("would run:", " ".join(shlex.quote(c) for c in cmd))
    for p in problems:
        print(f"FAIL: {p}", file=sys.stderr)
    write_json(args.out, {**head, "dry_run": True, "files_ok": not problems,
                          "problems": problems, "trainable_parameters": n_params,
                          "versions": versions(torch.device("cpu"))})
    return 1 if problems else 0


def write_json(path, obj):
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
