#!/usr/bin/env python3
"""StyleGAN2's generator in PyTorch, from plain torch ops: reference cases and a speed peer.

cnnbench builds StyleGAN2's generator natively (networks/stylegan.cpp,
stylegan2_generator(resolution, channel_base, mapping_layers)). This tool describes the same
network independently, following NVlabs stylegan2-ada-pytorch (training/networks.py and
torch_utils/ops: upfirdn2d, bias_act, conv2d_resample, modulated_conv2d with
fused_modconv=False), as a torch module whose state_dict is NVlabs' Generator's (the names and
shapes of cnnbench's graph: mapping.fc{i}.weight, synthesis.b{res}.conv0.affine.weight, ...), with
z_dim = w_dim = 512, c_dim 0, no truncation (psi 1), no style mixing and noise_mode 'const'. It
  - writes a correctness case: random weights, a random z and the image [N, 3, R, R], in fp32 with
    TF32 off, as safetensors files cnnbench_infer can read;
  - compares cnnbench's image with such a reference;
  - times PyTorch's own generation (the peer baseline), the way tools/pytorch_baseline.py times
    the torchvision models (its timing code, imported).

The layer list's pure-Python bookkeeping (channels, parameter and buffer names and shapes, the
parameter count, conv MACs, the FIR paddings) needs no torch: tests/test_stylegan_reference.py
runs it on CPU. torch (and safetensors for write-case) are imported only inside the subcommands
that need them.

Configurations (networks.md 9.1; train.py's): f (`stylegan2`, paper512/1024): channel_base 32768,
8 mapping layers; paper256: channel_base 16384, 8 mapping layers. channel_max 512 for both.

Subcommands:
  summary    --config f|paper256 [--resolution R]  parameters, per-block channels and parameters,
             conv GMACs (no torch); exit 1 if a known total (networks.md 9.1) is not reproduced.
  write-case --dir DIR --config paper256 --resolution 256 --batch N --seed K [--conv-clamp 256]
             DIR/weights.safetensors  every parameter and buffer of the state_dict, float32 (the
                                      noise strengths as 0-d tensors, shape []);
             DIR/input.safetensors    "input" float32 [N, 512, 1, 1]: z, as cnnbench's graph takes
                                      it (an input of 512 channels, 1 x 1);
             DIR/reference.safetensors  "output0" float32 [N, 3, R, R], computed in fp32 (TF32
                                      off).
             Also computes the image two other ways (the up-sampling convs by NVlabs' slow path,
             and every modulated conv as NVlabs' fused grouped conv) and prints their relative
             differences: a check of this tool. Prints the image's RMS; exit 1 if it is not
             finite or outside [1e-4, 1e4], or if a cross-check differs by more than 1e-4 (the
             files are written all the same).
  compare    --reference DIR/reference.safetensors --ours OURS.safetensors [--tolerance 1e-3]
             relative L2 and max |ours - ref| of the image. Ours is "output0", or where that is
             missing "logits" (what cnnbench_infer names a single output), reshaped from
             [N, 3*R*R] (NCHW order) when it is stored flat. Exit 1 if the relative L2 exceeds
             the tolerance (or is not finite), 2 where a tensor is missing, has a shape that does
             not fit or a file cannot be read. Stdlib only (torch, where installed, only makes it
             faster).
  bench      --config f --resolution 1024 --batches 1,8,16,32,64 --precision fp16 --out FILE.json
             [--modes eager,graph] [--reps 5]  rows as pytorch_baseline.py's (model
             "stylegan2_{config}_{res}"); out-of-memory rows recorded as errors.

NVlabs' arithmetic, as reproduced here:
  - Mapping: z normalised (x * rsqrt(mean(x^2 over channels) + 1e-8)); each FC layer
    FullyConnectedLayer(lr_multiplier 0.01, lrelu): x @ (W * 0.01 / sqrt(512)).T, + b * 0.01,
    lrelu(0.2) * sqrt(2). The stored W and b are raw (equalised learning rate).
  - SynthesisLayer: styles = affine(w) (W / sqrt(512), bias init 1); modulated_conv2d with
    fused_modconv=False: x * styles, conv2d_resample with the raw weight (flip_weight = (up == 1)),
    times dcoefs = rsqrt(sum over (in, kh, kw) of (weight * styles)^2 + 1e-8), plus noise_const *
    noise_strength (torch.addcmul, as NVlabs' fma); then bias_act: + bias, lrelu(0.2), * sqrt(2),
    clamp to +-conv_clamp (after the gain). In fp16 and bf16 the weight and styles are first scaled
    by their inf-norms (and the weight by 1/sqrt(in * kh * kw)), as NVlabs does for fp16 (exact
    arithmetic is invariant to it).
  - The up-sampling conv (conv0, up=2, 3x3, padding 1, filter [1,3,3,1]): NVlabs' fast path, the
    one its conv2d_resample takes: a conv_transpose2d of stride 2 on the in/out-swapped weight (not
    flipped, since flip_weight=False), padding [pyt, pxt] = [0, 0], then upfirdn2d (filter2d) with
    padding [1, 1, 1, 1] and gain 4 (see conv2d_resample_plan). The slow path (upfirdn2d's zero
    insertion with padding [3, 2, 3, 2] and gain 4, then the flipped 3x3 conv) is implemented too
    and cross-checked by write-case.
  - ToRGBLayer: styles = affine(w) / sqrt(C_in); modulated conv 1x1 without demodulation;
    bias_act linear (gain 1) with the clamp.
  - 'skip' architecture: img = upsample2d(img, [1,3,3,1]) + torgb(x), the image kept in fp32
    (upfirdn2d up 2, padding [2, 1, 2, 1], gain 4).
  - upfirdn2d is NVlabs' _upfirdn2d_ref (zero insertion, pad, conv2d with the flipped filter
    scaled by gain ** (ndim / 2), stride down-sampling); bias_act is _bias_act_ref.
  - dcoefs are computed as styles^2 @ (sum over kh, kw of weight^2).T, which is NVlabs'
    sum over the [N, O, I, kh, kw] tensor regrouped (the fused cross-check uses NVlabs' form).
  - All synthesis blocks run in the chosen precision (NVlabs' num_fp16_res = all); the
    parameters stay float32 (cast per use, as NVlabs does), the mapping runs in fp32.

Random weights (write-case), drawn on the CPU from --seed in state_dict order: mapping W ~ N(0, 1)
/ 0.01 (NVlabs' init), mapping b ~ N(0, 0.1); affine W ~ N(0, 1), affine b ~ 1 + N(0, 0.1); conv
and torgb weights ~ N(0, 1); biases ~ N(0, 0.1); noise_strength ~ N(0, 0.1) (not 0, so the noise
matters); noise_const, const and w_avg (unused: psi 1) ~ N(0, 1); resample_filter the fixed
setup_filter([1,3,3,1]). Then z ~ N(0, 1).

Usage: python3 tools/stylegan_reference.py summary --config f
       python3 tools/stylegan_reference.py write-case --dir /tmp/sg256 --config paper256 \\
           --resolution 256 --batch 2 --seed 1
       python3 tools/stylegan_reference.py compare --reference /tmp/sg256/reference.safetensors \\
           --ours /tmp/sg256/ours.safetensors
       python3 tools/stylegan_reference.py bench --config f --resolution 1024 \\
           --out results/pytorch_stylegan2.json
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The safetensors reading, the comparison, the command line's and the bench's plumbing and the
# mapping network are shared with the other reference tools (stylegan3's, yolor's).
import torch_reference_common as common  # noqa: E402
from torch_reference_common import (LRELU_GAIN, LRELU_SLOPE, MAPPING_LR, W_DIM,  # noqa: E402
                                    Z_DIM, numel, require_torch)

NETWORK = "stylegan2"
CHANNEL_MAX = 512
IMG_CHANNELS = 3
DEFAULT_CONV_CLAMP = 256   # train.py's conv_clamp for every config
RESAMPLE_TAPS = (1, 3, 3, 1)
CONV_KERNEL = 3
OUTPUT_NAME = "output0"
DEFAULT_TOLERANCE = 1e-3
RMS_BOUNDS = (1e-4, 1e4)   # the image's RMS outside these: the random case is degenerate
CROSSCHECK_TOLERANCE = 1e-4  # the other formulations against the main one, fp32 (TF32 off)

CONFIGS = {
    "f": {"channel_base": 32768, "mapping_layers": 8, "resolution": 1024},
    "paper256": {"channel_base": 16384, "mapping_layers": 8, "resolution": 256},
}
# networks.md 9.1's totals ([DEV] with NVlabs' Generator), also tests/test_graph.cpp's
# (StyleGan.Generator2MatchesNvlabs): (resolution, channel_base, mapping_layers) -> parameters.
EXPECTED_PARAMETERS = {
    (1024, 32768, 8): 30_370_060,
    (1024, 32768, 2): 28_794_124,
    (512, 32768, 8): 30_276_583,
    (256, 32768, 8): 30_034_338,
    (256, 16384, 8): 24_767_458,
}


# --------------------------------------------------------------------------------------------
# The network as a layer list (no torch)
# --------------------------------------------------------------------------------------------
def check_resolution(resolution):
    """ValueError unless the resolution is a power of two from 4 (NVlabs' assertion)."""
    if resolution < 4 or resolution & (resolution - 1):
        raise ValueError(f"the resolution must be a power of two from 4, not {resolution}")


def config_of(config):
    """(channel_base, mapping_layers) of a named configuration; ValueError for an unknown one."""
    if config not in CONFIGS:
        raise ValueError(f"unknown config {config!r}; valid: {', '.join(sorted(CONFIGS))}")
    return CONFIGS[config]["channel_base"], CONFIGS[config]["mapping_layers"]


def block_resolutions(resolution):
    """4, 8, ..., resolution."""
    check_resolution(resolution)
    return [2 ** i for i in range(2, resolution.bit_length())]


def channels(res, channel_base):
    """SynthesisNetwork's channels_dict: min(channel_base // res, channel_max)."""
    return min(channel_base // res, CHANNEL_MAX)


def channel_schedule(resolution, channel_base):
    """[(res, in_channels, out_channels)] per synthesis block; in_channels 0 for b4 (const)."""
    return [(res, channels(res // 2, channel_base) if res > 4 else 0, channels(res, channel_base))
            for res in block_resolutions(resolution)]


def state_specs(resolution, channel_base, mapping_layers):
    """[(name, shape, trainable)] of NVlabs Generator's state_dict, in its order (synthesis, then
    mapping; each module's parameters, then its buffers, then its children's). Buffers
    (trainable False): mapping.w_avg, every resample_filter, every noise_const."""
    specs = []

    def fc(prefix, in_features, out_features):
        specs.append((f"{prefix}.weight", [out_features, in_features], True))
        specs.append((f"{prefix}.bias", [out_features], True))

    def synthesis_layer(prefix, cin, cout, res):
        specs.append((f"{prefix}.weight", [cout, cin, CONV_KERNEL, CONV_KERNEL], True))
        specs.append((f"{prefix}.noise_strength", [], True))
        specs.append((f"{prefix}.bias", [cout], True))
        specs.append((f"{prefix}.resample_filter", [len(RESAMPLE_TAPS)] * 2, False))
        specs.append((f"{prefix}.noise_const", [res, res], False))
        fc(f"{prefix}.affine", W_DIM, cin)

    for res, cin, cout in channel_schedule(resolution, channel_base):
        b = f"synthesis.b{res}"
        if cin == 0:
            specs.append((f"{b}.const", [cout, 4, 4], True))
        specs.append((f"{b}.resample_filter", [len(RESAMPLE_TAPS)] * 2, False))
        if cin:
            synthesis_layer(f"{b}.conv0", cin, cout, res)
        synthesis_layer(f"{b}.conv1", cout, cout, res)
        specs.append((f"{b}.torgb.weight", [IMG_CHANNELS, cout, 1, 1], True))
        specs.append((f"{b}.torgb.bias", [IMG_CHANNELS], True))
        fc(f"{b}.torgb.affine", W_DIM, cout)
    specs.append(("mapping.w_avg", [W_DIM], False))
    for i in range(mapping_layers):
        fc(f"mapping.fc{i}", Z_DIM if i == 0 else W_DIM, W_DIM)
    return specs


def param_specs(resolution, channel_base, mapping_layers, buffers=False):
    """[(state_dict name, shape)] of every parameter (with buffers: every entry), in order."""
    return [(n, s) for n, s, t in state_specs(resolution, channel_base, mapping_layers)
            if t or buffers]


def param_count(resolution, channel_base, mapping_layers):
    """Trainable parameters, as NVlabs counts them (noise_strength included, buffers not)."""
    return sum(numel(s) for _, s in param_specs(resolution, channel_base, mapping_layers))


def block_param_counts(resolution, channel_base, mapping_layers):
    """{"mapping": n, "synthesis.b4": n, ...}: trainable parameters per module."""
    out = {}
    for name, shape in param_specs(resolution, channel_base, mapping_layers):
        key = "mapping" if name.startswith("mapping.") else ".".join(name.split(".")[:2])
        out[key] = out.get(key, 0) + numel(shape)
    return out


def num_ws(resolution):
    """Generator.num_ws: 2 log2(R) - 2 (every conv, plus the last ToRGB)."""
    return 2 * (resolution.bit_length() - 1) - 2


def conv_macs(resolution, channel_base, mapping_layers):
    """Multiply-accumulates per image as cnnbench's Graph::macs counts them: the mapping's FC
    layers (in x out) and every modulated conv (ToRGB included) as out_channels x in_channels x
    kernel area per pixel of its input (the up-sampling conv on its low-resolution input); the
    affines, modulation, FIR filters and the rest not counted."""
    total = mapping_layers * W_DIM * W_DIM
    for res, cin, cout in channel_schedule(resolution, channel_base):
        k2 = CONV_KERNEL * CONV_KERNEL
        if cin:
            total += (res // 2) ** 2 * cout * cin * k2  # conv0 on its input
        total += res * res * cout * cout * k2           # conv1
        total += res * res * IMG_CHANNELS * cout        # torgb
    return total


def model_name(config, resolution):
    return f"{NETWORK}_{config}_{resolution}"


# --------------------------------------------------------------------------------------------
# The FIR and resampling arithmetic (no torch): what the torch ops below use
# --------------------------------------------------------------------------------------------
def setup_filter(taps=RESAMPLE_TAPS):
    """upfirdn2d.setup_filter(taps): a 1-D list of fewer than 8 taps becomes the 2-D outer
    product, normalised to sum 1; [[1/64, 3/64, 3/64, 1/64], [3/64, 9/64, ...], ...]."""
    total = sum(a * b for a in taps for b in taps)
    return [[a * b / total for b in taps] for a in taps]


def parse_padding(padding):
    """upfirdn2d._parse_padding: an int, [x, y] or [x0, x1, y0, y1] -> [x0, x1, y0, y1]."""
    if isinstance(padding, int):
        padding = [padding, padding]
    padding = list(padding)
    if len(padding) == 2:
        padding = [padding[0], padding[0], padding[1], padding[1]]
    if len(padding) != 4:
        raise ValueError(f"padding {padding}: one, two or four numbers")
    return padding


def upfirdn2d_out_size(size, taps, up=1, down=1, pad0=0, pad1=0):
    """One side of upfirdn2d's output: zero insertion to size * up, padding, the filter's valid
    convolution, down-sampling."""
    return (size * up + pad0 + pad1 - taps) // down + 1


def upsample2d_padding(taps, up=2, padding=0):
    """upfirdn2d.upsample2d's padding [x0, x1, y0, y1] for a square filter of `taps` per side:
    (taps + up - 1) // 2 before, (taps - up) // 2 after, on top of `padding` (2 and 1 for four
    taps and up 2: the output exactly up times the input)."""
    px0, px1, py0, py1 = parse_padding(padding)
    return [px0 + (taps + up - 1) // 2, px1 + (taps - up) // 2,
            py0 + (taps + up - 1) // 2, py1 + (taps - up) // 2]


def filter2d_padding(taps, padding=0):
    """upfirdn2d.filter2d's padding: taps // 2 before, (taps - 1) // 2 after, plus `padding`."""
    px0, px1, py0, py1 = parse_padding(padding)
    return [px0 + taps // 2, px1 + (taps - 1) // 2, py0 + taps // 2, py1 + (taps - 1) // 2]


def conv_transpose_out_size(size, kernel, stride, pad):
    return (size - 1) * stride - 2 * pad + kernel


def conv_out_size(size, kernel, pad0, pad1=None):
    return size + pad0 + (pad0 if pad1 is None else pad1) - kernel + 1


def conv2d_resample_plan(kernel, taps, up=1, padding=0):
    """conv2d_resample's paddings for a square kernel and filter, without down-sampling.

    Returns {"padding": [x0, x1, y0, y1]} (the padding after the up-sampling adjustment, what the
    generic path gives upfirdn2d's zero-inserting up-sampling before the plain conv) and, for
    up > 1, the fast path's "transpose_padding" [pyt, pxt] (conv_transpose2d's) and
    "filter_padding" [x0 + pxt, x1 + pxt, y0 + pyt, y1 + pyt] (upfirdn2d's after it, gain up^2).
    3x3, four taps, up 2, padding 1: padding [3, 2, 3, 2]; transpose [0, 0]; filter [1, 1, 1, 1]."""
    px0, px1, py0, py1 = parse_padding(padding)
    plan = {}
    if up > 1:
        px0 += (taps + up - 1) // 2
        px1 += (taps - up) // 2
        py0 += (taps + up - 1) // 2
        py1 += (taps - up) // 2
    plan["padding"] = [px0, px1, py0, py1]
    if up > 1:
        fx0, fx1 = px0 - (kernel - 1), px1 - (kernel - up)
        fy0, fy1 = py0 - (kernel - 1), py1 - (kernel - up)
        pxt = max(min(-fx0, -fx1), 0)
        pyt = max(min(-fy0, -fy1), 0)
        plan["transpose_padding"] = [pyt, pxt]
        plan["filter_padding"] = [fx0 + pxt, fx1 + pxt, fy0 + pyt, fy1 + pyt]
    return plan


def conv2d_resample_out_size(size, kernel, taps, up=1, padding=0, path="fast"):
    """One side of conv2d_resample's output along the given path (fast: transposed conv, then the
    filter; slow: zero-inserting up-sampling with the filter, then the conv); equal for both."""
    plan = conv2d_resample_plan(kernel, taps, up, padding)
    x0, x1 = plan["padding"][:2]
    if up == 1:
        return conv_out_size(size, kernel, x0, x1)
    if path == "fast":
        t = conv_transpose_out_size(size, kernel, up, plan["transpose_padding"][1])
        f0, f1 = plan["filter_padding"][:2]
        return upfirdn2d_out_size(t, taps, 1, 1, f0, f1)
    return conv_out_size(upfirdn2d_out_size(size, taps, up, 1, x0, x1), kernel, 0)


# --------------------------------------------------------------------------------------------
# torch: the model, the random case, the timing (imported inside the functions)
# --------------------------------------------------------------------------------------------
def torch_ops(torch):
    """NVlabs' ops in plain torch: {upfirdn2d, upsample2d, bias_act, conv2d_resample,
    modulated_conv2d, normalize_2nd_moment} as functions of tensors."""
    F = torch.nn.functional
    low = (torch.float16, torch.bfloat16)

    def upfirdn2d(x, f, up=1, down=1, padding=0, flip_filter=False, gain=1):
        """_upfirdn2d_ref, square factors; a symmetric non-negative padding without up-sampling
        goes to conv2d's own padding (the same zeros, one copy less)."""
        n, c, h, w = x.shape
        px0, px1, py0, py1 = parse_padding(padding)
        if up > 1:  # insert zeros
            x = x.reshape([n, c, h, 1, w, 1])
            x = F.pad(x, [0, up - 1, 0, 0, 0, up - 1])
            x = x.reshape([n, c, h * up, w * up])
        conv_pad = 0
        if up == 1 and px0 == px1 >= 0 and py0 == py1 >= 0:
            conv_pad = (py0, px0)
        else:
            x = F.pad(x, [max(px0, 0), max(px1, 0), max(py0, 0), max(py1, 0)])
            x = x[:, :, max(-py0, 0):x.shape[2] - max(-py1, 0),
                  max(-px0, 0):x.shape[3] - max(-px1, 0)]
        f = f * (gain ** (f.ndim / 2))
        f = f.to(x.dtype)
        if not flip_filter:
            f = f.flip(list(range(f.ndim)))
        f = f[None, None].repeat([c, 1] + [1] * f.ndim)
        x = F.conv2d(x, f, padding=conv_pad, groups=c)
        return x[:, :, ::down, ::down] if down > 1 else x

    def upsample2d(x, f, up=2):
        taps = f.shape[-1]
        return upfirdn2d(x, f, up=up, padding=upsample2d_padding(taps, up), gain=up * up)

    def bias_act(x, b, act="linear", gain=1.0, clamp=None):
        """_bias_act_ref: + b (channels), the activation, * gain, clamp to +-clamp."""
        x = x + b.reshape([1, -1] + [1] * (x.ndim - 2))
        if act == "lrelu":
            x = F.leaky_relu(x, LRELU_SLOPE)
        elif act != "linear":
            raise ValueError(f"activation {act!r}")
        if gain != 1:
            x = x * gain
        if clamp is not None and clamp >= 0:
            x = x.clamp(-clamp, clamp)
        return x

    def conv(x, w, stride=1, padding=0, groups=1, transpose=False, flip_weight=True):
        """_conv2d_wrapper."""
        if not flip_weight and (w.shape[2] > 1 or w.shape[3] > 1):
            w = w.flip([2, 3])
        op = F.conv_transpose2d if transpose else F.conv2d
        return op(x, w, stride=stride, padding=padding, groups=groups)

    def conv2d_resample(x, w, f=None, up=1, padding=0, groups=1, flip_weight=True, impl="fast"):
        """conv2d_resample without down-sampling: up 1 a plain conv; up > 1 NVlabs' fast path
        (impl "fast": transposed conv, then the filter) or its generic path ("slow": zero
        insertion with the filter, then the conv)."""
        out_channels, in_per_group, kh, kw = w.shape
        if kh != kw or (f is not None and f.shape[0] != f.shape[-1]):
            raise ValueError("square kernels and filters only")
        taps = f.shape[-1] if f is not None else 1
        plan = conv2d_resample_plan(kw, taps, up, padding)
        px0, px1, py0, py1 = plan["padding"]
        if up == 1:
            if not (px0 == px1 >= 0 and py0 == py1 >= 0):
                raise ValueError(f"padding {plan['padding']} without up-sampling")
            return conv(x, w, padding=[py0, px0], groups=groups, flip_weight=flip_weight)
        if impl == "fast":
            # Keep a channels_last input's layout through the transposed conv (whose transposed
            # weight can make torch choose NCHW), so the filter and the next conv stay NHWC.
            keep_cl = x.shape[1] > 1 and not x.is_contiguous() and x.is_contiguous(
                memory_format=torch.channels_last)
            if groups == 1:
                w = w.transpose(0, 1)
            else:
                w = w.reshape(groups, out_channels // groups, in_per_group, kh, kw)
                w = w.transpose(1, 2)
                w = w.reshape(groups * in_per_group, out_channels // groups, kh, kw)
            x = conv(x, w, stride=up, padding=plan["transpose_padding"], groups=groups,
                     transpose=True, flip_weight=not flip_weight)
            if keep_cl:
                x = x.contiguous(memory_format=torch.channels_last)
            return upfirdn2d(x, f, padding=plan["filter_padding"], gain=up * up)
        if impl != "slow":
            raise ValueError(f"conv2d_resample impl {impl!r}")
        x = upfirdn2d(x, f, up=up, padding=plan["padding"], gain=up * up)
        return conv(x, w, groups=groups, flip_weight=flip_weight)

    def modulated_conv2d(x, weight, styles, noise=None, up=1, padding=0, resample_filter=None,
                         demodulate=True, flip_weight=True, fused_modconv=False, impl="fast"):
        """networks.modulated_conv2d; weight and styles float32, x in the compute dtype."""
        n = x.shape[0]
        out_channels, in_channels, kh, kw = weight.shape
        if x.dtype in low and demodulate:  # NVlabs: float16 only; invariant in exact arithmetic
            weight = weight * (1 / math.sqrt(in_channels * kh * kw)
                               / weight.abs().amax(dim=[1, 2, 3], keepdim=True))
            styles = styles / styles.abs().amax(dim=1, keepdim=True)
        if not fused_modconv:
            dcoefs = None
            if demodulate:  # sum over [N, O, I, kh, kw] of (weight * styles)^2, regrouped
                dcoefs = (styles.square() @ weight.square().sum(dim=[2, 3]).t() + 1e-8).rsqrt()
            x = x * styles.to(x.dtype).reshape(n, -1, 1, 1)
            x = conv2d_resample(x, weight.to(x.dtype), resample_filter, up=up, padding=padding,
                                flip_weight=flip_weight, impl=impl)
            if demodulate and noise is not None:
                x = torch.addcmul(noise.to(x.dtype), x, dcoefs.to(x.dtype).reshape(n, -1, 1, 1))
            elif demodulate:
                x = x * dcoefs.to(x.dtype).reshape(n, -1, 1, 1)
            elif noise is not None:
                x = x.add_(noise.to(x.dtype))
            return x
        # NVlabs' fused form: per-sample weights, one grouped conv.
        w = weight.unsqueeze(0) * styles.reshape(n, 1, -1, 1, 1)
        if demodulate:
            dcoefs = (w.square().sum(dim=[2, 3, 4]) + 1e-8).rsqrt()
            w = w * dcoefs.reshape(n, -1, 1, 1, 1)
        x = x.reshape(1, -1, *x.shape[2:])
        w = w.reshape(-1, in_channels, kh, kw)
        x = conv2d_resample(x, w.to(x.dtype), resample_filter, up=up, padding=padding,
                            groups=n, flip_weight=flip_weight, impl=impl)
        x = x.reshape(n, -1, *x.shape[2:])
        if noise is not None:
            x = x.add_(noise.to(x.dtype))
        return x

    return {"upfirdn2d": upfirdn2d, "upsample2d": upsample2d, "bias_act": bias_act,
            "conv2d_resample": conv2d_resample, "modulated_conv2d": modulated_conv2d,
            "normalize_2nd_moment": common.normalize_2nd_moment}


def build_model(resolution, channel_base, mapping_layers, conv_clamp=DEFAULT_CONV_CLAMP):
    """An nn.Module laid out as NVlabs' Generator (so its state_dict is NVlabs' and cnnbench's),
    float32 parameters. forward(z) with z [N, 512] or [N, 512, 1, 1] -> the image [N, 3, R, R]
    float32. model.configure(dtype=, channels_last=, up_impl=, fused_modconv=) sets how the
    synthesis runs (default float32, contiguous, NVlabs' fast up-sampling path, not fused)."""
    torch = require_torch()
    from types import SimpleNamespace

    from torch import nn

    check_resolution(resolution)
    ops = torch_ops(torch)
    opts = SimpleNamespace(dtype=torch.float32, channels_last=False, up_impl="fast",
                           fused_modconv=False, conv_clamp=common.clamp_option(conv_clamp))
    FullyConnectedLayer, Generator = common.generator_modules(torch, opts, mapping_layers)

    def resample_filter():
        return torch.tensor(setup_filter(), dtype=torch.float32)

    class SynthesisLayer(nn.Module):
        def __init__(self, cin, cout, res, up=1):
            super().__init__()
            self.res, self.up = res, up
            self.register_buffer("resample_filter", resample_filter())
            self.affine = FullyConnectedLayer(W_DIM, cin, bias_init=1)
            self.weight = nn.Parameter(torch.randn([cout, cin, CONV_KERNEL, CONV_KERNEL]))
            self.register_buffer("noise_const", torch.randn([res, res]))
            self.noise_strength = nn.Parameter(torch.zeros([]))
            self.bias = nn.Parameter(torch.zeros([cout]))

        def forward(self, x, w):
            styles = self.affine(w)
            noise = self.noise_const * self.noise_strength  # noise_mode 'const'
            x = ops["modulated_conv2d"](
                x, self.weight, styles, noise=noise, up=self.up, padding=CONV_KERNEL // 2,
                resample_filter=self.resample_filter, flip_weight=(self.up == 1),
                fused_modconv=opts.fused_modconv, impl=opts.up_impl)
            return ops["bias_act"](x, self.bias.to(x.dtype), act="lrelu", gain=LRELU_GAIN,
                                   clamp=opts.conv_clamp)

    class ToRGBLayer(nn.Module):
        def __init__(self, cin):
            super().__init__()
            self.affine = FullyConnectedLayer(W_DIM, cin, bias_init=1)
            self.weight = nn.Parameter(torch.randn([IMG_CHANNELS, cin, 1, 1]))
            self.bias = nn.Parameter(torch.zeros([IMG_CHANNELS]))
            self.weight_gain = 1 / math.sqrt(cin)

        def forward(self, x, w):
            styles = self.affine(w) * self.weight_gain
            x = ops["modulated_conv2d"](x, self.weight, styles, demodulate=False,
                                        fused_modconv=opts.fused_modconv, impl=opts.up_impl)
            return ops["bias_act"](x, self.bias.to(x.dtype), clamp=opts.conv_clamp)

    class SynthesisBlock(nn.Module):
        def __init__(self, cin, cout, res):
            super().__init__()
            self.cin, self.res = cin, res
            self.register_buffer("resample_filter", resample_filter())
            if cin == 0:
                self.const = nn.Parameter(torch.randn([cout, res, res]))
            else:
                self.conv0 = SynthesisLayer(cin, cout, res, up=2)
            self.conv1 = SynthesisLayer(cout, cout, res)
            self.torgb = ToRGBLayer(cout)

        def forward(self, x, img, w):
            mf = torch.channels_last if opts.channels_last else torch.contiguous_format
            if self.cin == 0:
                x = self.const.to(opts.dtype).unsqueeze(0).repeat([w.shape[0], 1, 1, 1])
                x = x.contiguous(memory_format=mf)
            else:
                x = x.to(dtype=opts.dtype, memory_format=mf)
                x = self.conv0(x, w)
            x = self.conv1(x, w)
            if img is not None:
                img = ops["upsample2d"](img, self.resample_filter)
            y = self.torgb(x, w).to(dtype=torch.float32, memory_format=torch.contiguous_format)
            img = img.add_(y) if img is not None else y
            return x, img

    class SynthesisNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.resolutions = []
            for res, cin, cout in channel_schedule(resolution, channel_base):
                setattr(self, f"b{res}", SynthesisBlock(cin, cout, res))
                self.resolutions.append(res)

        def forward(self, w):
            x = img = None
            for res in self.resolutions:
                x, img = getattr(self, f"b{res}")(x, img, w)
            return img

    return Generator(SynthesisNetwork(), resolution=resolution, channel_base=channel_base,
                     mapping_layers=mapping_layers)


def check_model(model):
    """AssertionError unless the model's state_dict is state_specs' (names, shapes, order) and its
    parameter count param_count's."""
    r, cb, ml = model.resolution, model.channel_base, model.mapping_layers
    common.check_state_dict(model, param_specs(r, cb, ml, buffers=True), param_count(r, cb, ml))


def randomize(model, generator):
    """The write-case weights (see the module's doc), drawn in state_dict order."""
    randn = common.normal_draws(require_torch(), generator)

    def draw(name, last, t):
        if last == "resample_filter":
            return None  # setup_filter([1, 3, 3, 1]), fixed
        if name.startswith("mapping.fc"):
            return randn(t.shape) / MAPPING_LR if last == "weight" else randn(t.shape, 0.1)
        if ".affine." in name:
            return randn(t.shape) if last == "weight" else randn(t.shape, 0.1, 1.0)
        if last in ("weight", "noise_const", "const", "w_avg"):
            return randn(t.shape)
        if last in ("bias", "noise_strength"):
            return randn(t.shape, 0.1)
        raise AssertionError(f"no random draw for {name}")

    common.fill_state(model, draw)


def network_of(args):
    """(channel_base, mapping_layers, resolution) of the arguments: --config's, --resolution or
    the config's; ValueError for an unknown config or a resolution that is not a power of two."""
    channel_base, mapping_layers = config_of(args.config)
    resolution = args.resolution or CONFIGS[args.config]["resolution"]
    check_resolution(resolution)
    return channel_base, mapping_layers, resolution


def write_case(args):
    """The write-case subcommand: weights, input and the fp32 reference image. Returns the exit
    status."""
    def check():
        network = network_of(args)
        common.check_batch(args.batch)
        return network

    torch, save_file, network, device = common.start_write_case(check)
    channel_base, mapping_layers, resolution = network
    torch.manual_seed(args.seed)  # the construction's own draws, all overwritten below
    model = build_model(resolution, channel_base, mapping_layers, args.conv_clamp)
    check_model(model)
    gen = torch.Generator().manual_seed(args.seed)
    randomize(model, gen)
    z = torch.randn(args.batch, Z_DIM, generator=gen)
    model = model.to(device).eval()
    with torch.no_grad():
        img = model(z.to(device)).float()
        checks = []
        if not args.skip_crosscheck:
            for what, kw in (("slow up-sampling path", {"up_impl": "slow"}),
                             ("fused modconv (grouped conv)", {"fused_modconv": True})):
                other = model.configure(**kw)(z.to(device)).float()
                model.configure(up_impl="fast", fused_modconv=False)
                checks.append((what, common.rel_l2(other, img)))
    img = img.contiguous().cpu()

    name = model_name(args.config, resolution)
    meta = {"network": name, "config": args.config, "resolution": str(resolution),
            "channel_base": str(channel_base), "mapping_layers": str(mapping_layers),
            "conv_clamp": str(model.opts.conv_clamp), "noise_mode": "const",
            "truncation_psi": "1", "seed": str(args.seed), "batch": str(args.batch),
            "torch": torch.__version__, "device": str(device),
            "tool": "tools/stylegan_reference.py write-case"}
    common.save_case(save_file, args.dir, model, z.reshape(args.batch, Z_DIM, 1, 1).contiguous(),
                     {OUTPUT_NAME: img}, meta)

    print(f"{name}: {param_count(resolution, channel_base, mapping_layers):,} parameters, "
          f"conv_clamp {model.opts.conv_clamp}, seed {args.seed}, batch {args.batch}, fp32 "
          f"(TF32 off) on {device}; files in {args.dir}")
    status = 0
    if not common.report_rms(OUTPUT_NAME, img, RMS_BOUNDS):
        status = 1
        common.rms_error("the image", RMS_BOUNDS)
    for what, err in checks:
        good = math.isfinite(err) and err <= CROSSCHECK_TOLERANCE
        print(f"  cross-check, {what}: rel_l2 {err:.3e}{'' if good else '  <- differs'}")
        if not good:
            status = 1
            print(f"error: the {what} differs from the main path by {err:.3e} (more than "
                  f"{CROSSCHECK_TOLERANCE:g})", file=sys.stderr)
    return status


def compare(args):
    """The compare subcommand (torch_reference_common.compare_image). Returns the exit status."""
    return common.compare_image(args, OUTPUT_NAME)


def bench(args):
    """The bench subcommand: PyTorch's generation, timed as pytorch_baseline.py times the
    torchvision models (torch_reference_common.Bench)."""
    b = common.Bench(args, lambda: network_of(args))
    torch, device = b.torch, b.device
    channel_base, mapping_layers, resolution = b.checked
    name = model_name(args.config, resolution)

    torch.manual_seed(0)
    model = build_model(resolution, channel_base, mapping_layers, args.conv_clamp)
    randomize(model, torch.Generator().manual_seed(0))  # speed does not depend on the values
    model = model.eval().to(device=device, memory_format=torch.channels_last)
    model.configure(dtype=b.dtype, channels_last=True)
    params = param_count(resolution, channel_base, mapping_layers)
    doc = b.document(
        {"resolution": resolution, "conv_clamp": model.opts.conv_clamp, "fused_modconv": False,
         "up_sampling": "conv_transpose2d + upfirdn2d (NVlabs' fast path)",
         "parameters_dtype": "float32 (cast per use, as NVlabs)"},
        {"model": name, "config": args.config, "channel_base": channel_base,
         "mapping_layers": mapping_layers, "parameters": params,
         "gmacs_per_image": conv_macs(resolution, channel_base, mapping_layers) / 1e9})
    # z: the mapping runs in fp32 (NVlabs).
    return b.run(model, doc, f"{name}, {params:,} parameters", name, name, resolution,
                 lambda batch: torch.randn(batch, Z_DIM, device=device), resolution=resolution)


# --------------------------------------------------------------------------------------------
# The torch-free subcommands and main
# --------------------------------------------------------------------------------------------
def summary(args):
    channel_base, mapping_layers, resolution = network_of(args)
    total = param_count(resolution, channel_base, mapping_layers)
    blocks = block_param_counts(resolution, channel_base, mapping_layers)
    specs = state_specs(resolution, channel_base, mapping_layers)
    print(f"{model_name(args.config, resolution)}: channel_base {channel_base}, {mapping_layers} "
          f"mapping layers, {total:,} parameters (mapping {blocks['mapping']:,}, synthesis "
          f"{total - blocks['mapping']:,}), {sum(not t for _, _, t in specs)} buffers, "
          f"num_ws {num_ws(resolution)}, "
          f"{conv_macs(resolution, channel_base, mapping_layers) / 1e9:.3f} conv GMACs per image")
    for res, cin, cout in channel_schedule(resolution, channel_base):
        first = "const" if cin == 0 else f"{cin} ->"
        print(f"  synthesis.b{res}: {first} {cout} channels at {res}x{res}, "
              f"{blocks[f'synthesis.b{res}']:,} parameters")
    expected = EXPECTED_PARAMETERS.get((resolution, channel_base, mapping_layers))
    if expected is not None and expected != total:
        print(f"error: {total:,} parameters, networks.md 9.1 has {expected:,}", file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="StyleGAN2's generator in PyTorch: reference cases, "
                                             "their comparison and a speed baseline.")
    sub = ap.add_subparsers(dest="command", required=True)

    def network(p, config):
        p.add_argument("--config", default=config, choices=sorted(CONFIGS))
        p.add_argument("--resolution", type=int, default=None, help="default: the config's")

    def conv_clamp(p):
        common.add_conv_clamp(p, DEFAULT_CONV_CLAMP, "bias_act's clamp after the gain")

    p = sub.add_parser("summary", help="parameters, channels, GMACs (no torch)")
    network(p, "f")
    p = sub.add_parser("write-case", help="random weights, a z and the fp32 image")
    p.add_argument("--dir", required=True)
    network(p, "paper256")
    common.add_case_args(p, "do not compute the image the two other ways")
    conv_clamp(p)
    common.add_compare_parser(sub, "cnnbench's image against a reference",
                              "cnnbench's output0 or logits (float32 NCHW)", DEFAULT_TOLERANCE)
    p = sub.add_parser("bench", help="PyTorch's generation speed (needs a CUDA GPU)")
    network(p, "f")
    common.add_bench_args(p, "1,8,16,32,64")
    common.add_timing_args(p)
    conv_clamp(p)
    args = ap.parse_args(argv)

    return common.run_command({"summary": summary, "write-case": write_case, "compare": compare,
                               "bench": bench}[args.command], args)


if __name__ == "__main__":
    sys.exit(main())
