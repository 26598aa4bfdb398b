#!/usr/bin/env python3
"""YOLOR-CSP-X in PyTorch, from its own cfg-style block list: reference cases and a speed peer.

cnnbench builds YOLOR-CSP-X (WongKinYiu/yolor, cfg/yolor_csp_x.cfg) natively (networks/yolor.cpp).
This tool describes the same network independently, as the cfg's 216 sections written out as
Python dicts (yolor_csp_x_blocks), builds a torch model from that list the way YOLOR's
models.py does (so the state_dict names are the reference's: module_list.{i}.Conv2d.weight,
module_list.{i}.BatchNorm2d.*, module_list.{i}.implicit), and uses it to
  - write a correctness case: random weights, a random input and the three heads' raw outputs
    (after control_channels, before the YOLO decode: strides 8, 16, 32, [N, 255, S/stride,
    S/stride] each) in fp32 with TF32 off, as safetensors files cnnbench_infer can read;
  - compare cnnbench's outputs (tensors output0..output2, NCHW) with such a reference;
  - time PyTorch's own inference of the network (the peer baseline), the way
    tools/pytorch_baseline.py times the torchvision models (its timing code, imported).

The block list's pure-Python bookkeeping (shapes, parameter names and count, conv MACs, a parser
of the real cfg to diff against) needs no torch: tests/test_yolor_reference.py runs it on CPU.
torch (and safetensors for write-case) are imported only inside the subcommands that need them.

Subcommands:
  summary    [--size 640]  block counts, parameters, GMACs and head shapes (no torch).
  check-cfg  --cfg yolor_csp_x.cfg  diff the block list against the real cfg file (no torch);
             exit 1 on a difference.
  write-case --dir DIR --size S --batch N --seed K
             DIR/weights.safetensors  the state_dict (num_batches_tracked left out), float32;
             DIR/input.safetensors    "input" float32 [N, 3, S, S] ~ N(0, 1);
             DIR/reference.safetensors  "output0..2" float32 NCHW, computed in fp32 (TF32 off).
             The BN statistics calibrated on other random images (see below). Prints each
             head's RMS; exit 1 if one is not finite or outside [1e-6, 1e6] (the files are
             written all the same).
  compare    --reference DIR/reference.safetensors --ours OURS.safetensors [--tolerance 1e-4]
             relative L2 (||ours - ref|| / ||ref||) and max |ours - ref| per head; exit 1 if a
             head's relative L2 exceeds the tolerance (or is not finite), 2 where a tensor is
             missing, has the wrong shape or a file cannot be read. Stdlib only (torch, where
             installed, only makes it faster).
  bench      --size 1280 --batches 1,8,16,32 --precision fp16 --out FILE.json [--reps 5]
             [--modes eager,graph]  rows as pytorch_baseline.py's (model "yolor_csp_x").

Random weights (write-case): everything is drawn on the CPU from --seed (the model built under
torch.manual_seed, so the convs have PyTorch's default init; then BatchNorm gamma ~ U(0.8, 1.2),
beta ~ N(1, 0.3), ImplicitA ~ N(0, 0.02) and ImplicitM ~ N(1, 0.02) as YOLOR initialises them; the
input; the calibration images), so the files do not depend on the device but for the rounding of
the BN statistics. Two things keep a random YOLOR well behaved:
  - Calibrated BN statistics. Fixed random ones would not do: PyTorch's default conv init divides
    the signal's variance by about 3 per conv, so ~60 convs in a row leave only the betas and the
    heads would not depend on the input. So each BatchNorm's running mean and variance are its
    input's statistics over calibration images (N(0, 1) like the input, but not the input: see
    calibration_plan for how many), from forwards in train mode with momentum=None; every BN then
    normalises its input to unit variance, and the signal stays O(1) through all 216 blocks.
    Calibrating on the case's input alone fails at small sizes: at 64 px a stride-32 channel has
    4 values an image, fewer than the 1280 channels, so some channels' variances come out tiny
    and any other input, rounding errors included, is amplified by orders of magnitude.
  - A positive beta. With normalised pre-activations, a layer multiplies small perturbations by
    about sqrt(gamma^2 E[silu'(h)^2] / Var[silu(h)]) (h ~ N(beta, gamma^2)), over 1 for any
    nonlinearity: 1.10 at beta = 0, 1.03 at beta = 1. Measured on CPU (torch 1.13): with beta ~
    N(0, 0.1), a 1e-4 relative perturbation of the input became ~7e-2 at the stride-32 head
    (256 px), so fp32 rounding alone would approach the 1e-4 tolerance; with beta ~ N(1, 0.3) it
    becomes 1.4e-4 to 1.8e-4 (64 and 128 px), fp32 against fp64 differs by ~3e-6, and the heads
    still differ by 65-80% (relative L2) between two inputs, with RMS ~0.7 each.
The head convs keep their default bias (YOLOR's _initialize_biases is irrelevant here).

Usage: python3 tools/yolor_reference.py write-case --dir /tmp/yolor64 --size 64 --batch 2
       python3 tools/yolor_reference.py compare --reference /tmp/yolor64/reference.safetensors \\
           --ours /tmp/yolor64/ours.safetensors
       python3 tools/yolor_reference.py bench --size 1280 --out results/pytorch_yolor.json
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The safetensors reading, the comparison, the command line's and the bench's plumbing are shared
# with the StyleGAN tools.
import torch_reference_common as common  # noqa: E402
from torch_reference_common import list_stats, numel  # noqa: E402

NETWORK = "yolor_csp_x"
NUM_CLASSES = 80
HEAD_CHANNELS = 3 * (5 + NUM_CLASSES)  # 255: 3 anchors x (x, y, w, h, objectness, 80 classes)
HEAD_STRIDES = (8, 16, 32)
HEAD_CONVS = (201, 207, 213)  # the linear 1x1 convs with bias, one per head
OUTPUT_NAMES = ("output0", "output1", "output2")  # the heads, strides 8/16/32 (cnnbench's names)
BN_EPS = 1e-4       # models.py: nn.BatchNorm2d(filters, momentum=0.03, eps=1E-4)
BN_MOMENTUM = 0.03
INPUT_CHANNELS = 3
DEFAULT_TOLERANCE = 1e-4
RMS_BOUNDS = (1e-6, 1e6)  # a head's RMS outside these: the random case is degenerate
# BN calibration (calibration_plan): at least this many values per channel at stride 32, over at
# least CAL_MIN_IMAGES images, in forwards of at most CAL_CHUNK_PIXELS input pixels each.
CAL_VALUES = 4096
CAL_MIN_IMAGES = 8
CAL_CHUNK_PIXELS = 8 * 640 * 640

# What the real cfg has (NOTES.md, "YOLOR's layer list against the real cfg"); checked by
# check_blocks() and the tests.
EXPECTED_COUNTS = {"convolutional": 137, "route": 30, "shortcut": 29, "maxpool": 3,
                   "upsample": 2, "implicit_add": 3, "implicit_mul": 3, "shift_channels": 3,
                   "control_channels": 3, "yolo": 3}
EXPECTED_BLOCKS = 216
EXPECTED_PARAMETERS = 99_754_058
EXPECTED_GMACS = {640: 110.94, 1280: 443.77}  # conv MACs per image / 1e9, 2 decimals
TORCH_FREE = "summary, check-cfg and compare"  # the subcommands that need no torch


# --------------------------------------------------------------------------------------------
# The network as the cfg's blocks (no torch)
# --------------------------------------------------------------------------------------------
def _conv(filters, size, stride=1, bn=True):
    """[convolutional]: bn -> Conv2d(bias=False), BatchNorm2d, SiLU; else Conv2d(bias), linear."""
    return {"type": "convolutional", "filters": filters, "size": size, "stride": stride, "bn": bn}


def _route(*layers):
    """[route] layers=...: the concat of those blocks' outputs (one: that output as it is)."""
    return {"type": "route", "layers": list(layers)}


def _shortcut(frm):
    """[shortcut] from=...: the previous block's output plus that block's."""
    return {"type": "shortcut", "from": frm}


def _section_end(blocks, index, what):
    """The cfg's own block-number comments ("# 20", "# 57", ...) as checks while building."""
    if len(blocks) - 1 != index:
        raise AssertionError(f"{what} ends at block {len(blocks) - 1}, the cfg's at {index}")


def yolor_csp_x_blocks():
    """cfg/yolor_csp_x.cfg's 216 sections in order (the [net] section left out), as dicts.

    Written from the cfg's layout (its comments name the sections and give the formulas for the
    merges' offsets), not from networks/yolor.cpp. The block index is the list index, which is
    also the module_list index of the torch model and of every parameter name."""
    b = []
    # Backbone. Stem (0); P1: downsample and one residual block (1-4).
    b += [_conv(32, 3), _conv(80, 3, 2)]
    b += [_conv(40, 1), _conv(80, 3), _shortcut(-3)]
    _section_end(b, 4, "P1")
    # P2 ... P5: downsample (3x3 s2), split (1x1 to half), route back to the downsample, a 1x1,
    # k residual blocks [1x1, 3x3, shortcut -3], "Transition first" (1x1), "Merge [-1, -(3k+4)]"
    # (with the split), "Transition last" (1x1 to the full width).
    for width, k, end in ((160, 3, 20), (320, 10, 57), (640, 10, 94), (1280, 5, 116)):
        half = width // 2
        b += [_conv(width, 3, 2), _conv(half, 1), _route(-2), _conv(half, 1)]
        for _ in range(k):
            b += [_conv(half, 1), _conv(half, 3), _shortcut(-3)]
        b += [_conv(half, 1), _route(-1, -(3 * k + 4)), _conv(width, 1)]
        _section_end(b, end, f"the backbone stage of width {width}")
    # Neck. CSPSPP (117-133): a 1x1 (117), back to 116, 1x1 / 3x3 / 1x1, the SPP (max-pools 5, 9,
    # 13 at stride 1 of the same 1x1, concatenated as [mp13, mp9, mp5, 1x1]), 1x1 / 3x3 / 1x1 /
    # 3x3, the merge with 117 and a 1x1.
    b += [_conv(640, 1), _route(-2), _conv(640, 1), _conv(640, 3), _conv(640, 1)]
    b += [{"type": "maxpool", "size": 5}, _route(-2), {"type": "maxpool", "size": 9},
          _route(-4), {"type": "maxpool", "size": 13}, _route(-1, -3, -5, -6)]
    b += [_conv(640, 1), _conv(640, 3), _conv(640, 1), _conv(640, 3), _route(-1, -15),
          _conv(640, 1)]
    _section_end(b, 133, "CSPSPP")

    def plain_block(c):
        """A 1x1, "Split" (1x1), back to the first, the "Plain Block" (three [1x1, 3x3] without
        shortcuts), "Merge [-1, -(2k+2)]" with the split, "Transition last" (1x1)."""
        return ([_conv(c, 1), _conv(c, 1), _route(-2)] + [_conv(c, 1), _conv(c, 3)] * 3
                + [_route(-1, -8), _conv(c, 1)])

    # FPN-4 and FPN-3: a 1x1, upsample x2, the backbone's lateral (absolute), its 1x1, the concat
    # [lateral 1x1, upsampled], the plain block.
    for c, lateral, end in ((320, 94, 149), (160, 57, 165)):
        b += [_conv(c, 1), {"type": "upsample"}, _route(lateral), _conv(c, 1), _route(-1, -3)]
        b += plain_block(c)
        _section_end(b, end, f"FPN at {c}")
    # PAN-4 and PAN-5: a 3x3 stride-2 conv, the concat with the FPN's output (absolute), the plain
    # block.
    for c, lateral, end in ((320, 149, 178), (640, 133, 191)):
        b += [_conv(c, 3, 2), _route(-1, lateral)]
        b += plain_block(c)
        _section_end(b, end, f"PAN at {c}")
    # Implicit knowledge (192-197): ImplicitA per head's 3x3 width, ImplicitM per head's 255.
    b += [{"type": "implicit_add", "filters": c} for c in (320, 640, 1280)]
    b += [{"type": "implicit_mul", "filters": HEAD_CHANNELS} for _ in range(3)]
    _section_end(b, 197, "the implicit layers")
    # Heads YOLO-3/4/5 (198-215): from 165, 178, 191: a 3x3 (BN, SiLU), + ImplicitA, the linear
    # 1x1 to 255 with bias, x ImplicitM, [yolo].
    for h, (source, c) in enumerate(((165, 320), (178, 640), (191, 1280))):
        b += [_route(source), _conv(c, 3), {"type": "shift_channels", "from": 192 + h},
              _conv(HEAD_CHANNELS, 1, bn=False), {"type": "control_channels", "from": 195 + h},
              {"type": "yolo"}]
    _section_end(b, 215, "the heads")
    return b


def block_counts(blocks):
    """{cfg section type: how many}."""
    counts = {}
    for blk in blocks:
        counts[blk["type"]] = counts.get(blk["type"], 0) + 1
    return counts


def references(block):
    """The earlier blocks a block names, as written (relative if < 0, else absolute)."""
    t = block["type"]
    if t == "route":
        return list(block["layers"])
    if t in ("shortcut", "shift_channels", "control_channels"):
        return [block["from"]]
    return []


def resolve(i, ref):
    """The absolute index of reference `ref` made by block i; ValueError unless it is earlier."""
    j = i + ref if ref < 0 else ref
    if not 0 <= j < i:
        raise ValueError(f"block {i} refers to {ref} (block {j}), which is not an earlier block")
    return j


def conv_out(side, size, stride):
    """Output side of a conv with padding size // 2 (the cfg's pad=1)."""
    return (side + 2 * (size // 2) - size) // stride + 1


def infer_shapes(blocks, size):
    """Each block's output (C, H, W) for a square input of side `size`, per image.

    As models.py runs it: an implicit block outputs its [1, C, 1, 1] tensor (which only
    shift/control_channels use); shortcut, shift and control keep the previous block's shape.
    ValueError on a bad reference or operands that do not fit together."""
    shapes = []
    prev = (INPUT_CHANNELS, size, size)
    for i, blk in enumerate(blocks):
        t = blk["type"]
        src = [shapes[resolve(i, r)] for r in references(blk)]
        if t == "convolutional":
            c, h, w = prev
            k, s = blk["size"], blk["stride"]
            out = (blk["filters"], conv_out(h, k, s), conv_out(w, k, s))
        elif t == "route":
            if len({(h, w) for _, h, w in src}) != 1:
                raise ValueError(f"block {i}: route of different spatial sizes {src}")
            out = (sum(c for c, _, _ in src), src[0][1], src[0][2])
        elif t == "shortcut":
            if src[0] != prev:
                raise ValueError(f"block {i}: shortcut of {prev} and {src[0]}")
            out = prev
        elif t in ("shift_channels", "control_channels"):
            if src[0][0] != prev[0]:
                raise ValueError(f"block {i}: {t} of {prev[0]} channels by {src[0][0]}")
            out = prev
        elif t == "maxpool":  # stride 1, padding (size - 1) // 2: same size
            out = prev
        elif t == "upsample":  # nearest, x2
            out = (prev[0], 2 * prev[1], 2 * prev[2])
        elif t in ("implicit_add", "implicit_mul"):
            out = (blk["filters"], 1, 1)
        elif t == "yolo":
            out = prev
        else:
            raise ValueError(f"block {i}: unknown type {t!r}")
        shapes.append(out)
        prev = out
    return shapes


def head_blocks(blocks):
    """Indices of the yolo blocks (the heads, in the cfg's order: strides 8, 16, 32)."""
    return [i for i, blk in enumerate(blocks) if blk["type"] == "yolo"]


def input_channels(blocks):
    """Each block's input channel count (the previous block's output; 3 for block 0)."""
    shapes = infer_shapes(blocks, 64)
    return [INPUT_CHANNELS] + [c for c, _, _ in shapes[:-1]]


def param_specs(blocks, buffers=False):
    """[(state_dict name, shape)] of every parameter, in state_dict order; with buffers, also the
    BatchNorm running statistics (num_batches_tracked, which inference does not use, never)."""
    cin = input_channels(blocks)
    specs = []
    for i, blk in enumerate(blocks):
        m = f"module_list.{i}"
        if blk["type"] == "convolutional":
            f, k = blk["filters"], blk["size"]
            specs.append((f"{m}.Conv2d.weight", [f, cin[i], k, k]))
            if not blk["bn"]:
                specs.append((f"{m}.Conv2d.bias", [f]))
            else:
                specs += [(f"{m}.BatchNorm2d.weight", [f]), (f"{m}.BatchNorm2d.bias", [f])]
                if buffers:
                    specs += [(f"{m}.BatchNorm2d.running_mean", [f]),
                              (f"{m}.BatchNorm2d.running_var", [f])]
        elif blk["type"] in ("implicit_add", "implicit_mul"):
            specs.append((f"{m}.implicit", [1, blk["filters"], 1, 1]))
    return specs


def param_count(blocks):
    """Trainable parameters: conv weights and biases, BN gamma and beta, the implicit tensors."""
    return sum(numel(s) for _, s in param_specs(blocks))


def conv_macs(blocks, size):
    """Multiply-accumulates of the convolutions per image (as Graph::macs: output elements x input
    channels x kernel area; biases, BN, pools, adds and the implicits not counted)."""
    shapes = infer_shapes(blocks, size)
    cin = input_channels(blocks)
    return sum(numel(shapes[i]) * cin[i] * blk["size"] ** 2
               for i, blk in enumerate(blocks) if blk["type"] == "convolutional")


def gmacs(blocks, size):
    return round(conv_macs(blocks, size) / 1e9, 2)


def check_blocks(blocks):
    """The problems of a block list against what the cfg is known to have ([] when none)."""
    problems = []
    if len(blocks) != EXPECTED_BLOCKS:
        problems.append(f"{len(blocks)} blocks, not {EXPECTED_BLOCKS}")
    counts = block_counts(blocks)
    for t in sorted(set(counts) | set(EXPECTED_COUNTS)):
        if counts.get(t, 0) != EXPECTED_COUNTS.get(t, 0):
            problems.append(f"{counts.get(t, 0)} {t} blocks, not {EXPECTED_COUNTS.get(t, 0)}")
    try:
        infer_shapes(blocks, 640)
    except ValueError as e:
        return problems + [str(e)]
    if param_count(blocks) != EXPECTED_PARAMETERS:
        problems.append(f"{param_count(blocks):,} parameters, not {EXPECTED_PARAMETERS:,}")
    for size, expected in EXPECTED_GMACS.items():
        if gmacs(blocks, size) != expected:
            problems.append(f"{gmacs(blocks, size)} GMACs at {size}, not {expected}")
    return problems


def check_input_size(size):
    """ValueError unless the side is a positive multiple of 32 (strides 8, 16, 32)."""
    if size < 32 or size % 32:
        raise ValueError(f"the input size must be a positive multiple of 32, not {size}")


# --------------------------------------------------------------------------------------------
# The real cfg file (no torch): parse it to diff the block list against it
# --------------------------------------------------------------------------------------------
def _ints(text):
    return [int(t) for t in text.split(",") if t.strip()]


def parse_cfg(text):
    """A darknet-style cfg's sections, [net] left out, in yolor_csp_x_blocks' form (the keys the
    network's structure depends on; anchors, loss settings and the like dropped)."""
    sections = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("["):
            sections.append({"type": line.strip("[]").strip()})
        elif "=" in line and sections:
            key, value = (s.strip() for s in line.split("=", 1))
            sections[-1][key] = value
    blocks = []
    for s in sections:
        t = s["type"]
        if t == "net":
            continue
        if t == "convolutional":
            size = int(s.get("size", 1))
            if int(s.get("pad", 0)) != 1 and size > 1:
                raise ValueError("a convolutional section without pad=1 is not supported")
            blk = _conv(int(s["filters"]), size, int(s.get("stride", 1)),
                        bn=bool(int(s.get("batch_normalize", 0))))
            act = s.get("activation", "linear")
            if act != ("silu" if blk["bn"] else "linear"):
                raise ValueError(f"block {len(blocks)}: activation {act} with batch_normalize "
                                 f"{int(blk['bn'])} is not supported")
        elif t == "route":
            blk = _route(*_ints(s["layers"]))
        elif t in ("shortcut", "shift_channels", "control_channels"):
            (frm,) = _ints(s["from"])
            blk = {"type": t, "from": frm}
        elif t == "maxpool":
            if int(s.get("stride", 1)) != 1:
                raise ValueError(f"block {len(blocks)}: maxpool of stride {s['stride']}")
            blk = {"type": "maxpool", "size": int(s["size"])}
        elif t == "upsample":
            if int(s.get("stride", 2)) != 2:
                raise ValueError(f"block {len(blocks)}: upsample by {s['stride']}")
            blk = {"type": "upsample"}
        elif t in ("implicit_add", "implicit_mul"):
            blk = {"type": t, "filters": int(s["filters"])}
        elif t == "yolo":
            blk = {"type": "yolo"}
        else:
            raise ValueError(f"block {len(blocks)}: section type [{t}] is not supported")
        blocks.append(blk)
    return blocks


def block_differences(ours, theirs):
    """Human-readable differences of two block lists, block by block ([] when equal)."""
    diffs = [f"block {i}: {a} != {b}" for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    if len(ours) != len(theirs):
        diffs.append(f"{len(ours)} blocks against {len(theirs)}")
    return diffs


# --------------------------------------------------------------------------------------------
# The comparison of heads (stdlib)
# --------------------------------------------------------------------------------------------
def compare_outputs(reference, ours, tolerance=DEFAULT_TOLERANCE, names=OUTPUT_NAMES,
                    stats=list_stats):
    """torch_reference_common.compare_outputs, by default of the three heads at this tool's
    tolerance: (status, rows, problems)."""
    return common.compare_outputs(reference, ours, tolerance, names, stats)


# --------------------------------------------------------------------------------------------
# torch: the model, the random case, the timing (imported inside the functions)
# --------------------------------------------------------------------------------------------
def require_torch(cuda=False):
    """torch, or MissingDependency with one clear line (exit 2 in main)."""
    return common.require_torch(cuda, TORCH_FREE)


def build_model(blocks=None):
    """An nn.Module of the block list (YOLOR models.py's layout): module_list[i] per block;
    conv blocks nn.Sequential(Conv2d[, BatchNorm2d, activation=SiLU]), implicit blocks a module
    with the parameter `implicit`, max-pools and upsamples their nn modules, the other blocks
    parameter-free placeholders. forward(x) -> (head0, head1, head2), the outputs of the
    control_channels blocks (strides 8, 16, 32), NCHW."""
    torch = require_torch()
    from collections import OrderedDict
    from torch import nn

    blocks = yolor_csp_x_blocks() if blocks is None else blocks
    cin = input_channels(blocks)

    class Implicit(nn.Module):
        """ImplicitA / ImplicitM (YOLOR utils/layers.py): a free [1, C, 1, 1] tensor."""

        def __init__(self, channels, mean):
            super().__init__()
            self.implicit = nn.Parameter(torch.zeros(1, channels, 1, 1))
            nn.init.normal_(self.implicit, mean=mean, std=0.02)

        def forward(self):
            return self.implicit

    class Placeholder(nn.Module):
        """route, shortcut, shift/control_channels, yolo: done in YolorCspX.forward."""

        def __init__(self, kind):
            super().__init__()
            self.kind = kind

        def extra_repr(self):
            return self.kind

    class YolorCspX(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = blocks
            self.module_list = nn.ModuleList()
            for i, blk in enumerate(blocks):
                t = blk["type"]
                if t == "convolutional":
                    k = blk["size"]
                    layers = [("Conv2d", nn.Conv2d(cin[i], blk["filters"], k, blk["stride"],
                                                   k // 2, bias=not blk["bn"]))]
                    if blk["bn"]:
                        layers += [("BatchNorm2d", nn.BatchNorm2d(blk["filters"], eps=BN_EPS,
                                                                  momentum=BN_MOMENTUM)),
                                   ("activation", nn.SiLU())]
                    module = nn.Sequential(OrderedDict(layers))
                elif t == "maxpool":
                    k = blk["size"]
                    module = nn.MaxPool2d(k, stride=1, padding=(k - 1) // 2)
                elif t == "upsample":
                    module = nn.Upsample(scale_factor=2, mode="nearest")
                elif t == "implicit_add":
                    module = Implicit(blk["filters"], 0.0)
                elif t == "implicit_mul":
                    module = Implicit(blk["filters"], 1.0)
                else:
                    module = Placeholder(t)
                self.module_list.append(module)
            # Outputs later blocks name, and the block after which each is no longer needed (so
            # the forward holds no more than it must, like models.py's `routs`).
            self.refs = [[resolve(i, r) for r in references(blk)] for i, blk in enumerate(blocks)]
            last_use = {}
            for i, refs in enumerate(self.refs):
                for j in refs:
                    last_use[j] = i
            self.keep = set(last_use)
            self.release = [[] for _ in blocks]
            for j, i in last_use.items():
                self.release[i].append(j)

        def forward(self, x):
            saved, heads = {}, []
            for i, (blk, module) in enumerate(zip(self.blocks, self.module_list)):
                t, refs = blk["type"], self.refs[i]
                if t in ("convolutional", "maxpool", "upsample"):
                    x = module(x)
                elif t == "route":
                    xs = [saved[j] for j in refs]
                    x = xs[0] if len(xs) == 1 else torch.cat(xs, 1)
                elif t == "shortcut":
                    x = x + saved[refs[0]]
                elif t == "shift_channels":  # ShiftChannel: a.expand_as(x) + x
                    x = saved[refs[0]] + x
                elif t == "control_channels":  # ControlChannel: a.expand_as(x) * x
                    x = saved[refs[0]] * x
                elif t in ("implicit_add", "implicit_mul"):
                    x = module()
                elif t == "yolo":
                    heads.append(x)
                if i in self.keep:
                    saved[i] = x
                for j in self.release[i]:
                    del saved[j]
            return tuple(heads)

    return YolorCspX()


def check_model(model, blocks):
    """AssertionError unless the torch model's state_dict is param_specs' (names, shapes, order;
    num_batches_tracked left out) and its parameter count param_count's."""
    common.check_state_dict(model, param_specs(blocks, buffers=True), param_count(blocks),
                            "block list", skip="num_batches_tracked")


def calibration_plan(size):
    """(forwards, images per forward) of the BN calibration at input side `size`: enough images
    for CAL_VALUES values per channel at stride 32 (and at least CAL_MIN_IMAGES), split into
    equal forwards of at most CAL_CHUNK_PIXELS pixels (one image at least)."""
    per_image = max(1, size // 32) ** 2
    images = max(CAL_MIN_IMAGES, -(-CAL_VALUES // per_image))
    largest = max(1, CAL_CHUNK_PIXELS // (size * size))
    forwards = -(-images // largest)
    return forwards, -(-images // forwards)


def randomize(model, generator):
    """BatchNorm gamma ~ U(0.8, 1.2), beta ~ N(1, 0.3) (see the module's doc); ImplicitA ~
    N(0, 0.02), ImplicitM ~ N(1, 0.02) (YOLOR's init). The convs keep PyTorch's default init."""
    torch = require_torch()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".BatchNorm2d.weight" in name:
                p.copy_(torch.rand(p.shape, generator=generator) * 0.4 + 0.8)
            elif ".BatchNorm2d.bias" in name:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.3 + 1.0)
            elif name.endswith(".implicit"):
                i = int(name.split(".")[1])
                mean = 1.0 if model.blocks[i]["type"] == "implicit_mul" else 0.0
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02 + mean)


def calibrate_batchnorm(model, batches):
    """Sets every BatchNorm's running mean and variance to the statistics of its input over the
    input batches (an iterable of tensors on the model's device): forwards in train mode with
    momentum=None, so the running statistics are the averages of the batches' (PyTorch keeps the
    unbiased variance). The model is left in eval mode."""
    torch = require_torch()
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for x in batches:
            model(x)
    model.eval()
    for m in bns:
        m.momentum = BN_MOMENTUM
        m.num_batches_tracked.zero_()


def write_case(args):
    """The write-case subcommand: weights, input and the fp32 reference heads. Returns the exit
    status."""
    def check():
        check_input_size(args.size)
        common.check_batch(args.batch)

    torch, save_file, _, device = common.start_write_case(check, TORCH_FREE)
    blocks = yolor_csp_x_blocks()
    torch.manual_seed(args.seed)  # the convs' default init, on the CPU
    model = build_model(blocks)
    check_model(model, blocks)
    gen = torch.Generator().manual_seed(args.seed)
    randomize(model, gen)
    x = torch.randn(args.batch, INPUT_CHANNELS, args.size, args.size, generator=gen)
    model = model.to(device=device, dtype=torch.float32)
    forwards, per_forward = calibration_plan(args.size)
    calibrate_batchnorm(model, (torch.randn(per_forward, INPUT_CHANNELS, args.size, args.size,
                                            generator=gen).to(device) for _ in range(forwards)))
    with torch.no_grad():
        heads = [h.float().contiguous().cpu() for h in model(x.to(device))]

    meta = {"network": NETWORK, "seed": str(args.seed), "input_size": str(args.size),
            "batch": str(args.batch), "torch": torch.__version__, "device": str(device),
            "tool": "tools/yolor_reference.py write-case"}
    common.save_case(save_file, args.dir, model, x.contiguous(), dict(zip(OUTPUT_NAMES, heads)),
                     meta, skip="num_batches_tracked")

    print(f"{NETWORK}: {param_count(blocks):,} parameters, seed {args.seed}, batch {args.batch} "
          f"at {args.size} px, fp32 (TF32 off) on {device}, BN calibrated on "
          f"{forwards} x {per_forward} images; files in {args.dir}")
    status = 0
    for name, stride, h in zip(OUTPUT_NAMES, HEAD_STRIDES, heads):
        status = status if common.report_rms(f"{name} stride {stride:>2}", h, RMS_BOUNDS) else 1
    if status:
        common.rms_error("a head", RMS_BOUNDS)
    return status


def compare(args):
    """The compare subcommand. Returns the exit status."""
    loaded = common.read_pair(args.reference, args.ours)
    if loaded is None:
        return 2
    status, rows, problems = compare_outputs(loaded["reference"], loaded["ours"], args.tolerance,
                                             stats=common.raw_stats)
    return common.print_comparison(status, rows, problems, args.tolerance)


def bench(args):
    """The bench subcommand: PyTorch's inference of the network, timed as pytorch_baseline.py
    times the torchvision models (torch_reference_common.Bench)."""
    b = common.Bench(args, lambda: check_input_size(args.size), TORCH_FREE)
    torch, dtype, device = b.torch, b.dtype, b.device
    blocks = yolor_csp_x_blocks()
    torch.manual_seed(0)  # weights: PyTorch's default init (speed does not depend on the values)
    model = build_model(blocks).eval().to(device=device, dtype=dtype,
                                          memory_format=torch.channels_last)
    doc = b.document({"input_size": args.size},
                     {"model": NETWORK, "parameters": param_count(blocks),
                      "gmacs_per_image": conv_macs(blocks, args.size) / 1e9})

    def make_input(batch):
        x = torch.randn(batch, INPUT_CHANNELS, args.size, args.size, device=device, dtype=dtype)
        return x.contiguous(memory_format=torch.channels_last)

    return b.run(model, doc, f"{NETWORK} at {args.size} px", NETWORK, f"{NETWORK} {args.size}",
                 args.size, make_input)


# --------------------------------------------------------------------------------------------
# The torch-free subcommands and main
# --------------------------------------------------------------------------------------------
def summary(args):
    check_input_size(args.size)
    blocks = yolor_csp_x_blocks()
    shapes = infer_shapes(blocks, args.size)
    print(f"{NETWORK}: {len(blocks)} blocks, {param_count(blocks):,} parameters, "
          f"{conv_macs(blocks, args.size) / 1e9:.3f} GMACs per image at {args.size} px")
    print("  " + ", ".join(f"{t} {n}" for t, n in block_counts(blocks).items()))
    for name, stride, i in zip(OUTPUT_NAMES, HEAD_STRIDES, head_blocks(blocks)):
        print(f"  {name}: block {i}, stride {stride}, [N, {', '.join(map(str, shapes[i]))}]")
    problems = check_blocks(blocks)
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    return 1 if problems else 0


def check_cfg(args):
    try:
        with open(args.cfg) as f:
            theirs = parse_cfg(f.read())
    except (OSError, ValueError, KeyError) as e:
        print(f"error: cannot read {args.cfg}: {e}", file=sys.stderr)
        return 2
    diffs = block_differences(yolor_csp_x_blocks(), theirs)
    for d in diffs:
        print(d)
    print(f"{len(theirs)} blocks in {args.cfg}: "
          f"{'identical to the block list' if not diffs else f'{len(diffs)} differences'}")
    return 1 if diffs else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="YOLOR-CSP-X in PyTorch: reference cases, their "
                                             "comparison and a speed baseline.")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("summary", help="counts, parameters, GMACs, head shapes (no torch)")
    p.add_argument("--size", type=int, default=640)
    p = sub.add_parser("check-cfg", help="diff the block list against the real cfg (no torch)")
    p.add_argument("--cfg", required=True, help="path of WongKinYiu/yolor's cfg/yolor_csp_x.cfg")
    p = sub.add_parser("write-case", help="random weights, an input and the fp32 heads")
    p.add_argument("--dir", required=True)
    p.add_argument("--size", type=int, default=640)
    common.add_case_args(p)
    common.add_compare_parser(sub, "cnnbench's heads against a reference",
                              "cnnbench's output0..2 (float32 NCHW)", DEFAULT_TOLERANCE,
                              per=" per head")
    p = sub.add_parser("bench", help="PyTorch's inference speed (needs a CUDA GPU)")
    p.add_argument("--size", type=int, default=1280)
    common.add_bench_args(p, "1,8,16,32")
    common.add_timing_args(p)
    args = ap.parse_args(argv)

    return common.run_command({"summary": summary, "check-cfg": check_cfg,
                               "write-case": write_case, "compare": compare,
                               "bench": bench}[args.command], args)


if __name__ == "__main__":
    sys.exit(main())
