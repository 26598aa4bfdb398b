#!/usr/bin/env python3
"""StyleGAN3's generator (T, and R) in PyTorch, from plain torch ops: reference cases and a peer.

cnnbench builds StyleGAN3's generator natively (networks/stylegan.cpp, stylegan3_generator).
This tool describes the same network independently, following NVlabs stylegan3
(training/networks_stylegan3.py and torch_utils/ops: filtered_lrelu's and upfirdn2d's reference
paths, bias_act), written from networks.md 9.2 and the semantics below (not copied), as a torch
module whose state_dict is NVlabs' Generator's (the names and shapes of cnnbench's graph:
mapping.fc{i}.weight, synthesis.input.freqs, synthesis.L{i}_{size}_{ch}.up_filter, ...), with
z_dim = w_dim = 512, c_dim 0, no truncation (psi 1). It
  - writes a correctness case: random weights, a random z and the image [N, 3, R, R], in fp32 with
    TF32 off, as safetensors files cnnbench_infer can read;
  - compares cnnbench's image with such a reference;
  - times PyTorch's own generation (the peer baseline), the way tools/pytorch_baseline.py times
    the torchvision models (its timing code, imported).

The layer list's bookkeeping (the schedule of cutoffs, stopbands, sampling rates, sizes and
channels; every layer's up/down factors, taps and padding; the state_dict's names and shapes; the
parameter count) and the low-pass filter design (scipy.signal.firwin with a Kaiser window, and the
radial jinc filter of -R, in plain Python: kaiser_atten, kaiser_beta, the Kaiser window through a
series for I0, the sinc, J1 through its integral) need no torch, numpy or scipy:
tests/test_stylegan3_reference.py runs them on CPU. torch (and safetensors for write-case) are
imported only inside the subcommands that need them; scipy, where importable, is only a check.

Configurations (train.py, networks.md 9.2): t (stylegan3-t): channel_base 32768, channel_max 512,
conv kernel 3; r (stylegan3-r): channel_base 65536, channel_max 1024, kernel 1, radial
down-sampling filters in the layers that are not critically sampled. Mapping depth 2 for both.

Subcommands:
  summary    --config t|r --resolution R [--channel-base CB --channel-max CM] [--mapping-layers 2]
             parameters, the layer schedule (L{i}_{size}_{ch}), each layer's sampling rates,
             cutoffs, up/down factors, taps and padding (no torch); exit 1 if a known total
             (networks.md 9.2) is not reproduced.
  write-case --dir DIR --config t --resolution R --batch N --seed K [--channel-base CB
             --channel-max CM] [--mapping-layers 2] [--conv-clamp 256]
             DIR/weights.safetensors  every parameter and buffer of the state_dict, float32
                                      (magnitude_ema as 0-d tensors, shape []; the filters as
                                      designed here);
             DIR/input.safetensors    "input" float32 [N, 512, 1, 1]: z;
             DIR/reference.safetensors  "output0" float32 [N, 3, R, R], computed in fp32 (TF32
                                      off).
             Checks this tool: its filter design against scipy's (where scipy imports), its
             upfirdn2d (both torch formulations) against banded matrices in float64 on small
             tensors, and (unless --skip-crosscheck) the image computed four other ways (the
             modulated conv unfused; the filters as transposed/strided convs; as blocked GEMMs;
             as banded matrices with the Fourier grid written out) and in float64. Prints the
             image's RMS and how many elements hit the clamp; exit 1 if the RMS is not finite or
             outside [1e-4, 1e4], or a check differs by more than its tolerance (the files are
             written all the same).
  compare    --reference DIR/reference.safetensors --ours OURS.safetensors [--tolerance 1e-3]
             relative L2 and max |ours - ref| of the image ("output0", or cnnbench_infer's
             "logits", flat or NCHW), as tools/stylegan_reference.py's compare (the same code,
             tools/torch_reference_common.py's). Exit 1 over the tolerance, 2 where a tensor is
             missing or misshapen. Stdlib only.
  bench      --config t --resolution 1024 --batches 1,8,16,32 --precision fp16 --out FILE.json
             [--modes eager,graph] [--reps 5] [--filter-impl gemm|fast|ref]
             [--modconv unfused|fused] [--memory-format channels_last|contiguous]
             rows as pytorch_baseline.py's (model "stylegan3_t_1024"); out-of-memory rows
             recorded as errors. The mapping and the Fourier input run in fp32, every synthesis
             layer in the chosen precision (NVlabs runs only the highest-rate layers in fp16),
             cudnn.benchmark; the parameters stay float32, cast per use. NVlabs' own speed
             comes from its compiled filtered_lrelu CUDA kernel, which this tool has not: its
             filters run as blocked GEMMs by default (depthwise convs, "fast" and "ref", were
             measured several times slower on an H200: 27-45 ms for L10's alone at batch 1).

NVlabs' arithmetic, as reproduced here:
  - Mapping: z normalised (x * rsqrt(mean(x^2 over channels) + 1e-8)); FC layers with lr_multiplier
    0.01: lrelu(x @ (W * 0.01 / sqrt(in)).T + b * 0.01, 0.2) * sqrt(2). w goes to all 16 ws.
  - Schedule: 14 layers + ToRGB; cutoffs f_c[i] = 2 (R/4)^min(i/12, 1), stopbands 2^2.1 (R/2
    2^0.3 / 2^2.1)^min(i/12, 1); sampling_rate = 2^ceil(log2(min(2 stopband, R))); half_width =
    max(stopband, sampling_rate / 2) - cutoff; size = sampling_rate + 20 (the last two: R);
    channels = rint(min(channel_base / 2 / cutoff, channel_max)), the last 3.
  - SynthesisInput (ws[0]): t = affine(w) (W / sqrt(512), b), t /= |t[:2]|; transforms = m_r @
    m_t @ transform (m_r = [[t0, -t1, 0], [t1, t0, 0], [0, 0, 1]], m_t = [[1, 0, -t2], [0, 1,
    -t3], [0, 0, 1]]); phases += freqs @ transforms[:2, 2]; freqs = freqs @ transforms[:2, :2];
    amplitudes = clamp(1 - (|freqs| - bandwidth) / (fs / 2 - bandwidth), 0, 1); the grid is
    affine_grid(diag(0.5 size / fs), align_corners=False); x = sin(2 pi (grid . freqs + phases))
    * amplitudes, then x @ (weight / sqrt(C)).T, NCHW.
  - SynthesisLayer L_i (ws[i + 1]): styles = affine(w) (W / sqrt(512), bias init 1); ToRGB:
    styles / sqrt(C_in k^2). Modulated conv (NVlabs' fused form: one grouped conv, groups = N),
    padding k - 1: with demodulation (all but ToRGB) w *= rsqrt(mean(w^2 over in, kh, kw)), s *=
    rsqrt(mean(s^2)) over the whole [N, C_in] tensor (a scale the demodulation cancels), then
    per-sample w' = w s, w' *= rsqrt(sum(w'^2 over in, kh, kw) + 1e-8); then w' *=
    rsqrt(magnitude_ema) (input_gain, a scalar). Then filtered_lrelu's reference path: + bias;
    upfirdn2d(up_filter, up, padding [lo, hi, lo, hi], gain up^2); lrelu(0.2) * sqrt(2) (ToRGB:
    slope 1, gain 1) and clamp to +-conv_clamp; upfirdn2d(down_filter, down). The output * 0.25.
  - tmp rate = max(in_fs, out_fs) * (1 for ToRGB, else 2); up = tmp / in_fs, down = tmp / out_fs;
    taps = 6 * factor where the factor exceeds 1 (not in ToRGB), else no filter (the buffer is
    absent from the state_dict); up_filter = firwin(up_taps, in_cutoff, 2 in_half_width, tmp),
    down_filter likewise with the out values (radial for R where not critically sampled); pad_total
    = (out_size - 1) down + 1 - (in_size + k - 1) up + up_taps + down_taps - 2, lo = (pad_total +
    up) // 2, hi = pad_total - lo.
  - upfirdn2d is _upfirdn2d_ref's: zero insertion, padding (negative: cropping), the filter as a
    true convolution (flipped, flip_filter False) scaled by gain^(ndim / 2), a 1-D filter applied
    along x then y, stride down-sampling.

Random weights (write-case), drawn on the CPU from --seed in state_dict order; chosen so that
every part of the computation matters (NVlabs' init would make several of them identities):
mapping W ~ N(0, 1) / 0.01 and b ~ N(0, 0.1) / 0.01 (NVlabs stores bias_init / lr_multiplier, so
the effective bias is N(0, 0.1)); w_avg ~ N(0, 1) (unused); input.weight ~ N(0, 1); input.transform
a random similarity: rotation U(-0.3, 0.3) rad, scale U(1.2, 1.5) (so about half the
frequencies leave the band and the amplitudes' damping matters; a pure rotation keeps every
amplitude at 1), translation U(-0.2, 0.2); freqs and phases as NVlabs draws them (freqs = randn,
/ (r exp(r^2 / 4)), * bandwidth; phases = U(-0.5, 0.5)); input.affine W ~ N(0, 1) * 0.1 (NVlabs:
0) and b = [1, 0, 0, 0] + N(0, 0.1), so rotation and translation differ per image; layer weights
~ N(0, 1), biases ~ N(0, 0.1), affine W ~ N(0, 1), affine b ~ 1 + N(0, 0.1), magnitude_ema ~
U(0.5, 2). Then z ~ N(0, 1).

Usage: python3 tools/stylegan3_reference.py summary --config t --resolution 1024
       python3 tools/stylegan3_reference.py write-case --dir /tmp/sg3 --resolution 16 \\
           --channel-base 1024 --channel-max 64 --batch 2 --seed 1
       python3 tools/stylegan3_reference.py compare --reference /tmp/sg3/reference.safetensors \\
           --ours /tmp/sg3/ours.safetensors
       python3 tools/stylegan3_reference.py bench --resolution 1024 --out results/pytorch_sg3.json
"""
import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The safetensors reading, the comparison, the command line's and the bench's plumbing and the
# mapping network are shared with the other reference tools (stylegan's, yolor's).
import torch_reference_common as common  # noqa: E402
from torch_reference_common import (LRELU_GAIN, LRELU_SLOPE, MAPPING_LR, W_DIM,  # noqa: E402
                                    Z_DIM, numel, require_torch)

NETWORK = "stylegan3"
IMG_CHANNELS = 3
DEFAULT_MAPPING_LAYERS = 2  # train.py's map depth for stylegan3-t and -r
DEFAULT_CONV_CLAMP = 256   # SynthesisLayer's conv_clamp (train.py's too)
NUM_LAYERS = 14            # SynthesisNetwork's defaults
NUM_CRITICAL = 2
FIRST_CUTOFF = 2.0
FIRST_STOPBAND = 2 ** 2.1
LAST_STOPBAND_REL = 2 ** 0.3
MARGIN_SIZE = 10
OUTPUT_SCALE = 0.25
FILTER_SIZE = 6            # SynthesisLayer's filter_size (taps per unit of the factor)
LRELU_UPSAMPLING = 2
MIN_RESOLUTION = 16        # cnnbench's stylegan3_generator accepts powers of two from 16
OUTPUT_NAME = "output0"
DEFAULT_TOLERANCE = 1e-3
RMS_BOUNDS = (1e-4, 1e4)     # the image's RMS outside these: the random case is degenerate
CROSSCHECK_TOLERANCE = 1e-4  # the other formulations (and fp64) against the main one, fp32
UPFIRDN_TOLERANCE = 1e-12    # the upfirdn2d formulations against each other, float64
DESIGN_TOLERANCE = 1e-12     # this tool's filter design against scipy's (max |difference|)
# write-case makes the clamp matter in one layer (calibrate_clamp): L7's input gain set so that
# its pre-activation RMS is about this (a few % of the elements beyond +-256), L8's ema scaled by
# its square so that the signal is O(1) again after it.
CLAMP_LAYER = NUM_LAYERS // 2
CLAMP_TARGET_RMS = 120.0

CONFIGS = {
    "t": {"channel_base": 32768, "channel_max": 512, "conv_kernel": 3, "radial": False},
    "r": {"channel_base": 65536, "channel_max": 1024, "conv_kernel": 1, "radial": True},
}
# networks.md 9.2's totals ([DEV] with NVlabs' Generator, map depth 2, c_dim 0):
# (config, resolution, channel_base, channel_max, mapping_layers) -> parameters.
EXPECTED_PARAMETERS = {
    ("t", 256, 32768, 512, 2): 28_472_133,
    ("t", 512, 32768, 512, 2): 24_873_519,
    ("t", 1024, 32768, 512, 2): 22_313_167,
    ("r", 256, 65536, 1024, 2): 18_816_387,
    ("r", 512, 65536, 1024, 2): 16_665_594,
    ("r", 1024, 65536, 1024, 2): 15_093_151,
}


# --------------------------------------------------------------------------------------------
# The network as a layer list (no torch)
# --------------------------------------------------------------------------------------------
def check_resolution(resolution):
    """ValueError unless the resolution is a power of two from 16."""
    if resolution < MIN_RESOLUTION or resolution & (resolution - 1):
        raise ValueError(f"the resolution must be a power of two from {MIN_RESOLUTION}, not "
                         f"{resolution}")


def config_of(config, channel_base=None, channel_max=None):
    """{channel_base, channel_max, conv_kernel, radial} of a named configuration, the channel
    numbers overridable; ValueError for an unknown one."""
    if config not in CONFIGS:
        raise ValueError(f"unknown config {config!r}; valid: {', '.join(sorted(CONFIGS))}")
    c = dict(CONFIGS[config])
    if channel_base is not None:
        c["channel_base"] = channel_base
    if channel_max is not None:
        c["channel_max"] = channel_max
    if c["channel_base"] < 1 or c["channel_max"] < 1:
        raise ValueError("--channel-base and --channel-max must be positive")
    return c


def schedule(resolution, channel_base, channel_max):
    """SynthesisNetwork's per-layer numbers, i = 0..14 (14: ToRGB): [{cutoff, stopband,
    sampling_rate, half_width, size, channels}] (floats but size and channels)."""
    check_resolution(resolution)
    last_cutoff = resolution / 2
    last_stopband = last_cutoff * LAST_STOPBAND_REL
    out = []
    for i in range(NUM_LAYERS + 1):
        e = min(i / (NUM_LAYERS - NUM_CRITICAL), 1.0)
        cutoff = FIRST_CUTOFF * (last_cutoff / FIRST_CUTOFF) ** e
        stopband = FIRST_STOPBAND * (last_stopband / FIRST_STOPBAND) ** e
        rate = 2.0 ** math.ceil(math.log2(min(stopband * 2, resolution)))
        half_width = max(stopband, rate / 2) - cutoff
        size = resolution if i >= NUM_LAYERS - 1 else int(rate) + 2 * MARGIN_SIZE
        # np.rint: to the nearest, halves to even, as Python's round.
        ch = IMG_CHANNELS if i == NUM_LAYERS else int(round(min(channel_base / 2 / cutoff,
                                                                channel_max)))
        out.append({"cutoff": cutoff, "stopband": stopband, "sampling_rate": rate,
                    "half_width": half_width, "size": size, "channels": ch})
    return out


def upfirdn_out_size(size, taps=1, up=1, down=1, pad0=0, pad1=0):
    """One side of upfirdn2d's output: zero insertion to size * up, padding, the filter's valid
    convolution, down-sampling."""
    return (size * up + pad0 + pad1 - taps) // down + 1


def layer_specs(resolution, config="t", channel_base=None, channel_max=None):
    """SynthesisLayer's numbers for L0..L14: [{name, index, torgb, critical, in/out_channels,
    in/out_size, in/out_rate, in/out_cutoff, in/out_half_width, kernel, tmp_rate, up, down,
    up_taps, down_taps, radial, pad_lo, pad_hi, conv_size, tmp_size}]. AssertionError if a layer's
    geometry does not land on its size (as NVlabs asserts)."""
    c = config_of(config, channel_base, channel_max)
    s = schedule(resolution, c["channel_base"], c["channel_max"])
    specs = []
    for i in range(NUM_LAYERS + 1):
        a, b = s[max(i - 1, 0)], s[i]
        torgb = i == NUM_LAYERS
        critical = i >= NUM_LAYERS - NUM_CRITICAL
        k = 1 if torgb else c["conv_kernel"]
        in_rate, out_rate = int(a["sampling_rate"]), int(b["sampling_rate"])
        tmp = max(in_rate, out_rate) * (1 if torgb else LRELU_UPSAMPLING)
        up, down = int(round(tmp / in_rate)), int(round(tmp / out_rate))
        if in_rate * up != tmp or out_rate * down != tmp:
            raise AssertionError(f"L{i}: the rates {in_rate}, {out_rate} do not divide {tmp}")
        up_taps = FILTER_SIZE * up if up > 1 and not torgb else 1
        down_taps = FILTER_SIZE * down if down > 1 and not torgb else 1
        pad_total = ((b["size"] - 1) * down + 1 - (a["size"] + k - 1) * up
                     + up_taps + down_taps - 2)
        pad_lo = (pad_total + up) // 2  # the symmetric interpretation (paper, Appendix C.3)
        pad_hi = pad_total - pad_lo
        conv_size = a["size"] + k - 1  # padding k - 1
        tmp_size = upfirdn_out_size(conv_size, up_taps, up, 1, pad_lo, pad_hi)
        out_size = upfirdn_out_size(tmp_size, down_taps, 1, down)
        if out_size != b["size"]:
            raise AssertionError(f"L{i}: the filters give {out_size}, not {b['size']}")
        specs.append({
            "name": f"L{i}_{b['size']}_{b['channels']}", "index": i, "torgb": torgb,
            "critical": critical, "in_channels": a["channels"], "out_channels": b["channels"],
            "in_size": a["size"], "out_size": b["size"], "in_rate": in_rate,
            "out_rate": out_rate, "in_cutoff": a["cutoff"], "out_cutoff": b["cutoff"],
            "in_half_width": a["half_width"], "out_half_width": b["half_width"], "kernel": k,
            "tmp_rate": tmp, "up": up, "down": down, "up_taps": up_taps, "down_taps": down_taps,
            "radial": c["radial"] and not critical, "pad_lo": pad_lo, "pad_hi": pad_hi,
            "conv_size": conv_size, "tmp_size": tmp_size})
    return specs


def input_spec(resolution, config="t", channel_base=None, channel_max=None):
    """SynthesisInput's numbers: {channels, size, sampling_rate, bandwidth}."""
    c = config_of(config, channel_base, channel_max)
    s0 = schedule(resolution, c["channel_base"], c["channel_max"])[0]
    return {"channels": s0["channels"], "size": s0["size"], "sampling_rate": s0["sampling_rate"],
            "bandwidth": s0["cutoff"]}


def state_specs(resolution, config="t", channel_base=None, channel_max=None,
                mapping_layers=DEFAULT_MAPPING_LAYERS):
    """[(name, shape, trainable)] of NVlabs Generator's state_dict, in its order (synthesis, then
    mapping; each module's parameters, then its buffers, then its children's)."""
    specs = []

    def fc(prefix, in_features, out_features):
        specs.append((f"{prefix}.weight", [out_features, in_features], True))
        specs.append((f"{prefix}.bias", [out_features], True))

    inp = input_spec(resolution, config, channel_base, channel_max)
    c0 = inp["channels"]
    specs.append(("synthesis.input.weight", [c0, c0], True))
    specs.append(("synthesis.input.transform", [3, 3], False))
    specs.append(("synthesis.input.freqs", [c0, 2], False))
    specs.append(("synthesis.input.phases", [c0], False))
    fc("synthesis.input.affine", W_DIM, 4)
    for L in layer_specs(resolution, config, channel_base, channel_max):
        p, k = f"synthesis.{L['name']}", L["kernel"]
        specs.append((f"{p}.weight", [L["out_channels"], L["in_channels"], k, k], True))
        specs.append((f"{p}.bias", [L["out_channels"]], True))
        specs.append((f"{p}.magnitude_ema", [], False))
        if L["up_taps"] > 1:
            specs.append((f"{p}.up_filter", [L["up_taps"]], False))
        if L["down_taps"] > 1:
            specs.append((f"{p}.down_filter",
                          [L["down_taps"]] * (2 if L["radial"] else 1), False))
        fc(f"{p}.affine", W_DIM, L["in_channels"])
    specs.append(("mapping.w_avg", [W_DIM], False))
    for i in range(mapping_layers):
        fc(f"mapping.fc{i}", Z_DIM if i == 0 else W_DIM, W_DIM)
    return specs


def param_functions(state_specs):
    """param_specs, param_count and module_param_counts of a tool's state_specs (this one's, or
    stylegan_xl_reference's)."""
    def param_specs(*args, buffers=False, **kw):
        """[(state_dict name, shape)] of every parameter (with buffers: every entry), in order."""
        return [(n, s) for n, s, t in state_specs(*args, **kw) if t or buffers]

    def param_count(*args, **kw):
        """Trainable parameters, as NVlabs counts them (buffers not)."""
        return sum(numel(s) for _, s in param_specs(*args, **kw))

    def module_param_counts(*args, **kw):
        """{"mapping": n, "synthesis.input": n, "synthesis.L0_36_512": n, ...}."""
        out = {}
        for name, shape in param_specs(*args, **kw):
            key = "mapping" if name.startswith("mapping.") else ".".join(name.split(".")[:2])
            out[key] = out.get(key, 0) + numel(shape)
        return out

    return param_specs, param_count, module_param_counts


param_specs, param_count, module_param_counts = param_functions(state_specs)


def conv_macs(resolution, config="t", channel_base=None, channel_max=None,
              mapping_layers=DEFAULT_MAPPING_LAYERS):
    """Multiply-accumulates per image of this tool's own count: the mapping's FC layers, the
    input's channel mixing (size^2 C0^2) and every modulated conv at its output size
    (out x in x k^2 per pixel, the output in_size + k - 1); affines, modulation and the FIR
    filters not counted."""
    inp = input_spec(resolution, config, channel_base, channel_max)
    total = mapping_layers * W_DIM * W_DIM + inp["size"] ** 2 * inp["channels"] ** 2
    for L in layer_specs(resolution, config, channel_base, channel_max):
        total += (L["conv_size"] ** 2 * L["out_channels"] * L["in_channels"]
                  * L["kernel"] ** 2)
    return total


def num_ws():
    """SynthesisNetwork.num_ws: the input's, then one per layer."""
    return NUM_LAYERS + 2


def model_name(config, resolution):
    return f"{NETWORK}_{config}_{resolution}"


# --------------------------------------------------------------------------------------------
# The low-pass filter design (plain Python): NVlabs' SynthesisLayer.design_lowpass_filter
# --------------------------------------------------------------------------------------------
def kaiser_atten(numtaps, width):
    """scipy.signal.kaiser_atten: the attenuation in dB of a Kaiser FIR of `numtaps` taps and a
    transition width `width` (a fraction of Nyquist)."""
    return 2.285 * (numtaps - 1) * math.pi * width + 7.95


def kaiser_beta(a):
    """scipy.signal.kaiser_beta: the Kaiser window's beta for an attenuation of `a` dB."""
    if a > 50:
        return 0.1102 * (a - 8.7)
    if a > 21:
        return 0.5842 * (a - 21) ** 0.4 + 0.07886 * (a - 21)
    return 0.0


def bessel_i0(x):
    """The modified Bessel function I0 by its power series sum ((x/2)^k / k!)^2 (all terms
    positive: accurate to rounding for the betas here)."""
    q = (x / 2) ** 2
    term = total = 1.0
    k = 0
    while term > 1e-17 * total:
        k += 1
        term *= q / (k * k)
        total += term
    return total


def bessel_j1(x, points=256):
    """The Bessel function J1 = (1/pi) integral over [0, pi] of cos(t - x sin t), by the
    trapezoidal rule (the integrand is even and 2 pi periodic: the error falls like J_{2n}(x),
    far below rounding for |x| < 100 with 256 points)."""
    if abs(x) >= 100:
        raise ValueError(f"bessel_j1({x}): outside the range this quadrature is sized for")
    h = math.pi / points
    s = 0.5 * (math.cos(0.0) + math.cos(math.pi))
    for j in range(1, points):
        t = j * h
        s += math.cos(t - x * math.sin(t))
    return s * h / math.pi


def kaiser_window(numtaps, beta):
    """numpy.kaiser (scipy's symmetric Kaiser window): I0(beta sqrt(1 - ((n - a) / a)^2)) /
    I0(beta), a = (numtaps - 1) / 2."""
    if numtaps == 1:
        return [1.0]
    a = (numtaps - 1) / 2
    d = bessel_i0(beta)
    return [bessel_i0(beta * math.sqrt(max(0.0, 1 - ((n - a) / a) ** 2))) / d
            for n in range(numtaps)]


def sinc(x):
    """numpy.sinc: sin(pi x) / (pi x), 1 at 0."""
    return 1.0 if x == 0 else math.sin(math.pi * x) / (math.pi * x)


def firwin_kaiser(numtaps, cutoff, width, fs):
    """scipy.signal.firwin(numtaps, cutoff, width=width, fs=fs): a low-pass of one band, the
    Kaiser window from kaiser_beta(kaiser_atten(numtaps, width / nyq)), scaled to unit gain at DC
    (its scale=True for a band from 0)."""
    nyq = fs / 2
    c = cutoff / nyq
    beta = kaiser_beta(kaiser_atten(numtaps, width / nyq))
    alpha = (numtaps - 1) / 2
    win = kaiser_window(numtaps, beta)
    h = [c * sinc(c * (n - alpha)) * win[n] for n in range(numtaps)]
    s = sum(h)
    return [v / s for v in h]


def design_lowpass_filter(numtaps, cutoff, width, fs, radial=False):
    """design_lowpass_filter: None for one tap (no filter); else the separable Kaiser low-pass (a
    list of numtaps floats) or, radial, the jinc under the outer product of Kaiser windows
    (numtaps lists of numtaps floats), normalised to sum 1."""
    if numtaps < 1:
        raise ValueError("numtaps must be at least 1")
    if numtaps == 1:
        return None
    if not radial:
        return firwin_kaiser(numtaps, cutoff, width, fs)
    x = [(n - (numtaps - 1) / 2) / fs for n in range(numtaps)]
    win = kaiser_window(numtaps, kaiser_beta(kaiser_atten(numtaps, width / (fs / 2))))
    f = []
    for i in range(numtaps):
        row = []
        for j in range(numtaps):
            r = math.hypot(x[j], x[i])
            v = cutoff if r == 0 else bessel_j1(2 * cutoff * math.pi * r) / (math.pi * r)
            row.append(v * win[i] * win[j])
        f.append(row)
    s = sum(map(sum, f))
    return [[v / s for v in row] for row in f]


def layer_filters(L):
    """(up_filter, down_filter) of a layer_specs entry, as design_lowpass_filter gives them."""
    up = design_lowpass_filter(L["up_taps"], L["in_cutoff"], L["in_half_width"] * 2,
                               L["tmp_rate"])
    down = design_lowpass_filter(L["down_taps"], L["out_cutoff"], L["out_half_width"] * 2,
                                 L["tmp_rate"], radial=L["radial"])
    return up, down


def scipy_filter(numtaps, cutoff, width, fs, radial=False):
    """NVlabs' design with scipy and numpy, as a nested list (None for one tap); ImportError
    where scipy is missing."""
    import numpy as np
    import scipy.signal
    import scipy.special
    if numtaps == 1:
        return None
    if not radial:
        return scipy.signal.firwin(numtaps=numtaps, cutoff=cutoff, width=width, fs=fs).tolist()
    x = (np.arange(numtaps) - (numtaps - 1) / 2) / fs
    r = np.hypot(*np.meshgrid(x, x))
    f = scipy.special.j1(2 * cutoff * (np.pi * r)) / (np.pi * r)
    beta = scipy.signal.kaiser_beta(scipy.signal.kaiser_atten(numtaps, width / (fs / 2)))
    w = np.kaiser(numtaps, beta)
    f *= np.outer(w, w)
    f /= np.sum(f)
    return f.tolist()


def filter_design_difference(specs):
    """max |this tool's design - scipy's| over the filters of the layer list; ImportError where
    scipy is missing."""
    worst = 0.0
    for L in specs:
        ours = layer_filters(L)
        theirs = (scipy_filter(L["up_taps"], L["in_cutoff"], L["in_half_width"] * 2,
                               L["tmp_rate"]),
                  scipy_filter(L["down_taps"], L["out_cutoff"], L["out_half_width"] * 2,
                               L["tmp_rate"], L["radial"]))
        for a, b in zip(ours, theirs):
            if (a is None) != (b is None):
                raise AssertionError(f"{L['name']}: a filter on one side only")
            if a is None:
                continue
            fa = [v for row in a for v in row] if isinstance(a[0], list) else a
            fb = [v for row in b for v in row] if isinstance(b[0], list) else b
            if len(fa) != len(fb):
                raise AssertionError(f"{L['name']}: {len(fa)} taps against scipy's {len(fb)}")
            worst = max(worst, max(abs(u - v) for u, v in zip(fa, fb)))
    return worst


# --------------------------------------------------------------------------------------------
# torch: the ops, the model, the random case, the timing (imported inside the functions)
# --------------------------------------------------------------------------------------------
# near_kinks (torch_reference_common): how close an lrelu's input comes to its kink.
KINK_MARGIN = common.KINK_MARGIN
near_kinks = common.near_kinks


def torch_ops(torch):
    """The ops in plain torch: {upfirdn2d: {ref, fast, matrix}, filtered_lrelu,
    modulated_conv2d, normalize_2nd_moment}."""
    F = torch.nn.functional

    def prepare_filter(f, gain, flip_filter, dtype):
        """The filter as the correlation kernel conv2d applies: scaled by gain^(ndim / 2),
        flipped unless flip_filter (upfirdn2d convolves)."""
        f = (f * (gain ** (f.ndim / 2))).to(dtype)
        return f if flip_filter else f.flip(list(range(f.ndim)))

    def depthwise(x, k, op, stride=1):
        """A per-channel correlation (or transposed conv) with a 1-D kernel along x then y, or a
        2-D kernel at once."""
        c = x.shape[1]
        if k.ndim == 2:
            return op(x, k[None, None].repeat(c, 1, 1, 1), stride=stride, groups=c)
        x = op(x, k.reshape(1, 1, 1, -1).repeat(c, 1, 1, 1), stride=(1, stride), groups=c)
        return op(x, k.reshape(1, 1, -1, 1).repeat(c, 1, 1, 1), stride=(stride, 1), groups=c)

    def pad_or_crop(x, px0, px1, py0, py1):
        """F.pad for the positive sides, slicing for the negative ones."""
        x = F.pad(x, [max(px0, 0), max(px1, 0), max(py0, 0), max(py1, 0)])
        return x[:, :, max(-py0, 0):x.shape[2] - max(-py1, 0),
                 max(-px0, 0):x.shape[3] - max(-px1, 0)]

    def upfirdn2d_ref(x, f, up=1, down=1, padding=(0, 0, 0, 0), gain=1, flip_filter=False):
        """_upfirdn2d_ref: zero insertion, padding (negative: cropping), the filter's valid
        correlation (flipped: a convolution), stride down-sampling. f None: no filter."""
        n, c, h, w = x.shape
        if up > 1:
            x = x.reshape(n, c, h, 1, w, 1)
            x = F.pad(x, [0, up - 1, 0, 0, 0, up - 1])
            x = x.reshape(n, c, h * up, w * up)
        x = pad_or_crop(x, *padding)
        if f is not None:
            x = depthwise(x, prepare_filter(f, gain, flip_filter, x.dtype), F.conv2d)
        elif gain != 1:
            x = x * gain
        return x[:, :, ::down, ::down] if down > 1 else x

    def upfirdn2d_fast(x, f, up=1, down=1, padding=(0, 0, 0, 0), gain=1, flip_filter=False):
        """The same by polyphase ops: up > 1, a transposed conv of stride `up` with the filter
        (the convolution of the zero-inserted signal), then the window the padding selects;
        else the padding, then a strided correlation."""
        px0, px1, py0, py1 = padding
        if f is None:
            x = pad_or_crop(x if up == 1 else upfirdn2d_ref(x, None, up), *padding)
            x = x * gain if gain != 1 else x
            return x[:, :, ::down, ::down] if down > 1 else x
        k = prepare_filter(f, gain, flip_filter, x.dtype)
        if up == 1:
            return depthwise(pad_or_crop(x, *padding), k, F.conv2d, stride=down)
        taps = f.shape[-1]
        h, w = x.shape[2], x.shape[3]
        # The transposed conv computes T[m] = sum_j x[j] g[m - j up] (g the true-convolution
        # kernel, k flipped back), m in [0, (h - 1) up + taps); upfirdn2d's output i is
        # T[i + taps - 1 - pad0], for h up + pad0 + pad1 - taps + 1 outputs.
        t = depthwise(x, k.flip(list(range(k.ndim))), F.conv_transpose2d, stride=up)
        sx, sy = taps - 1 - px0, taps - 1 - py0
        lx = w * up + px0 + px1 - taps + 1
        ly = h * up + py0 + py1 - taps + 1
        t = pad_or_crop(t, -sx, sx + lx - t.shape[3], -sy, sy + ly - t.shape[2])
        return t[:, :, ::down, ::down] if down > 1 else t

    def band_matrix(size, f1, up, down, pad0, pad1, dtype, device):
        """One axis of upfirdn2d as a matrix A [out, size]: y = A x, A[o, j] = f[K - 1 + o down
        - pad0 - j up] (zero outside the filter)."""
        taps = f1.shape[0]
        out = upfirdn_out_size(size, taps, up, down, pad0, pad1)
        o = torch.arange(out, device=device).reshape(-1, 1)
        j = torch.arange(size, device=device).reshape(1, -1)
        idx = taps - 1 + o * down - pad0 - j * up
        ok = (idx >= 0) & (idx < taps)
        return torch.where(ok, f1.to(dtype)[idx.clamp(0, taps - 1)],
                           torch.zeros((), dtype=dtype, device=device))

    def upfirdn2d_matrix(x, f, up=1, down=1, padding=(0, 0, 0, 0), gain=1, flip_filter=False):
        """upfirdn2d written as its definition, y[o] = gain sum_j x[j] f[K - 1 + o down - pad0 -
        j up] per axis, with banded matrices (y = A_y x A_x^T); a 2-D filter split into
        separable terms by its SVD. Independent of conv2d, padding and slicing."""
        px0, px1, py0, py1 = padding
        dt, dev = x.dtype, x.device
        if f is None:
            f = torch.ones([1], dtype=dt, device=dev)
        f = f.to(torch.float64)
        if flip_filter:
            f = f.flip(list(range(f.ndim)))
        h, w = x.shape[2], x.shape[3]
        if f.ndim == 1:
            terms = [(f * gain ** 0.5, f * gain ** 0.5)]
        else:
            u, s, vh = torch.linalg.svd(f * gain)
            # f[a, b] = sum_r s_r u[a, r] vh[r, b]: a runs along y, b along x.
            terms = [(u[:, r] * s[r].sqrt(), vh[r] * s[r].sqrt()) for r in range(s.shape[0])]
        y = 0
        for fy, fx in terms:
            ay = band_matrix(h, fy, up, down, py0, py1, dt, dev)
            ax = band_matrix(w, fx, up, down, px0, px1, dt, dev)
            y = y + ay @ x @ ax.t()
        return y

    gemm_cache = {}

    def block_plan(size, f, gain, flip_filter, up, down, pad0, pad1, dtype, device, block):
        """One axis of upfirdn2d (1-D filter f, scaled by sqrt(gain)) in blocks of `block`
        outputs: output block b is window_b @ M, window_b the input's [c + b S, c + b S + Wn)
        (S = block down / up; zeros outside the input), M [Wn, block] a block of the band matrix,
        the same for every block. Returns (M, c, S, Wn, outputs); M cached per filter buffer and
        geometry (made on the device: no host copy, capturable)."""
        taps = f.shape[0]
        out = upfirdn_out_size(size, taps, up, down, pad0, pad1)
        c = -(pad0 // up)  # ceil(-pad0 / up): the first input sample output 0 reaches
        wn = ((block - 1) * down - pad0 + taps - 1) // up - c + 1
        # Keyed by the filter tensor's identity, which the entry keeps alive (so the id is not
        # reused); the model's filters are fixed buffers.
        key = (id(f), float(gain), bool(flip_filter), up, down, pad0, block, dtype, str(device))
        if key not in gemm_cache:
            f1 = f.to(torch.float64) * (gain ** 0.5)
            if flip_filter:
                f1 = f1.flip(0)
            o = torch.arange(block, device=device).reshape(1, -1)
            j = torch.arange(wn, device=device).reshape(-1, 1) + c
            idx = taps - 1 + o * down - pad0 - j * up
            ok = (idx >= 0) & (idx < taps)
            gemm_cache[key] = (f, torch.where(ok, f1[idx.clamp(0, taps - 1)],
                                              torch.zeros((), dtype=f1.dtype, device=device)
                                              ).to(dtype))
        return gemm_cache[key][1], c, block * down // up, wn, out

    def upfirdn2d_gemm(x, f, up=1, down=1, padding=(0, 0, 0, 0), gain=1, flip_filter=False,
                       block=64):
        """upfirdn2d with a 1-D filter as two blocked GEMMs (x, then y): each axis's output,
        `block` samples at a time, is an overlapping window of the input (unfold, a view) times a
        fixed [Wn, block] block of the band matrix: tensor-core GEMMs instead of depthwise
        convs. No filter or a 2-D one: upfirdn2d_fast."""
        if f is None or f.ndim != 1 or (block * down) % up:
            return upfirdn2d_fast(x, f, up, down, padding, gain, flip_filter)
        px0, px1, py0, py1 = padding
        x = x.contiguous()
        # Along x (the last axis): windows [..., nb, Wn] @ M -> [..., nb, block].
        m, c, step, wn, out = block_plan(x.shape[3], f, gain, flip_filter, up, down, px0, px1,
                                         x.dtype, x.device, block)
        total = (-(-out // block) - 1) * step + wn
        xp = pad_or_crop(x, -c, total - x.shape[3] + c, 0, 0)
        x = (xp.unfold(3, wn, step) @ m).flatten(3)[..., :out]
        # Along y: M^T [block, Wn] @ windows [..., nb, Wn, W] -> [..., nb, block, W].
        m, c, step, wn, out = block_plan(x.shape[2], f, gain, flip_filter, up, down, py0, py1,
                                         x.dtype, x.device, block)
        total = (-(-out // block) - 1) * step + wn
        xp = pad_or_crop(x, 0, 0, -c, total - x.shape[2] + c)
        return (m.t() @ xp.unfold(2, wn, step).transpose(3, 4)).flatten(2, 3)[:, :, :out]

    upfirdn2d = {"ref": upfirdn2d_ref, "fast": upfirdn2d_fast, "matrix": upfirdn2d_matrix,
                 "gemm": upfirdn2d_gemm}

    def filtered_lrelu(x, fu, fd, b, up, down, padding, gain, slope, clamp, impl="ref",
                       stats=None, kinks=None):
        """_filtered_lrelu_ref: + bias, up-sampling with fu (gain up^2), lrelu * gain, clamp,
        down-sampling with fd. stats: a list that gets (elements beyond the clamp, elements);
        kinks: a list that gets near_kinks of the lrelu's input."""
        resample = upfirdn2d[impl]
        x = x + b.to(x.dtype).reshape(1, -1, 1, 1)
        x = resample(x, fu, up=up, padding=padding, gain=up ** 2)
        if slope != 1:
            if kinks is not None:
                kinks.append(near_kinks(x))
            x = F.leaky_relu(x, slope)
        if gain != 1:
            x = x * gain
        if clamp is not None and clamp >= 0:
            if stats is not None:
                stats.append(((x.abs() > clamp).sum().item(), x.numel()))
            x = x.clamp(-clamp, clamp)
        return resample(x, fd, down=down)

    def modulated_conv2d(x, weight, styles, demodulate=True, padding=0, input_gain=None,
                         fused=True):
        """networks_stylegan3.modulated_conv2d. fused (NVlabs' form): per-sample weights, one
        grouped conv; else x scaled by the styles and the input gain, the shared conv, the
        output scaled by the demodulation coefficients (the same in exact arithmetic)."""
        n = x.shape[0]
        out_channels, in_channels, kh, kw = weight.shape
        if demodulate:  # pre-normalisation; styles over the whole [N, C_in] tensor
            weight = weight * weight.square().mean(dim=[1, 2, 3], keepdim=True).rsqrt()
            styles = styles * styles.square().mean().rsqrt()
        gain = None if input_gain is None else input_gain.expand(n, in_channels)
        if fused:
            w = weight.unsqueeze(0) * styles.reshape(n, 1, -1, 1, 1)
            if demodulate:
                dcoefs = (w.square().sum(dim=[2, 3, 4]) + 1e-8).rsqrt()
                w = w * dcoefs.reshape(n, -1, 1, 1, 1)
            if gain is not None:
                w = w * gain.reshape(n, 1, -1, 1, 1)
            x = x.reshape(1, -1, *x.shape[2:])
            w = w.reshape(-1, in_channels, kh, kw)
            x = F.conv2d(x, w.to(x.dtype), padding=padding, groups=n)
            return x.reshape(n, -1, *x.shape[2:])
        s = styles if gain is None else styles * gain
        x = x * s.to(x.dtype).reshape(n, -1, 1, 1)
        x = F.conv2d(x, weight.to(x.dtype), padding=padding)
        if demodulate:  # sum over [N, O, I, kh, kw] of (weight * styles)^2, regrouped
            dcoefs = (styles.square() @ weight.square().sum(dim=[2, 3]).t() + 1e-8).rsqrt()
            x = x * dcoefs.to(x.dtype).reshape(n, -1, 1, 1)
        return x

    return {"upfirdn2d": upfirdn2d, "filtered_lrelu": filtered_lrelu,
            "modulated_conv2d": modulated_conv2d,
            "normalize_2nd_moment": common.normalize_2nd_moment}


def build_model(resolution, config="t", channel_base=None, channel_max=None,
                mapping_layers=DEFAULT_MAPPING_LAYERS, conv_clamp=DEFAULT_CONV_CLAMP):
    """An nn.Module laid out as NVlabs' Generator (its state_dict is NVlabs' and cnnbench's),
    float32 parameters, the filters designed by design_lowpass_filter. forward(z) with z [N, 512]
    or [N, 512, 1, 1] -> the image [N, 3, R, R] float32. model.configure(...) sets how it runs:
    dtype (the synthesis layers'), float_dtype (the mapping's, the input's and the styles'),
    channels_last, filter_impl ("ref", "fast", "matrix"), fused_modconv, grid ("affine_grid" or
    "explicit"), clamp_stats (None or a list that gets (name, hits, elements) per layer),
    kink_stats (None or a list that gets (name,) + near_kinks per layer with an lrelu)."""
    torch = require_torch()
    from types import SimpleNamespace

    from torch import nn

    F = torch.nn.functional
    ops = torch_ops(torch)
    specs = layer_specs(resolution, config, channel_base, channel_max)
    inp = input_spec(resolution, config, channel_base, channel_max)
    opts = SimpleNamespace(dtype=torch.float32, float_dtype=torch.float32, channels_last=False,
                           filter_impl="ref", fused_modconv=True, grid="affine_grid",
                           clamp_stats=None, kink_stats=None,
                           conv_clamp=common.clamp_option(conv_clamp))
    FullyConnectedLayer, Generator = common.generator_modules(torch, opts, mapping_layers)

    class SynthesisInput(nn.Module):
        def __init__(self):
            super().__init__()
            c = inp["channels"]
            self.channels, self.size = c, inp["size"]
            self.sampling_rate, self.bandwidth = inp["sampling_rate"], inp["bandwidth"]
            freqs = torch.randn([c, 2])
            radii = freqs.square().sum(dim=1, keepdim=True).sqrt()
            freqs = freqs / (radii * radii.square().exp().pow(0.25)) * self.bandwidth
            self.weight = nn.Parameter(torch.randn([c, c]))
            self.affine = FullyConnectedLayer(W_DIM, 4, bias_init=[1.0, 0.0, 0.0, 0.0])
            with torch.no_grad():
                self.affine.weight.zero_()  # NVlabs' weight_init 0
            self.register_buffer("transform", torch.eye(3, 3))
            self.register_buffer("freqs", freqs)
            self.register_buffer("phases", torch.rand([c]) - 0.5)

        def grid(self, dtype, device):
            """[1, size, size, 2] (x, y) sample positions: affine_grid's with align_corners
            False, or the same written out ((2 j + 1) / size - 1) * 0.5 size / rate."""
            scale = 0.5 * self.size / self.sampling_rate
            if opts.grid == "affine_grid":
                # Made on the device (no host copy: capturable in a CUDA graph).
                theta = torch.eye(2, 3, dtype=dtype, device=device) * scale
                return F.affine_grid(theta.unsqueeze(0), [1, 1, self.size, self.size],
                                     align_corners=False)
            c = ((2 * torch.arange(self.size, dtype=dtype, device=device) + 1) / self.size
                 - 1) * scale
            gx = c.reshape(1, -1).expand(self.size, self.size)
            gy = c.reshape(-1, 1).expand(self.size, self.size)
            return torch.stack([gx, gy], dim=2).unsqueeze(0)

        def forward(self, w):
            n, dt = w.shape[0], w.dtype
            freqs = self.freqs.to(dt).unsqueeze(0)
            phases = self.phases.to(dt).unsqueeze(0)
            t = self.affine(w)  # (r_c, r_s, t_x, t_y)
            t = t / t[:, :2].norm(dim=1, keepdim=True)
            one, zero = torch.ones_like(t[:, 0]), torch.zeros_like(t[:, 0])
            m_r = torch.stack([t[:, 0], -t[:, 1], zero, t[:, 1], t[:, 0], zero,
                               zero, zero, one], dim=1).reshape(n, 3, 3)
            m_t = torch.stack([one, zero, -t[:, 2], zero, one, -t[:, 3],
                               zero, zero, one], dim=1).reshape(n, 3, 3)
            transforms = m_r @ m_t @ self.transform.to(dt).unsqueeze(0)
            phases = phases + (freqs @ transforms[:, :2, 2:]).squeeze(2)
            freqs = freqs @ transforms[:, :2, :2]
            amplitudes = (1 - (freqs.norm(dim=2) - self.bandwidth)
                          / (self.sampling_rate / 2 - self.bandwidth)).clamp(0, 1)
            grids = self.grid(dt, w.device)
            if opts.grid == "affine_grid":  # NVlabs' product: [1, H, W, 1, 2] @ [N, 1, 1, 2, C]
                x = (grids.unsqueeze(3) @ freqs.permute(0, 2, 1).unsqueeze(1).unsqueeze(2))
                x = x.squeeze(3)
            else:
                x = (grids[..., 0:1] * freqs[:, None, None, :, 0]
                     + grids[..., 1:2] * freqs[:, None, None, :, 1])
            x = x + phases.unsqueeze(1).unsqueeze(2)
            x = torch.sin(x * (math.pi * 2)) * amplitudes.unsqueeze(1).unsqueeze(2)
            x = x @ (self.weight.to(dt) / math.sqrt(self.channels)).t()
            return x.permute(0, 3, 1, 2)  # NCHW (channels_last in memory)

        def diagnostics(self, w):
            """Per image: rotation angle (degrees), translation, fraction of damped amplitudes."""
            with torch.no_grad():
                t = self.affine(w)
                t = t / t[:, :2].norm(dim=1, keepdim=True)
                angle = torch.atan2(t[:, 1], t[:, 0]) * (180 / math.pi)
                f = self.freqs.to(w.dtype).unsqueeze(0) @ (
                    self.transform.to(w.dtype)[:2, :2]).unsqueeze(0)
                amp = (1 - (f.norm(dim=2) - self.bandwidth)
                       / (self.sampling_rate / 2 - self.bandwidth)).clamp(0, 1)
            return angle, t[:, 2:], amp

    class SynthesisLayer(nn.Module):
        def __init__(self, L):
            super().__init__()
            self.spec = L
            k, cin, cout = L["kernel"], L["in_channels"], L["out_channels"]
            self.affine = FullyConnectedLayer(W_DIM, cin, bias_init=1)
            self.weight = nn.Parameter(torch.randn([cout, cin, k, k]))
            self.bias = nn.Parameter(torch.zeros([cout]))
            self.register_buffer("magnitude_ema", torch.ones([]))
            fu, fd = layer_filters(L)
            self.register_buffer("up_filter", None if fu is None else
                                 torch.tensor(fu, dtype=torch.float32))
            self.register_buffer("down_filter", None if fd is None else
                                 torch.tensor(fd, dtype=torch.float32))
            self.padding = [L["pad_lo"], L["pad_hi"], L["pad_lo"], L["pad_hi"]]

        def forward(self, x, w):
            L = self.spec
            mf = torch.channels_last if opts.channels_last else torch.contiguous_format
            x = x.to(dtype=opts.dtype, memory_format=mf)
            input_gain = self.magnitude_ema.to(w.dtype).rsqrt()
            styles = self.affine(w)
            if L["torgb"]:
                styles = styles * (1 / math.sqrt(L["in_channels"] * L["kernel"] ** 2))
            x = ops["modulated_conv2d"](x, self.weight.to(w.dtype), styles,
                                        demodulate=not L["torgb"], padding=L["kernel"] - 1,
                                        input_gain=input_gain, fused=opts.fused_modconv)
            stats = None if opts.clamp_stats is None else []
            kinks = None if opts.kink_stats is None else []
            x = ops["filtered_lrelu"](
                x, self.up_filter, self.down_filter, self.bias, L["up"], L["down"],
                self.padding, gain=1 if L["torgb"] else LRELU_GAIN,
                slope=1 if L["torgb"] else LRELU_SLOPE, clamp=opts.conv_clamp,
                impl=opts.filter_impl, stats=stats, kinks=kinks)
            if stats:
                opts.clamp_stats.append((L["name"],) + stats[0])
            if kinks:
                opts.kink_stats.append((L["name"],) + kinks[0])
            return x

    class SynthesisNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.input = SynthesisInput()
            self.layer_names = []
            for L in specs:
                setattr(self, L["name"], SynthesisLayer(L))
                self.layer_names.append(L["name"])

        def forward(self, w):
            x = self.input(w)  # ws[0]
            for name in self.layer_names:  # ws[1:], all equal
                x = getattr(self, name)(x, w)
            return (x * OUTPUT_SCALE).to(dtype=torch.float32,
                                         memory_format=torch.contiguous_format)

    return Generator(SynthesisNetwork(), resolution=resolution, config=config,
                     channel_base=channel_base, channel_max=channel_max,
                     mapping_layers=mapping_layers)


def model_args(model):
    return (model.resolution, model.config, model.channel_base, model.channel_max,
            model.mapping_layers)


def check_model(model):
    """AssertionError unless the model's state_dict is state_specs' (names, shapes, order) and its
    parameter count param_count's."""
    r, cfg, cb, cm, ml = model_args(model)
    common.check_state_dict(model, param_specs(r, cfg, cb, cm, mapping_layers=ml, buffers=True),
                            param_count(r, cfg, cb, cm, mapping_layers=ml))


def randomize(model, generator):
    """The write-case weights (see the module's doc), drawn in state_dict order."""
    torch = require_torch()
    randn = common.normal_draws(torch, generator)

    def uniform(shape, lo, hi):
        return torch.rand(shape, generator=generator) * (hi - lo) + lo

    bandwidth = model.synthesis.input.bandwidth

    def draw(name, last, t):
        if last in ("up_filter", "down_filter"):
            return None  # designed, fixed
        if name.startswith("mapping.fc"):
            v = randn(t.shape) if last == "weight" else randn(t.shape, 0.1)
            return v / MAPPING_LR
        if name == "synthesis.input.transform":
            a, s = uniform([], -0.3, 0.3).item(), uniform([], 1.2, 1.5).item()
            tx, ty = uniform([2], -0.2, 0.2).tolist()
            return torch.tensor([[s * math.cos(a), -s * math.sin(a), tx],
                                 [s * math.sin(a), s * math.cos(a), ty], [0.0, 0.0, 1.0]])
        if name == "synthesis.input.freqs":
            f = randn(t.shape)
            radii = f.square().sum(dim=1, keepdim=True).sqrt()
            return f / (radii * radii.square().exp().pow(0.25)) * bandwidth
        if name == "synthesis.input.phases":
            return uniform(t.shape, -0.5, 0.5)
        if name == "synthesis.input.affine.weight":
            return randn(t.shape, 0.1)
        if name == "synthesis.input.affine.bias":
            return randn(t.shape, 0.1) + torch.tensor([1.0, 0.0, 0.0, 0.0])
        if ".affine." in name:
            return randn(t.shape) if last == "weight" else randn(t.shape, 0.1, 1.0)
        if last == "magnitude_ema":
            return uniform(t.shape, 0.5, 2.0)
        if last in ("weight", "w_avg"):
            return randn(t.shape)
        if last == "bias":
            return randn(t.shape, 0.1)
        raise AssertionError(f"no random draw for {name}")

    common.fill_state(model, draw)


class _Calibrated(Exception):
    pass


def calibrate_clamp(model, z, index=CLAMP_LAYER):
    """Makes conv_clamp matter (with magnitude_ema ~ U(0.5, 2) everywhere no element comes near
    256): measures the RMS of layer `index`'s input on z (a forward stopped there), sets that
    layer's magnitude_ema to (rms / CLAMP_TARGET_RMS)^2, so its input gain makes the conv's output
    RMS about CLAMP_TARGET_RMS, and multiplies the next layer's by CLAMP_TARGET_RMS^2. Returns
    (layer name, the input RMS, its new magnitude_ema)."""
    torch = require_torch()
    names = model.synthesis.layer_names
    layer = getattr(model.synthesis, names[index])
    after = getattr(model.synthesis, names[index + 1])
    seen = {}

    def hook(module, inputs):
        seen["rms"] = inputs[0].double().square().mean().sqrt().item()
        raise _Calibrated()

    handle = layer.register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            model(z)
    except _Calibrated:
        pass
    finally:
        handle.remove()
    with torch.no_grad():
        layer.magnitude_ema.fill_((seen["rms"] / CLAMP_TARGET_RMS) ** 2)
        after.magnitude_ema.mul_(CLAMP_TARGET_RMS ** 2)
    return names[index], seen["rms"], layer.magnitude_ema.item()


def upfirdn2d_crosscheck(torch, device):
    """The largest relative difference among the three upfirdn2d formulations, in float64 on
    small random tensors, over the kinds of calls the network makes (up 2 and 4 with positive and
    negative paddings, down 2 and 4 with 1-D and radial filters, no filter) and a few more
    (uneven paddings, flip_filter, a gain): [(what, worst relative difference)]."""
    ops = torch_ops(torch)
    g = torch.Generator().manual_seed(1234)
    out = []
    cases = [  # (what, taps, radial, up, down, padding, gain, flip)
        ("up 2, 12 taps, pad [9, 8]", 12, False, 2, 1, (9, 8, 9, 8), 4, False),
        ("up 4, 24 taps, pad [-3, 12] x / [5, -2] y", 24, False, 4, 1, (-3, 12, 5, -2), 16,
         False),
        ("down 2, 12 taps", 12, False, 1, 2, (0, 0, 0, 0), 1, False),
        ("down 4, 24 taps, flipped", 24, False, 1, 4, (0, 0, 0, 0), 1, True),
        ("down 2, radial 12 x 12", 12, True, 1, 2, (0, 0, 0, 0), 1, False),
        ("radial 12 x 12 up 2 down 2, pad [7, 3, 2, 6], gain 3", 12, True, 2, 2,
         (7, 3, 2, 6), 3, False),
        ("no filter, pad [2, -1, 0, 3], down 2", 0, False, 1, 2, (2, -1, 0, 3), 1, False),
    ]
    for what, taps, radial, up, down, padding, gain, flip in cases:
        x = torch.randn([2, 3, 29, 31], generator=g, dtype=torch.float64).to(device)
        if taps == 0:
            f = None
        else:
            f = torch.rand([taps, taps] if radial else [taps], generator=g,
                           dtype=torch.float64).to(device)
        kw = {"up": up, "down": down, "padding": padding, "gain": gain, "flip_filter": flip}
        ref = ops["upfirdn2d"]["ref"](x, f, **kw)
        worst = 0.0
        for impl in ("fast", "matrix", "gemm"):
            other = ops["upfirdn2d"][impl](x, f, **kw)
            if other.shape != ref.shape:
                worst = math.inf
                break
            worst = max(worst, common.rel_l2(other, ref))
        out.append((what, worst))
    return out


def network_of(args):
    """config_of's {channel_base, channel_max, conv_kernel, radial} of the arguments; ValueError
    for an unknown config, a channel number below 1 or a resolution that is not a power of two
    from 16."""
    cfg = config_of(args.config, args.channel_base, args.channel_max)
    check_resolution(args.resolution)
    return cfg


def write_case(args):
    """The write-case subcommand: weights, input and the fp32 reference image. Returns the exit
    status."""
    def check():
        cfg = network_of(args)
        common.check_batch(args.batch)
        if args.mapping_layers < 1:
            raise ValueError("--mapping-layers must be at least 1")
        return cfg

    torch, save_file, cfg, device = common.start_write_case(check)
    resolution = args.resolution
    t_start = time.perf_counter()
    status = 0
    specs = layer_specs(resolution, args.config, args.channel_base, args.channel_max)

    # The filter design against scipy's, and upfirdn2d's formulations against each other.
    try:
        design = filter_design_difference(specs)
    except ImportError:
        design = None
    upfirdn = upfirdn2d_crosscheck(torch, device)

    torch.manual_seed(args.seed)  # the construction's own draws, all overwritten below
    model = build_model(resolution, args.config, args.channel_base, args.channel_max,
                        args.mapping_layers, args.conv_clamp)
    check_model(model)
    gen = torch.Generator().manual_seed(args.seed)
    randomize(model, gen)
    z = torch.randn(args.batch, Z_DIM, generator=gen)
    model = model.to(device).eval()
    calibrated = calibrate_clamp(model, z.to(device)) if model.opts.conv_clamp else None
    stats = []
    checks = []
    with torch.no_grad():
        model.configure(clamp_stats=stats)
        img = model(z.to(device)).float()
        model.configure(clamp_stats=None)
        t_main = time.perf_counter()
        w = model.mapping(z.to(device))
        angle, shift, amp = model.synthesis.input.diagnostics(w)
        if not args.skip_crosscheck:
            for what, kw in (
                    ("modulated conv unfused (x * s, conv, * d)", {"fused_modconv": False}),
                    ("filters as transposed/strided convs", {"filter_impl": "fast"}),
                    ("filters as blocked GEMMs", {"filter_impl": "gemm"}),
                    ("filters as banded matrices, grid written out",
                     {"filter_impl": "matrix", "grid": "explicit"})):
                other = model.configure(**kw)(z.to(device)).float()
                model.configure(fused_modconv=True, filter_impl="ref", grid="affine_grid")
                checks.append((what, common.rel_l2(other, img)))
            m64 = build_model(resolution, args.config, args.channel_base, args.channel_max,
                              args.mapping_layers, args.conv_clamp)
            m64.load_state_dict(model.state_dict())
            m64 = m64.to(device).double().configure(dtype=torch.float64,
                                                     float_dtype=torch.float64)
            checks.append(("float64", common.rel_l2(img, m64(z.to(device).double()))))
            del m64
    img = img.contiguous().cpu()
    t_end = time.perf_counter()

    name = model_name(args.config, resolution)
    params = param_count(resolution, args.config, args.channel_base, args.channel_max,
                         mapping_layers=args.mapping_layers)
    meta = {"network": name, "config": args.config, "resolution": str(resolution),
            "channel_base": str(cfg["channel_base"]), "channel_max": str(cfg["channel_max"]),
            "mapping_layers": str(args.mapping_layers),
            "conv_clamp": str(model.opts.conv_clamp), "truncation_psi": "1",
            "seed": str(args.seed), "batch": str(args.batch), "torch": torch.__version__,
            "device": str(device), "tool": "tools/stylegan3_reference.py write-case"}
    common.save_case(save_file, args.dir, model, z.reshape(args.batch, Z_DIM, 1, 1).contiguous(),
                     {OUTPUT_NAME: img}, meta)

    print(f"{name} (channel_base {cfg['channel_base']}, channel_max {cfg['channel_max']}, "
          f"{args.mapping_layers} mapping layers): {params:,} parameters, conv_clamp "
          f"{model.opts.conv_clamp}, seed {args.seed}, batch {args.batch}, fp32 (TF32 off) on "
          f"{device}; files in {args.dir}")
    if not common.report_rms(OUTPUT_NAME, img, RMS_BOUNDS):
        status = 1
        common.rms_error("the image", RMS_BOUNDS)
    if args.batch > 1:
        print(f"  images differ: rel_l2(image 1, image 0) {common.rel_l2(img[1], img[0]):.3g}")
    print(f"  input: rotation {', '.join(f'{a:.2f}' for a in angle.tolist())} deg, translation "
          f"{', '.join(f'({x:.3f}, {y:.3f})' for x, y in shift.tolist())}; "
          f"{(amp < 1).float().mean().item() * 100:.0f}% of the amplitudes damped (min "
          f"{amp.min().item():.3f})")
    hits = sum(h for _, h, _ in stats)
    total = sum(n for _, _, n in stats)
    worst = max(stats, key=lambda s: s[1] / s[2]) if stats else None
    print(f"  clamp +-{model.opts.conv_clamp}: {hits:,} of {total:,} pre-clamp elements beyond "
          f"it ({hits / max(total, 1):.3%})" + (f"; most in {worst[0]} ({worst[1]:,} of "
                                                 f"{worst[2]:,})" if worst and hits else ""))
    if calibrated:
        print(f"  (calibrate_clamp: {calibrated[0]}'s input RMS {calibrated[1]:.3g}, its "
              f"magnitude_ema set to {calibrated[2]:.3g}, the next layer's x "
              f"{CLAMP_TARGET_RMS ** 2:g})")
    if total and hits == total:
        status = 1
        print("error: every element hits the clamp", file=sys.stderr)

    def verdict(what, err, tol):
        nonlocal status
        good = math.isfinite(err) and err <= tol
        if not good:
            status = 1
            print(f"error: {what} differs by {err:.3e} (more than {tol:g})", file=sys.stderr)
        return "" if good else "  <- differs"

    if design is None:
        print("  filter design: scipy not importable, not checked against it")
    else:
        print(f"  filter design against scipy.signal.firwin (and the radial jinc): max |diff| "
              f"{design:.2e}{verdict('the filter design', design, DESIGN_TOLERANCE)}")
    for what, err in upfirdn:
        print(f"  upfirdn2d, {what}: fast, matrix and gemm against ref, float64: rel_l2 "
              f"{err:.2e}{verdict(f'upfirdn2d ({what})', err, UPFIRDN_TOLERANCE)}")
    for what, err in checks:
        print(f"  cross-check, {what}: rel_l2 {err:.3e}"
              f"{verdict(f'the image ({what})', err, CROSSCHECK_TOLERANCE)}")
    print(f"  time: {t_main - t_start:.1f} s to the image, {t_end - t_start:.1f} s with the "
          f"cross-checks")
    return status


def compare(args):
    """The compare subcommand (torch_reference_common.compare_image, as stylegan_reference.py's
    compare). Returns the exit status."""
    return common.compare_image(args, OUTPUT_NAME)


def bench(args):
    """The bench subcommand: PyTorch's generation, timed as pytorch_baseline.py times the
    torchvision models (torch_reference_common.Bench)."""
    b = common.Bench(args, lambda: network_of(args))
    torch, device, cfg = b.torch, b.device, b.checked
    resolution = args.resolution
    name = model_name(args.config, resolution)

    torch.manual_seed(0)
    model = build_model(resolution, args.config, args.channel_base, args.channel_max,
                        args.mapping_layers, args.conv_clamp)
    randomize(model, torch.Generator().manual_seed(0))  # speed does not depend on the values
    model = model.eval().to(device=device)
    model.configure(dtype=b.dtype, channels_last=args.memory_format == "channels_last",
                    filter_impl=args.filter_impl,
                    fused_modconv=args.modconv == "fused")
    params = param_count(resolution, args.config, args.channel_base, args.channel_max,
                         mapping_layers=args.mapping_layers)
    doc = b.document(
        {"resolution": resolution, "conv_clamp": model.opts.conv_clamp,
         "modulated_conv": args.modconv,
         "filtered_lrelu": {
             "ref": "NVlabs' reference path (zero insertion, depthwise conv)",
             "fast": "depthwise transposed conv up, strided conv down",
             "gemm": "blocked GEMMs per axis (1-D filters)"}[args.filter_impl],
         "synthesis_dtype": "every layer (NVlabs: the highest-rate layers)",
         "mapping_and_input_dtype": "float32",
         "parameters_dtype": "float32 (cast per use, as NVlabs)"},
        {"model": name, "config": args.config,
         "channel_base": cfg["channel_base"], "channel_max": cfg["channel_max"],
         "mapping_layers": args.mapping_layers, "parameters": params,
         "gmacs_per_image": conv_macs(resolution, args.config, args.channel_base,
                                      args.channel_max, args.mapping_layers) / 1e9},
        memory_format=args.memory_format)
    return b.run(model, doc, f"{name}, {params:,} parameters", name, name, resolution,
                 lambda batch: torch.randn(batch, Z_DIM, device=device), resolution=resolution)


# --------------------------------------------------------------------------------------------
# The torch-free subcommands and main
# --------------------------------------------------------------------------------------------
def summary(args):
    cfg = network_of(args)
    resolution = args.resolution
    a = (resolution, args.config, args.channel_base, args.channel_max)
    ml = args.mapping_layers
    total = param_count(*a, mapping_layers=ml)
    mods = module_param_counts(*a, mapping_layers=ml)
    specs = state_specs(*a, mapping_layers=ml)
    inp = input_spec(*a)
    print(f"{model_name(args.config, resolution)}: channel_base {cfg['channel_base']}, "
          f"channel_max {cfg['channel_max']}, conv kernel {cfg['conv_kernel']}, {ml} mapping "
          f"layers, {total:,} parameters (mapping {mods['mapping']:,}, synthesis "
          f"{total - mods['mapping']:,}), {sum(not t for _, _, t in specs)} buffers, num_ws "
          f"{num_ws()}, {conv_macs(*a, ml) / 1e9:.3f} conv GMACs per image")
    print(f"  input: {inp['channels']} channels at {inp['size']}x{inp['size']}, fs "
          f"{inp['sampling_rate']:g}, bandwidth {inp['bandwidth']:g}, "
          f"{mods['synthesis.input']:,} parameters")
    for L in layer_specs(*a):
        p = [L["pad_lo"], L["pad_hi"]]
        print(f"  {L['name']}: {L['in_channels']} -> {L['out_channels']}, {L['in_size']} -> "
              f"{L['out_size']}, k {L['kernel']}, fs {L['in_rate']} -> {L['out_rate']} "
              f"(tmp {L['tmp_rate']}), cutoff {L['in_cutoff']:.4g} -> {L['out_cutoff']:.4g}, "
              f"half width {L['in_half_width']:.4g} -> {L['out_half_width']:.4g}, up "
              f"{L['up']} down {L['down']}, taps {L['up_taps']}/{L['down_taps']}"
              f"{' (radial)' if L['radial'] and L['down_taps'] > 1 else ''}, padding {p}, "
              f"sizes {L['conv_size']} -> {L['tmp_size']} -> {L['out_size']}, "
              f"{mods['synthesis.' + L['name']]:,} parameters")
    key = (args.config, resolution, cfg["channel_base"], cfg["channel_max"], ml)
    expected = EXPECTED_PARAMETERS.get(key)
    if expected is not None:
        if expected != total:
            print(f"error: {total:,} parameters, networks.md 9.2 has {expected:,}",
                  file=sys.stderr)
            return 1
        print(f"  = networks.md 9.2's {expected:,}")
    return 0


def add_network_args(p, resolution):
    p.add_argument("--config", default="t", choices=sorted(CONFIGS))
    p.add_argument("--resolution", type=int, default=resolution,
                   help="default %(default)s")
    p.add_argument("--channel-base", "--channel_base", dest="channel_base", type=int,
                   default=None, help="default: the config's (t 32768, r 65536)")
    p.add_argument("--channel-max", "--channel_max", dest="channel_max", type=int,
                   default=None, help="default: the config's (t 512, r 1024)")
    p.add_argument("--mapping-layers", "--mapping_layers", dest="mapping_layers", type=int,
                   default=DEFAULT_MAPPING_LAYERS, help="default %(default)s")


def main(argv=None):
    ap = argparse.ArgumentParser(description="StyleGAN3's generator in PyTorch: reference cases, "
                                             "their comparison and a speed baseline.")
    sub = ap.add_subparsers(dest="command", required=True)

    def conv_clamp(p):
        common.add_conv_clamp(p, DEFAULT_CONV_CLAMP, "filtered_lrelu's clamp")

    p = sub.add_parser("summary", help="parameters, the layer schedule and filters (no torch)")
    add_network_args(p, 1024)
    p = sub.add_parser("write-case", help="random weights, a z and the fp32 image")
    p.add_argument("--dir", required=True)
    add_network_args(p, 256)
    common.add_case_args(p, "do not compute the image the other ways")
    conv_clamp(p)
    common.add_compare_parser(sub, "cnnbench's image against a reference",
                              "cnnbench's output0 or logits (float32 NCHW)", DEFAULT_TOLERANCE)
    p = sub.add_parser("bench", help="PyTorch's generation speed (needs a CUDA GPU)")
    add_network_args(p, 1024)
    common.add_bench_args(p, "1,8,16,32")
    p.add_argument("--filter-impl", default="gemm", choices=("gemm", "fast", "ref"),
                   help="filtered_lrelu's resampling: blocked GEMMs (gemm), transposed and "
                        "strided depthwise convs (fast) or NVlabs' reference path (zero "
                        "insertion, depthwise conv; default %(default)s)")
    p.add_argument("--memory-format", default="channels_last",
                   choices=("channels_last", "contiguous"),
                   help="the synthesis layers' input layout (default %(default)s)")
    p.add_argument("--modconv", default="unfused", choices=("unfused", "fused"),
                   help="modulated conv: scale, shared conv, scale (unfused) or NVlabs' grouped "
                        "conv (default %(default)s)")
    common.add_timing_args(p)
    conv_clamp(p)
    args = ap.parse_args(argv)

    return common.run_command({"summary": summary, "write-case": write_case, "compare": compare,
                               "bench": bench}[args.command], args)


if __name__ == "__main__":
    sys.exit(main())
