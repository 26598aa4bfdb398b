"""What tools/yolor_reference.py, stylegan_reference.py and stylegan3_reference.py share.

Each of those tools describes a network independently in torch ops and has the same subcommands
around it (write-case, compare, bench, summary); this module is their common plumbing, imported by
each (they put tools/ on sys.path first):
  - safetensors reading and the comparison of named outputs, stdlib only (torch, where installed,
    only makes it faster): read_safetensors, compare_outputs, read_pair, print_comparison; for the
    generators' single image, select_output and compare_image (the StyleGAN tools' compare);
  - the command line: add_compare_parser, add_case_args, add_bench_args, add_timing_args,
    add_conv_clamp, run_command (a subcommand's errors as one line and exit status 2);
  - torch, imported inside the functions: require_torch; write-case's start (start_write_case),
    files (save_case) and RMS lines (report_rms); the state_dict check (check_state_dict) and the
    random draws (fill_state); the bench (Bench: rows as tools/pytorch_baseline.py's, with its
    timing code);
  - the StyleGAN generators' common modules (generator_modules: FullyConnectedLayer, the mapping
    network and the Generator around a synthesis network), the same in NVlabs' StyleGAN2 and
    StyleGAN3 as these tools use them;
  - for the tests (tests/test_*_reference.py): write_safetensors (a minimal writer), run_main,
    upfirdn1d, and the unittest mixins CompareFiles, ImageCompareFiles (with compare_image's
    tests) and WithoutTorch (with the tests of the tool without torch).
"""
import array
import contextlib
import datetime
import io
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

TOOLS = os.path.dirname(os.path.abspath(__file__))

# Row "mode" names per precision, as tools/compare_pytorch.py's PYTORCH_MODES looks them up.
MODE_NAMES = {
    "fp16": {"eager": "fp16cl", "graph": "fp16cl_graph"},
    "bf16": {"eager": "bf16cl", "graph": "bf16cl_graph"},
    "fp32": {"eager": "fp32", "graph": "fp32_graph"},
    "tf32": {"eager": "tf32", "graph": "tf32_graph"},
}
TORCH_FREE = "summary and compare"  # the subcommands that need no torch (yolor adds check-cfg)

# StyleGAN's mapping network (z_dim = w_dim = 512), the same in NVlabs' StyleGAN2 and StyleGAN3.
Z_DIM = 512
W_DIM = 512
MAPPING_LR = 0.01          # MappingNetwork's lr_multiplier
LRELU_SLOPE = 0.2          # bias_act's lrelu def_alpha
LRELU_GAIN = math.sqrt(2)  # and def_gain


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# --------------------------------------------------------------------------------------------
# safetensors reading (stdlib) and the comparison of named outputs
# --------------------------------------------------------------------------------------------
_DTYPE_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}


class RawTensor:
    """One tensor of a safetensors file: dtype string, shape, little-endian bytes."""

    def __init__(self, dtype, shape, data):
        self.dtype, self.shape, self.data = dtype, list(shape), data

    def values(self):
        """The elements as a flat list of Python floats."""
        if self.dtype in ("F32", "F64"):
            a = array.array("f" if self.dtype == "F32" else "d")
            a.frombytes(self.data)
            if sys.byteorder != "little":
                a.byteswap()
            return a.tolist()
        if self.dtype == "F16":
            return [v for (v,) in struct.iter_unpack("<e", self.data)]
        if self.dtype == "BF16":  # the upper half of a float32
            return [struct.unpack("<f", struct.pack("<I", h << 16))[0]
                    for (h,) in struct.iter_unpack("<H", self.data)]
        raise ValueError(f"dtype {self.dtype} is not a float type")


def read_safetensors(path):
    """({name: RawTensor}, metadata dict). ValueError if the file is not a valid safetensors
    file of float tensors, OSError if it cannot be read."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: unreadable header: {e}") from None
    data = memoryview(blob)[8 + n:]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, entry in header.items():
        dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in _DTYPE_SIZE:
            raise ValueError(f"{path}: tensor {name} has dtype {dtype}, not a float type")
        if end - begin != numel(shape) * _DTYPE_SIZE[dtype] or end > len(data) or begin < 0:
            raise ValueError(f"{path}: tensor {name}'s byte range {begin}..{end} does not fit "
                             f"its shape {shape} ({dtype}) and the file")
        tensors[name] = RawTensor(dtype, shape, data[begin:end])
    return tensors, metadata


def read_metadata(path):
    """A safetensors file's __metadata__ from its header alone (the tensors are not read).
    ValueError where the header is not a safetensors header, OSError if it cannot be read."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{path}: too short for a safetensors file")
        (n,) = struct.unpack("<Q", head)
        if n > 100 << 20:
            raise ValueError(f"{path}: header length {n} is not a safetensors header's")
        text = f.read(n)
    if len(text) < n:
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: unreadable header: {e}") from None
    return header.get("__metadata__", {}) or {}


def list_stats(ref, ours):
    """Error figures of two equally long sequences of numbers: sum of squared differences, sum of
    squared reference values, max |difference| (inf where `ours` has a non-finite value)."""
    sum_sq_diff = sum_sq_ref = max_abs = 0.0
    for r, o in zip(ref, ours):
        d = o - r
        sum_sq_diff += d * d
        sum_sq_ref += r * r
        max_abs = max(max_abs, abs(d)) if math.isfinite(d) else math.inf
    return sum_sq_diff, sum_sq_ref, max_abs


def raw_stats(ref, ours):
    """list_stats of two RawTensors, in float64: with torch where it is installed (fast), else in
    plain Python (slow for large outputs, but exact)."""
    try:
        import torch
    except ImportError:
        return list_stats(ref.values(), ours.values())
    dt = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
          "BF16": torch.bfloat16}

    def tensor(t):
        if numel(t.shape) == 0:
            return torch.zeros(0, dtype=torch.float64)
        return torch.frombuffer(bytearray(t.data), dtype=dt[t.dtype]).double()

    r, o = tensor(ref), tensor(ours)
    d = o - r
    max_abs = d.abs().max().item() if d.numel() else 0.0
    if not torch.isfinite(d).all():
        max_abs = math.inf
    return (d * d).sum().item(), (r * r).sum().item(), max_abs


# near_kinks: how close an lrelu's input comes to its kink, relative to its RMS. fp32 rounds a
# pre-activation to about 1e-6 of the RMS (a 3x3x512 reduction); an element nearer 0 than that
# can take the other side of the kink in another fp32 order, which flips its mask and moves the
# gradient by (1 - slope) times that element's upstream gradient.
KINK_MARGIN = 1e-5


def near_kinks(x, margin=KINK_MARGIN, channels=8):
    """(elements with |x| < margin * rms(x), min |x| / rms(x), the first `channels` channels
    (dim 1) holding such an element) for a tensor x [N, C, ...]."""
    xd = x.detach()
    rms = float(xd.double().square().mean().sqrt())
    if not rms > 0:  # all zeros, or not finite
        return xd.numel(), 0.0, []
    r = xd.abs().double() / rms
    near = r < margin
    count = int(near.sum())
    chans = sorted(set(near.nonzero()[:, 1].tolist()))[:channels] if count else []
    return count, float(r.min()), chans


def largest_error(ref, ours):
    """Where the difference of two RawTensors is largest: (flat index, that element's share of
    the summed squared difference). A share near 1 says one element carries the error (an lrelu
    mask flipped at a pre-activation near 0 moves one element of a bias gradient), a small one
    that it is spread (rounding). Plain Python where torch is missing."""
    try:
        import torch
    except ImportError:
        d = [(o - r) ** 2 for r, o in zip(ref.values(), ours.values())]
        if not d:
            return 0, 0.0
        i = max(range(len(d)), key=d.__getitem__)
        total = sum(d)
        return i, (d[i] / total if total > 0 else 0.0)
    dt = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
          "BF16": torch.bfloat16}

    def tensor(t):
        return torch.frombuffer(bytearray(t.data), dtype=dt[t.dtype]).double()

    d = (tensor(ours) - tensor(ref)).square()
    if d.numel() == 0:
        return 0, 0.0
    i = int(d.argmax())
    total = float(d.sum())
    return i, (float(d[i]) / total if total > 0 else 0.0)


def unravel(index, shape):
    """A flat index as per-dimension indices of `shape` (row-major)."""
    out = []
    for n in reversed(list(shape) or [1]):
        out.append(index % n)
        index //= n
    return list(reversed(out))


def compare_outputs(reference, ours, tolerance, names, stats=list_stats):
    """Compares the outputs `names` of two {name: (shape, values)} maps.

    stats(ref_values, our_values) -> (sum of squared differences, sum of squared reference
    values, max |difference|) (list_stats for plain lists). Returns (status, rows, problems):
    rows one per output that both have with equal shapes (name, shape, rel_l2, max_abs, ok);
    problems the messages of missing tensors and shape mismatches; status 2 if there is a
    problem, else 1 if an output's relative L2 exceeds the tolerance or is not finite, else 0."""
    rows, problems = [], []
    for name in names:
        missing = [side for side, m in (("reference", reference), ("ours", ours)) if name not in m]
        if missing:
            problems.append(f"{name}: missing in {' and '.join(missing)}")
            continue
        (ref_shape, ref_values), (our_shape, our_values) = reference[name], ours[name]
        if list(ref_shape) != list(our_shape):
            problems.append(f"{name}: shape {list(our_shape)} in ours, {list(ref_shape)} in the "
                            f"reference (NCHW)")
            continue
        sum_sq_diff, sum_sq_ref, max_abs = stats(ref_values, our_values)
        if sum_sq_ref > 0:
            rel = math.sqrt(sum_sq_diff / sum_sq_ref)
        else:
            rel = 0.0 if sum_sq_diff == 0 else math.inf
        if not math.isfinite(max_abs):
            rel = math.inf  # a NaN or inf in ours fails whatever the sums say
        rows.append({"name": name, "shape": list(ref_shape), "rel_l2": rel, "max_abs": max_abs,
                     "ok": rel <= tolerance})  # NaN compares false: not ok
    status = 2 if problems else (0 if all(r["ok"] for r in rows) else 1)
    return status, rows, problems


class MissingDependency(Exception):
    pass


def read_pair(reference, ours):
    """Both files' tensors as {"reference"|"ours": {name: (shape, tensor)}}, or None after one
    line on stderr naming the file that cannot be read (the compare subcommands' exit 2)."""
    loaded = {}
    for what, path in (("reference", reference), ("ours", ours)):
        try:
            tensors, _ = read_safetensors(path)
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"error: cannot read {what} {path}: {e}", file=sys.stderr)
            return None
        loaded[what] = {k: (t.shape, t) for k, t in tensors.items()}
    return loaded


def print_comparison(status, rows, problems, tolerance):
    """compare_outputs' result as the compare subcommands print it; returns the status."""
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    for r in rows:
        print(f"{r['name']} {r['shape']}: rel_l2 {r['rel_l2']:.3e}, max_abs {r['max_abs']:.3e}  "
              f"{'ok' if r['ok'] else 'FAIL'}")
    verdict = {0: "pass", 1: "FAIL", 2: "error"}[status]
    print(f"{verdict} (tolerance {tolerance:g} on the relative L2 error)")
    return status


def select_output(ours, ref_shape, output_name="output0"):
    """The image in cnnbench's output file {name: (shape, values)}: (output_name or "logits",
    (shape as compared, values), note) where the note says what was done; (None, None, problem)
    where neither is there or the shape does not fit. A "logits" or output_name of shape
    [N, C*H*W] (a flattened NCHW image) is read as ref_shape."""
    name = output_name if output_name in ours else "logits" if "logits" in ours else None
    if name is None:
        return None, None, f"{output_name}: missing in ours (nor is there a 'logits')"
    shape, values = ours[name]
    shape, ref_shape = list(shape), list(ref_shape)
    note = "" if name == output_name else f"ours is '{name}'"
    if shape == ref_shape:
        return name, (shape, values), note
    if (len(shape) == 2 and len(ref_shape) == 4 and shape[0] == ref_shape[0]
            and shape[1] == numel(ref_shape[1:])):
        note = (note + "; " if note else "") + f"{shape} read as NCHW {ref_shape}"
        return name, (ref_shape, values), note
    return None, None, (f"{output_name}: '{name}' in ours has shape {shape}, the reference "
                        f"{ref_shape} (NCHW)")


def compare_image(args, output_name="output0"):
    """The StyleGAN tools' compare subcommand: the reference's one image against cnnbench's
    (select_output's choice). Returns the exit status."""
    loaded = read_pair(args.reference, args.ours)
    if loaded is None:
        return 2
    ref = loaded["reference"]
    problems, ours = [], {}
    if output_name not in ref:
        problems.append(f"{output_name}: missing in the reference")
    else:
        name, entry, note = select_output(loaded["ours"], ref[output_name][0], output_name)
        if entry is None:
            problems.append(note)
        else:
            ours[output_name] = entry
            if note:
                print(f"note: {note}")
    if problems:
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        print("error (no comparison)")
        return 2
    status, rows, problems = compare_outputs(ref, ours, args.tolerance, names=(output_name,),
                                             stats=raw_stats)
    return print_comparison(status, rows, problems, args.tolerance)


# --------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------
def add_compare_parser(sub, help, ours_help, default_tolerance, per=""):
    """The compare subcommand's parser: --reference, --ours and --tolerance (on the relative L2
    error, `per` output where there are several)."""
    p = sub.add_parser("compare", help=help)
    p.add_argument("--reference", required=True, help="reference.safetensors of write-case")
    p.add_argument("--ours", required=True, help=ours_help)
    p.add_argument("--tolerance", type=float, default=default_tolerance,
                   help=f"largest relative L2 error{per} (default %(default)g)")
    return p


def add_case_args(p, crosscheck=None):
    """write-case's --batch and --seed; with its help, --skip-crosscheck."""
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    if crosscheck:
        p.add_argument("--skip-crosscheck", action="store_true", help=crosscheck)


def add_bench_args(p, batches):
    """bench's --batches (default `batches`), --precision and --modes."""
    p.add_argument("--batches", default=batches)
    p.add_argument("--precision", default="fp16", choices=sorted(MODE_NAMES))
    p.add_argument("--modes", default="eager,graph", help="eager and/or graph")


def add_timing_args(p):
    """bench's timing (as pytorch_baseline.py's) and --out."""
    p.add_argument("--reps", type=int, default=5, help="timed repetitions per row")
    p.add_argument("--warmup-iters", type=int, default=20)
    p.add_argument("--warmup-s", type=float, default=0.2)
    p.add_argument("--rep-s", type=float, default=0.1, help="minimum seconds per repetition")
    p.add_argument("--out", default=None, help="JSON output path (rewritten after every row)")


def add_conv_clamp(p, default, what):
    p.add_argument("--conv-clamp", "--conv_clamp", dest="conv_clamp", type=float,
                   default=default, help=f"{what} (default %(default)g; 0: none)")


def run_command(run, args):
    """run(args), a subcommand; a missing dependency or a bad argument (ValueError) becomes one
    line on stderr and the exit status 2."""
    try:
        return run(args)
    except MissingDependency as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # bad arguments
        print(f"error: {e}", file=sys.stderr)
        return 2


def check_batch(batch):
    if batch < 1:
        raise ValueError("--batch must be at least 1")


# --------------------------------------------------------------------------------------------
# torch: write-case, the model's checks, the bench (imported inside the functions)
# --------------------------------------------------------------------------------------------
def require_torch(cuda=False, torch_free=TORCH_FREE):
    """torch, or MissingDependency with one clear line (exit 2 in main)."""
    try:
        import torch
    except ImportError:
        raise MissingDependency(f"this subcommand needs PyTorch (import torch failed); the "
                                f"{torch_free} subcommands do not") from None
    if cuda and not torch.cuda.is_available():
        raise MissingDependency("no CUDA device; this subcommand only measures GPU inference")
    return torch


def start_write_case(check, torch_free=TORCH_FREE):
    """write-case's start: torch, safetensors' save_file, check() (the tool's checks of its
    arguments, ValueError where they fail), then fp32 with TF32 off on the device (CUDA where
    there is one). Returns (torch, save_file, check()'s result, device)."""
    torch = require_torch(torch_free=torch_free)
    try:
        from safetensors.torch import save_file
    except ImportError:
        raise MissingDependency("write-case needs the safetensors package") from None
    checked = check()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch, save_file, checked, device


def save_case(save_file, directory, model, inputs, outputs, meta, skip=()):
    """write-case's files in `directory`, each with the metadata: weights.safetensors (the
    model's state_dict, float32, but the names ending in `skip`), input.safetensors ("input":
    inputs) and reference.safetensors (outputs, {name: tensor})."""
    os.makedirs(directory, exist_ok=True)
    weights = {k: v.detach().float().contiguous().cpu() for k, v in model.state_dict().items()
               if not k.endswith(skip)}
    save_file(weights, os.path.join(directory, "weights.safetensors"), metadata=meta)
    save_file({"input": inputs}, os.path.join(directory, "input.safetensors"), metadata=meta)
    save_file(outputs, os.path.join(directory, "reference.safetensors"), metadata=meta)


def report_rms(label, t, bounds):
    """Prints a tensor's RMS, std and max |x| (in float64) as write-case does; returns False
    (and marks the line) where the RMS is not finite or outside bounds."""
    hd = t.double()
    rms, std = hd.pow(2).mean().sqrt().item(), hd.std().item()
    ok = math.isfinite(rms) and bounds[0] <= rms <= bounds[1]
    print(f"  {label} {list(t.shape)}: rms {rms:.4g}, std {std:.4g}, "
          f"max |x| {hd.abs().max().item():.4g}{'' if ok else '  <- degenerate'}")
    return ok


def rms_error(what, bounds):
    print(f"error: {what}'s RMS is not finite or outside [{bounds[0]:g}, {bounds[1]:g}]",
          file=sys.stderr)


def rel_l2(a, b):
    """||a - b|| / ||b|| in float64."""
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def check_state_dict(model, want, count, what="layer list", skip=()):
    """AssertionError unless the model's state_dict (but the names ending in `skip`) is `want`
    [(name, shape)] (names, shapes, order) and its parameter count `count`."""
    got = [(k, list(v.shape)) for k, v in model.state_dict().items() if not k.endswith(skip)]
    if got != want:
        diff = [f"{a} != {b}" for a, b in zip(got, want) if a != b][:5]
        raise AssertionError(f"the model's state_dict is not the {what}'s: {len(got)} against "
                             f"{len(want)} entries; {diff}")
    n = sum(p.numel() for p in model.parameters())
    if n != count:
        raise AssertionError(f"the model has {n:,} parameters, the {what} {count:,}")


def fill_state(model, draw):
    """Overwrites the model's state_dict in its order: each entry with draw(name, last, tensor)
    (last: the name's last part), where that is not None."""
    torch = require_torch()
    with torch.no_grad():
        for name, t in model.state_dict(keep_vars=True).items():
            v = draw(name, name.rsplit(".", 1)[-1], t)
            if v is not None:
                t.copy_(v)


def normal_draws(torch, generator):
    """randn(shape, std=1, mean=0) drawn from the generator, as the write-cases draw weights."""
    def randn(shape, std=1.0, mean=0.0):
        return torch.randn(shape, generator=generator) * std + mean
    return randn


def bench_dtype(torch, precision):
    """The bench subcommands' settings: cudnn.benchmark on, TF32 only for tf32; the dtype."""
    tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32,
            "tf32": torch.float32}[precision]


def bench_environment(torch, device):
    """What produced a bench document's rows: torch, cuDNN, CUDA, the GPU and the date."""
    return {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
            "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(device),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}


def timed_row(torch, ptb, model, row, make_input, mode, args, device):
    """Fills `row` as pytorch_baseline.run_row does (median/min/max ms, img_s, peak memory) for
    `model` on make_input()'s batch; an error (out of memory) becomes its "error"."""
    import gc
    import statistics

    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    step = x = None
    try:
        x = make_input()
        step = ptb.make_step(model, x, mode)
        reps, k = ptb.measure(step, args.reps, args.warmup_iters, args.warmup_s, args.rep_s)
        ms = statistics.median(reps)
        row.update(ms=ms, ms_min=min(reps), ms_max=max(reps), img_s=row["batch"] / ms * 1e3,
                   peak_mib=torch.cuda.max_memory_allocated(device) / 2**20, reps=reps,
                   iters_per_rep=k)
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError is a RuntimeError too
        row["error"] = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
        print(f"  {row['model']} {mode} batch {row['batch']}: error: {row['error']}",
              file=sys.stderr)
    finally:
        del step, x  # frees the CUDA graph and its memory pool before the next row
        gc.collect()
        torch.cuda.synchronize()
    return row


class Bench:
    """A bench subcommand, timed as pytorch_baseline.py times the torchvision models (its
    make_step, measure, write_json and print_table).

    Bench(args, check) starts it: torch with a CUDA device, tools/pytorch_baseline.py, check()
    (the tool's checks of its arguments, ValueError where they fail; its result in .checked),
    --batches and --modes, the precision's settings (bench_dtype: .dtype) and .device. The tool
    then builds its model and a document (document()), and run() times the rows."""

    def __init__(self, args, check, torch_free=TORCH_FREE):
        self.args = args
        self.torch = torch = require_torch(cuda=True, torch_free=torch_free)
        try:
            import pytorch_baseline  # its timing code (it imports torchvision too)
        except ImportError as e:
            raise MissingDependency(f"bench imports tools/pytorch_baseline.py, which failed: "
                                    f"{e}") from None
        self.ptb = pytorch_baseline
        self.checked = check()
        self.batches = [int(b) for b in args.batches.split(",") if b.strip()]
        self.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        for m in self.modes:
            if m not in ("eager", "graph"):
                raise ValueError(f"unknown mode {m!r}; valid: eager, graph")
        self.dtype = bench_dtype(torch, args.precision)
        self.device = torch.device("cuda")

    def document(self, settings, network, memory_format="channels_last"):
        """The JSON document: the environment, the settings (the timing's, then `settings`),
        the network and (filled by run) the rows."""
        a = self.args
        return {**bench_environment(self.torch, self.device),
                "settings": {"dtype": str(self.dtype).replace("torch.", ""),
                             "precision": a.precision, "memory_format": memory_format,
                             "cudnn_benchmark": True, "reps": a.reps, "rep_s": a.rep_s,
                             "warmup_iters": a.warmup_iters, "warmup_s": a.warmup_s,
                             **settings},
                "network": network, "rows": []}

    def run(self, model, doc, what, name, label, input_size, make_input, **row_extra):
        """Times `model` in every mode and batch, make_input(batch) its input: a row each,
        {"model": name, "mode", "precision", "batch", "input_size", **row_extra} and the timing
        (timed_row), printed as `label` and written to --out after every row (partial results
        survive a killed run); then the table. `what` heads the output. Returns 0."""
        torch, ptb, args = self.torch, self.ptb, self.args
        print(f"torch {doc['torch']}, cudnn {doc['cudnn']}, {doc['gpu']}; {what}, "
              f"{args.precision}", flush=True)
        with torch.inference_mode():
            for mode in self.modes:
                for batch in self.batches:
                    row = {"model": name, "mode": MODE_NAMES[args.precision][mode],
                           "precision": args.precision, "batch": batch,
                           "input_size": input_size, **row_extra}
                    row = timed_row(torch, ptb, model, row, lambda: make_input(batch), mode,
                                    args, self.device)
                    doc["rows"].append(row)
                    if "error" not in row:
                        print(f"  {label} {row['mode']} batch {batch}: {row['ms']:.4f} ms "
                              f"({row['img_s']:.1f} img/s)", flush=True)
                    if args.out:
                        ptb.write_json(args.out, doc)
        print()
        ptb.print_table(doc["rows"])
        return 0


# --------------------------------------------------------------------------------------------
# The StyleGAN generators' common modules
# --------------------------------------------------------------------------------------------
def normalize_2nd_moment(x, dim=1, eps=1e-8):
    return x * (x.square().mean(dim=dim, keepdim=True) + eps).rsqrt()


def generator_modules(torch, opts, mapping_layers):
    """(FullyConnectedLayer, Generator) as NVlabs' StyleGAN2 and StyleGAN3 have them alike.

    FullyConnectedLayer(in, out, activation="linear"|"lrelu", lr_multiplier, bias_init): the
    stored W and b raw (equalised learning rate: W ~ N(0, 1) / lr_multiplier, b = bias_init /
    lr_multiplier as StyleGAN3 initialises it; StyleGAN2-ADA's full(bias_init) is the same for
    its layers, bias_init 0 or lr_multiplier 1), x @ (W * lr_multiplier / sqrt(in)).T + b *
    lr_multiplier, lrelu(0.2) * sqrt(2).

    Generator(synthesis, **attributes): the attributes set, then the synthesis network and the
    mapping network (mapping_layers FC layers after normalising z, lr_multiplier 0.01; its dtype
    opts.float_dtype where opts has one, else float32), in NVlabs' order (synthesis, then
    mapping: the state_dict's); forward(z) with z [N, 512] or [N, 512, 1, 1] is the synthesis of
    the one w (psi 1: w_avg unused; every layer gets this w); configure(**kw) sets opts'
    fields."""
    from torch import nn

    F = torch.nn.functional

    class FullyConnectedLayer(nn.Module):
        def __init__(self, in_features, out_features, activation="linear", lr_multiplier=1.0,
                     bias_init=0.0):
            super().__init__()
            self.activation = activation
            self.weight = nn.Parameter(torch.randn([out_features, in_features]) / lr_multiplier)
            self.bias = nn.Parameter(torch.zeros([out_features]) + torch.tensor(bias_init)
                                     / lr_multiplier)
            self.weight_gain = lr_multiplier / math.sqrt(in_features)
            self.bias_gain = lr_multiplier

        def forward(self, x):
            w = self.weight.to(x.dtype) * self.weight_gain
            b = self.bias.to(x.dtype)
            if self.bias_gain != 1:
                b = b * self.bias_gain
            if self.activation == "linear":
                return torch.addmm(b.unsqueeze(0), x, w.t())
            x = x.matmul(w.t()) + b.unsqueeze(0)
            if getattr(opts, "kink_stats", None) is not None:
                opts.kink_stats.append((getattr(self, "kink_name", "fc"),) + near_kinks(x))
            return F.leaky_relu(x, LRELU_SLOPE) * LRELU_GAIN

    class MappingNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            for i in range(mapping_layers):
                setattr(self, f"fc{i}", FullyConnectedLayer(Z_DIM if i == 0 else W_DIM, W_DIM,
                                                            "lrelu", MAPPING_LR))
                getattr(self, f"fc{i}").kink_name = f"mapping.fc{i}"
            self.register_buffer("w_avg", torch.zeros([W_DIM]))

        def forward(self, z):
            x = normalize_2nd_moment(z.to(getattr(opts, "float_dtype", torch.float32)))
            for i in range(mapping_layers):
                x = getattr(self, f"fc{i}")(x)
            return x  # psi 1: w_avg unused; every layer gets this w

    class Generator(nn.Module):
        def __init__(self, synthesis, **attributes):
            super().__init__()
            for k, v in attributes.items():
                setattr(self, k, v)
            self.opts = opts
            self.synthesis = synthesis  # NVlabs' order: synthesis, then mapping
            self.mapping = MappingNetwork()

        def configure(self, **kw):
            for k, v in kw.items():
                if not hasattr(opts, k):
                    raise AttributeError(f"no option {k}")
                setattr(opts, k, v)
            return self

        def forward(self, z):
            w = self.mapping(z.reshape(z.shape[0], -1))
            return self.synthesis(w)

    return FullyConnectedLayer, Generator


def clamp_option(conv_clamp):
    """--conv-clamp as the models take it: None for none (0 or negative)."""
    return conv_clamp if conv_clamp is not None and conv_clamp > 0 else None


# --------------------------------------------------------------------------------------------
# For the tests (stdlib)
# --------------------------------------------------------------------------------------------
def write_safetensors(path, tensors, dtype="F32", metadata=None):
    """A minimal safetensors writer: {name: (shape, flat list of floats)}, float32 or float64,
    with `metadata` (default {"writer": "test"}) as its __metadata__."""
    fmt = {"F32": "<f", "F64": "<d"}[dtype]
    header, blobs, offset = {"__metadata__": dict(metadata or {"writer": "test"})}, [], 0
    for name, (shape, values) in tensors.items():
        data = b"".join(struct.pack(fmt, v) for v in values)
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def run_main(main, argv):
    """main(argv) with stdout and stderr captured: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def upfirdn1d(x, taps, up=1, down=1, pad0=0, pad1=0, gain=1.0):
    """One axis of upfirdn2d in plain Python: zero insertion, padding (negative: cropping),
    convolution with the filter (flipped taps, as upfirdn2d without flip_filter) scaled by gain,
    down-sampling."""
    y = []
    for v in x:
        y += [v] + [0.0] * (up - 1)
    y = [0.0] * max(pad0, 0) + y + [0.0] * max(pad1, 0)
    y = y[max(-pad0, 0):len(y) - max(-pad1, 0)]
    f = [t * gain for t in reversed(taps)]
    out = [sum(y[i + j] * f[j] for j in range(len(f))) for i in range(len(y) - len(f) + 1)]
    return out[::down]


class CompareFiles:
    """A unittest.TestCase mixin for a compare subcommand: a temporary folder with the reference
    (self.ref, reference_tensors() written by write_safetensors), ours() writing ours there,
    compare() running the tool's compare (the class's `main`) on the two and assert_compare
    checking its outcome; the test here, that an unreadable file of ours exits 2."""
    main = None  # the tool's main, as a staticmethod

    def reference_tensors(self):
        raise NotImplementedError

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.ref = os.path.join(self.dir.name, "reference.safetensors")
        write_safetensors(self.ref, self.reference_tensors())

    def tearDown(self):
        self.dir.cleanup()

    def ours(self, tensors, dtype="F32"):
        path = os.path.join(self.dir.name, "ours.safetensors")
        write_safetensors(path, tensors, dtype)
        return path

    def compare(self, path, *extra):
        return run_main(self.main, ["compare", "--reference", self.ref, "--ours", path, *extra])

    def assert_compare(self, path, status, *texts, extra=()):
        """compare(path, *extra) exits with `status`, each of `texts` in what it prints (stdout;
        stderr for status 2). Returns (stdout, stderr)."""
        code, out, err = self.compare(path, *extra)
        self.assertEqual(code, status, out + err)
        for text in texts:
            self.assertIn(text, err if status == 2 else out)
        return out, err

    def test_unreadable_ours_exits_2(self):
        self.assert_compare(os.path.join(self.dir.name, "none.safetensors"), 2,
                            "cannot read ours")


class ImageCompareFiles(CompareFiles):
    """CompareFiles for a generator's image ("output0" [1, 3, 2, 2] of self.values; the tool's
    default tolerance TOLERANCE) and compare_image's tests: cnnbench's "output0" or "logits",
    flat or NCHW, float32 or float64; a mismatch exits 1; a missing or misshapen image 2."""
    SHAPE = [1, 3, 2, 2]
    TOLERANCE = None

    def reference_tensors(self):
        self.values = [0.1 * (i + 1) for i in range(12)]
        return {"output0": (self.SHAPE, self.values)}

    def test_pass(self):
        image = {"output0": (self.SHAPE, self.values)}
        self.assert_compare(self.ours(image), 0, "output0 [1, 3, 2, 2]: rel_l2 0.000e+00",
                            f"pass (tolerance {self.TOLERANCE:g} on")
        self.assert_compare(self.ours(image, "F64"), 0)

    def test_logits_as_cnnbench_infer_names_a_single_output(self):
        self.assert_compare(self.ours({"logits": ([1, 12], self.values)}), 0,
                            "read as NCHW [1, 3, 2, 2]")
        self.assert_compare(self.ours({"logits": (self.SHAPE, self.values)}), 0)

    def test_mismatch_exits_1(self):
        path = self.ours({"output0": (self.SHAPE, [v * 1.01 for v in self.values])})
        self.assert_compare(path, 1, "FAIL", "rel_l2 1.000e-02")
        self.assert_compare(path, 0, extra=("--tolerance", "0.02"))

    def test_missing_or_misshapen_exits_2(self):
        self.assert_compare(self.ours({"output1": (self.SHAPE, self.values)}), 2,
                            "missing in ours")
        self.assert_compare(self.ours({"logits": ([1, 3], self.values[:3])}), 2,
                            "'logits' in ours has shape [1, 3]")
        status, _, err = run_main(self.main, ["compare", "--reference",
                                              self.ours({"x": ([1], [1.0])}), "--ours", self.ref])
        self.assertEqual(status, 2)
        self.assertIn("missing in the reference", err)


class WithoutTorch:
    """A unittest.TestCase mixin: the tool (the module MODULE) with `import torch` failing
    (sys.modules["torch"] = None), torch installed or not: run_blocked(*argv) runs its main in a
    subprocess; the tests here, that the module imports and summary (SUMMARY, its arguments)
    runs and prints SUMMARY_SHOWS, and that write-case (WRITE_CASE, the arguments after --dir)
    and bench (BENCH) exit 2 with one line, writing nothing."""
    MODULE = None
    SUMMARY = SUMMARY_SHOWS = WRITE_CASE = BENCH = ()

    def run_blocked(self, *argv):
        code = ("import sys; sys.modules['torch'] = None; sys.path.insert(0, sys.argv[1]); "
                f"import {self.MODULE} as m; sys.exit(m.main(sys.argv[2:]))")
        return subprocess.run([sys.executable, "-c", code, TOOLS, *argv],
                              capture_output=True, text=True, timeout=120)

    def test_torch_free_subcommands_run(self):
        r = self.run_blocked("summary", *self.SUMMARY)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(self.SUMMARY_SHOWS, r.stdout)

    def test_torch_subcommands_exit_2(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_blocked("write-case", "--dir", d, *self.WRITE_CASE)
            self.assertEqual(r.returncode, 2)
            self.assertIn("needs PyTorch", r.stderr)
            self.assertEqual(os.listdir(d), [])
        r = self.run_blocked("bench", *self.BENCH)
        self.assertEqual(r.returncode, 2)
        self.assertIn("needs PyTorch", r.stderr)
        self.assertNotIn("Traceback", r.stderr)
