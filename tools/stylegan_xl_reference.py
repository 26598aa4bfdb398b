#!/usr/bin/env python3
"""StyleGAN-XL's generator in PyTorch, from plain torch ops: reference cases and a peer.

cnnbench builds StyleGAN-XL's generator natively (networks/stylegan.cpp, stylegan_xl_generator;
the registry's `stylegan_xl`). This tool describes the same network independently, from
networks.md 9.3 and autonomousvision/stylegan_xl's semantics (training/networks_stylegan3_resetting
.py: its MappingNetwork with the class embedding, SuperresGenerator's growth and
compute_superres_filterparams), as a torch module whose state_dict is that Generator's. It is built
on tools/stylegan3_reference.py: the synthesis layers, the Fourier input, the filters and their
design, the ops, the random weights and the generator's plumbing are that tool's (imported, not
copied); what is XL's own is here: the class-conditioned mapping, the stem plus heads layer list
and its bookkeeping.

The network (T config of StyleGAN-XL's train.py: channel_base 65536, channel_max 1024, conv
kernel 3, z_dim 64, w_dim 512, mapping depth 2, no truncation):
  - input: [N, 64 + classes, 1, 1], z then a one-hot class (cnnbench's input tensor).
  - mapping: x = normalize_2nd_moment(z); y = embed_proj(embed.weight[argmax(c)]) (embed an
    nn.Embedding(1000, 320), embed_proj FullyConnectedLayer(320 -> 64, lrelu, lr_multiplier 1:
    W / sqrt(320), b); y = normalize_2nd_moment(y); fc0 (128 -> 512) and fc1 (512 -> 512), lrelu,
    lr_multiplier 0.01. mapping.w_avg [classes, 512] (unused: psi 1).
  - synthesis: a stem at 16 px, StyleGAN3's schedule with num_layers = --syn-layers (num_critical
    2); for each doubling up to R: the last 2 (critically sampled) layers and ToRGB cut, then
    --head-layers SynthesisLayers + ToRGB appended, named L{idx + stem_len}_{size}_{ch} (stem_len =
    layers kept + 1), from compute_superres_filterparams (first_cutoff = the last kept layer's
    cutoff, first_stopband = its half_width + cutoff, last_cutoff R / 2, last_stopband
    last_cutoff 2^0.3, exponents min(i / (head_layers - 2), 1); sampling rates as StyleGAN3's but
    [0] = the last layer's; sizes rate + 20, the last 2 R; channels rint(min(cbase / 2 / cutoff,
    cmax)), [0] the last layer's, the last 3). The input is the stem's SynthesisInput. Output *
    0.25.

Subcommands:
  summary    --resolution R [--syn-layers 10 --head-layers 7 --classes 1000 --channel-base CB
             --channel-max CM]  parameters, the layer list with each layer's rates, cutoffs,
             factors, taps and padding (no torch); exit 1 if a known total (networks.md 9.3)
             is not reproduced.
  write-case --dir DIR --resolution R --batch N --seed K [--classes C --syn-layers --head-layers
             --channel-base --channel-max --conv-clamp 256 --skip-crosscheck]
             DIR/weights.safetensors (every state_dict entry, float32), DIR/input.safetensors
             ("input" [N, 64 + C, 1, 1]: z and a one-hot class, the classes differing between
             images), DIR/reference.safetensors ("output0" [N, 3, R, R], fp32, TF32 off). Random
             weights as tools/stylegan3_reference.py draws them (its randomize: embed ~ N(0, 1),
             embed_proj W ~ N(0, 1), b ~ N(0, 0.1), w_avg ~ N(0, 1)), the clamp made to matter in
             the middle layer. Checks: the mapping against a float64 one written out (the
             embedding read by the one-hot's product, not the argmax), the image the other ways
             stylegan3_reference.py computes it and in float64, and that the class changes it.
  compare    --reference DIR/reference.safetensors --ours OURS.safetensors [--tolerance 1e-3]
  bench      --resolution R --batches 1,8,16 --precision fp16 --modes eager,graph --out X.json
             rows as pytorch_baseline.py's (model "stylegan_xl_R").

cnnbench's host generator checks a case with
    CNNBENCH_XL_CASE=DIR:RES:SYN_LAYERS:HEAD_LAYERS:CLASSES:CBASE:CMAX test_stylegan3_ops \\
        --gtest_filter='*XlHostGenerator*'

Usage: python3 tools/stylegan_xl_reference.py summary --resolution 1024
       python3 tools/stylegan_xl_reference.py write-case --dir /tmp/xl --resolution 32 \\
           --syn-layers 4 --head-layers 3 --classes 10 --channel-base 256 --channel-max 32 \\
           --batch 2 --seed 1
"""
import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stylegan3_reference as sg3  # noqa: E402
import torch_reference_common as common  # noqa: E402
from torch_reference_common import MAPPING_LR, W_DIM, require_torch  # noqa: E402

NETWORK = "stylegan_xl"
XL_Z_DIM = 64
EMBED_ROWS = 1000       # nn.Embedding(1000, 320), the pretrained tf_efficientnet_lite0 classes
EMBED_DIM = 320
MAPPING_LAYERS = 2
STEM_RESOLUTION = 16
DEFAULT_CLASSES = 1000
DEFAULT_SYN_LAYERS = 10  # the registry's (README examples); train.py's default is 14
DEFAULT_HEAD_LAYERS = 7
DEFAULT_CHANNEL_BASE = 65536
DEFAULT_CHANNEL_MAX = 1024
CONV_KERNEL = 3
NUM_CRITICAL = sg3.NUM_CRITICAL
OUTPUT_NAME = sg3.OUTPUT_NAME
CLASS_TOLERANCE = 1e-3  # another class must change image 0 by more than this (rel_l2)
MAPPING_TOLERANCE = 1e-5

# networks.md 9.3 ([DEV], c_dim 1000, cbase 65536, cmax 1024):
# (resolution, syn_layers, head_layers, classes, channel_base, channel_max) -> parameters.
EXPECTED_PARAMETERS = {
    (16, 10, 7, 1000, 65536, 1024): 101_883_463,
    (256, 10, 7, 1000, 65536, 1024): 233_375_910,
    (512, 10, 7, 1000, 65536, 1024): 235_471_137,
    (1024, 10, 7, 1000, 65536, 1024): 236_106_655,
    (16, 14, 7, 1000, 65536, 1024): 141_737_543,
    (256, 14, 7, 1000, 65536, 1024): 273_156_689,
    (512, 14, 7, 1000, 65536, 1024): 275_251_916,
    (1024, 14, 7, 1000, 65536, 1024): 275_887_434,
}


# --------------------------------------------------------------------------------------------
# The network as a layer list (no torch)
# --------------------------------------------------------------------------------------------
def network(resolution, syn_layers=DEFAULT_SYN_LAYERS, head_layers=DEFAULT_HEAD_LAYERS,
            classes=DEFAULT_CLASSES, channel_base=None, channel_max=None):
    """The checked settings: {resolution, syn_layers, head_layers, classes, channel_base,
    channel_max}; ValueError where cnnbench's stylegan_xl_generator would refuse them."""
    cb = DEFAULT_CHANNEL_BASE if channel_base is None else channel_base
    cm = DEFAULT_CHANNEL_MAX if channel_max is None else channel_max
    if resolution < STEM_RESOLUTION or resolution & (resolution - 1):
        raise ValueError(f"the resolution must be a power of two from {STEM_RESOLUTION}, not "
                         f"{resolution}")
    if not 1 <= classes <= EMBED_ROWS:
        raise ValueError(f"--classes must be 1 to {EMBED_ROWS} (the embedding's rows), not "
                         f"{classes}")
    if syn_layers <= NUM_CRITICAL or head_layers <= NUM_CRITICAL:
        raise ValueError(f"--syn-layers and --head-layers must exceed the {NUM_CRITICAL} "
                         f"critically sampled layers")
    if cb < 1 or cm < 1:
        raise ValueError("--channel-base and --channel-max must be positive")
    return {"resolution": resolution, "syn_layers": syn_layers, "head_layers": head_layers,
            "classes": classes, "channel_base": cb, "channel_max": cm}


def _entry(cutoff, stopband, rate, resolution, size_full, channels):
    half_width = max(stopband, rate / 2) - cutoff
    size = resolution if size_full else int(rate) + 2 * sg3.MARGIN_SIZE
    return {"cutoff": cutoff, "stopband": stopband, "sampling_rate": rate,
            "half_width": half_width, "size": size, "channels": channels}


def _rate(stopband, resolution):
    return 2.0 ** math.ceil(math.log2(min(stopband * 2, resolution)))


def _channels(cutoff, channel_base, channel_max):
    return int(round(min(channel_base / 2 / cutoff, channel_max)))  # np.rint: halves to even


def stem_schedule(num_layers, channel_base, channel_max, resolution=STEM_RESOLUTION):
    """StyleGAN3's SynthesisNetwork schedule with num_layers layers (stylegan3_reference.schedule
    is this with 14): entries 0..num_layers, the last ToRGB's."""
    last_cutoff = resolution / 2
    last_stopband = last_cutoff * sg3.LAST_STOPBAND_REL
    out = []
    for i in range(num_layers + 1):
        e = min(i / (num_layers - NUM_CRITICAL), 1.0)
        cutoff = sg3.FIRST_CUTOFF * (last_cutoff / sg3.FIRST_CUTOFF) ** e
        stopband = sg3.FIRST_STOPBAND * (last_stopband / sg3.FIRST_STOPBAND) ** e
        ch = sg3.IMG_CHANNELS if i == num_layers else _channels(cutoff, channel_base, channel_max)
        out.append(_entry(cutoff, stopband, _rate(stopband, resolution), resolution,
                          i >= num_layers - 1, ch))
    return out


def head_schedule(last, resolution, head_layers, channel_base, channel_max):
    """compute_superres_filterparams from the last kept layer's entry: entries 0..head_layers."""
    first_cutoff, first_stopband = last["cutoff"], last["half_width"] + last["cutoff"]
    last_cutoff = resolution / 2
    last_stopband = last_cutoff * sg3.LAST_STOPBAND_REL
    out = []
    for i in range(head_layers + 1):
        e = min(i / (head_layers - NUM_CRITICAL), 1.0)
        cutoff = first_cutoff * (last_cutoff / first_cutoff) ** e
        stopband = first_stopband * (last_stopband / first_stopband) ** e
        rate = last["sampling_rate"] if i == 0 else _rate(stopband, resolution)
        ch = (last["channels"] if i == 0 else sg3.IMG_CHANNELS if i == head_layers
              else _channels(cutoff, channel_base, channel_max))
        out.append(_entry(cutoff, stopband, rate, resolution, i >= head_layers - 1, ch))
    return out


def layer_geometry(name, index, a, b, torgb, critical):
    """One SynthesisLayer from entry a's output to entry b's, as stylegan3_reference.layer_specs
    describes each (the same keys, so its SynthesisLayer and filter design take it): the lrelu at
    twice the larger rate (ToRGB: once), 6 taps per unit of a factor above 1, the padding of the
    symmetric convention. AssertionError if the filters do not land on b's size."""
    k = 1 if torgb else CONV_KERNEL
    in_rate, out_rate = int(a["sampling_rate"]), int(b["sampling_rate"])
    tmp = max(in_rate, out_rate) * (1 if torgb else sg3.LRELU_UPSAMPLING)
    up, down = tmp // in_rate, tmp // out_rate
    if in_rate * up != tmp or out_rate * down != tmp:
        raise AssertionError(f"{name}: the rates {in_rate}, {out_rate} do not divide {tmp}")
    up_taps = sg3.FILTER_SIZE * up if up > 1 and not torgb else 1
    down_taps = sg3.FILTER_SIZE * down if down > 1 and not torgb else 1
    conv_size = a["size"] + k - 1
    pad_total = (b["size"] - 1) * down + 1 - conv_size * up + up_taps + down_taps - 2
    pad_lo = (pad_total + up) // 2
    pad_hi = pad_total - pad_lo
    tmp_size = sg3.upfirdn_out_size(conv_size, up_taps, up, 1, pad_lo, pad_hi)
    if sg3.upfirdn_out_size(tmp_size, down_taps, 1, down) != b["size"]:
        raise AssertionError(f"{name}: the filters do not give {b['size']}")
    return {"name": name, "index": index, "torgb": torgb, "critical": critical,
            "in_channels": a["channels"], "out_channels": b["channels"], "in_size": a["size"],
            "out_size": b["size"], "in_rate": in_rate, "out_rate": out_rate,
            "in_cutoff": a["cutoff"], "out_cutoff": b["cutoff"],
            "in_half_width": a["half_width"], "out_half_width": b["half_width"], "kernel": k,
            "tmp_rate": tmp, "up": up, "down": down, "up_taps": up_taps,
            "down_taps": down_taps, "radial": False, "pad_lo": pad_lo, "pad_hi": pad_hi,
            "conv_size": conv_size, "tmp_size": tmp_size}


def layer_specs(resolution, syn_layers=DEFAULT_SYN_LAYERS, head_layers=DEFAULT_HEAD_LAYERS,
                channel_base=None, channel_max=None):
    """The grown generator's SynthesisLayers in order (layer_geometry's dicts; "stage": the
    resolution whose stage added the layer, 16 for the stem's)."""
    n = network(resolution, syn_layers, head_layers, 1, channel_base, channel_max)
    cb, cm = n["channel_base"], n["channel_max"]
    stem = stem_schedule(syn_layers, cb, cm)
    # (name, in entry, out entry, torgb, critical, stage)
    plan = [(f"L{i}_{stem[i]['size']}_{stem[i]['channels']}", stem[max(i - 1, 0)], stem[i],
             i == syn_layers, i >= syn_layers - NUM_CRITICAL, STEM_RESOLUTION)
            for i in range(syn_layers + 1)]
    res = STEM_RESOLUTION * 2
    while res <= resolution:
        del plan[len(plan) - (NUM_CRITICAL + 1):]
        stem_len = len(plan) + 1
        h = head_schedule(plan[-1][2], res, head_layers, cb, cm)
        for i in range(head_layers + 1):
            plan.append((f"L{i + stem_len}_{h[i]['size']}_{h[i]['channels']}",
                         h[max(i - 1, 0)], h[i], i == head_layers,
                         i >= head_layers - NUM_CRITICAL, res))
        res *= 2
    specs = []
    for index, (name, a, b, torgb, critical, stage) in enumerate(plan):
        L = layer_geometry(name, index, a, b, torgb, critical)
        L["stage"] = stage
        specs.append(L)
    return specs


def input_spec(channel_base=None, channel_max=None, syn_layers=DEFAULT_SYN_LAYERS):
    """The stem's SynthesisInput: {channels, size, sampling_rate, bandwidth} (the same as
    stylegan3_reference.input_spec at 16 px: entry 0 does not depend on num_layers)."""
    n = network(STEM_RESOLUTION, syn_layers, DEFAULT_HEAD_LAYERS, 1, channel_base, channel_max)
    s0 = stem_schedule(syn_layers, n["channel_base"], n["channel_max"])[0]
    return {"channels": s0["channels"], "size": s0["size"], "sampling_rate": s0["sampling_rate"],
            "bandwidth": s0["cutoff"]}


def state_specs(resolution, syn_layers=DEFAULT_SYN_LAYERS, head_layers=DEFAULT_HEAD_LAYERS,
                classes=DEFAULT_CLASSES, channel_base=None, channel_max=None):
    """[(name, shape, trainable)] of the Generator's state_dict in its order: synthesis (the
    input, the layers), then mapping (w_avg, embed, embed_proj, fc0, fc1)."""
    network(resolution, syn_layers, head_layers, classes, channel_base, channel_max)
    specs = []

    def fc(prefix, in_features, out_features):
        specs.append((f"{prefix}.weight", [out_features, in_features], True))
        specs.append((f"{prefix}.bias", [out_features], True))

    c0 = input_spec(channel_base, channel_max, syn_layers)["channels"]
    specs.append(("synthesis.input.weight", [c0, c0], True))
    specs.append(("synthesis.input.transform", [3, 3], False))
    specs.append(("synthesis.input.freqs", [c0, 2], False))
    specs.append(("synthesis.input.phases", [c0], False))
    fc("synthesis.input.affine", W_DIM, 4)
    for L in layer_specs(resolution, syn_layers, head_layers, channel_base, channel_max):
        p, k = f"synthesis.{L['name']}", L["kernel"]
        specs.append((f"{p}.weight", [L["out_channels"], L["in_channels"], k, k], True))
        specs.append((f"{p}.bias", [L["out_channels"]], True))
        specs.append((f"{p}.magnitude_ema", [], False))
        if L["up_taps"] > 1:
            specs.append((f"{p}.up_filter", [L["up_taps"]], False))
        if L["down_taps"] > 1:
            specs.append((f"{p}.down_filter", [L["down_taps"]], False))
        fc(f"{p}.affine", W_DIM, L["in_channels"])
    specs.append(("mapping.w_avg", [classes, W_DIM], False))
    specs.append(("mapping.embed.weight", [EMBED_ROWS, EMBED_DIM], True))
    fc("mapping.embed_proj", EMBED_DIM, XL_Z_DIM)
    for i in range(MAPPING_LAYERS):
        fc(f"mapping.fc{i}", 2 * XL_Z_DIM if i == 0 else W_DIM, W_DIM)
    return specs


# The embedding's 320,000 counted, w_avg and the filters not.
param_specs, param_count, module_param_counts = sg3.param_functions(state_specs)


def conv_macs(resolution, syn_layers=DEFAULT_SYN_LAYERS, head_layers=DEFAULT_HEAD_LAYERS,
              channel_base=None, channel_max=None):
    """Multiply-accumulates per image, counted as stylegan3_reference.conv_macs counts them: the
    mapping's FC layers (embed_proj's too), the input's mixing and every modulated conv at its
    output size; affines, modulation and the filters not."""
    inp = input_spec(channel_base, channel_max, syn_layers)
    total = (EMBED_DIM * XL_Z_DIM + 2 * XL_Z_DIM * W_DIM + (MAPPING_LAYERS - 1) * W_DIM * W_DIM
             + inp["size"] ** 2 * inp["channels"] ** 2)
    for L in layer_specs(resolution, syn_layers, head_layers, channel_base, channel_max):
        total += L["conv_size"] ** 2 * L["out_channels"] * L["in_channels"] * L["kernel"] ** 2
    return total


def model_name(resolution):
    return f"{NETWORK}_{resolution}"


def expected_total(n):
    return EXPECTED_PARAMETERS.get((n["resolution"], n["syn_layers"], n["head_layers"],
                                    n["classes"], n["channel_base"], n["channel_max"]))


# --------------------------------------------------------------------------------------------
# torch: the model (stylegan3_reference's modules), the case, the timing
# --------------------------------------------------------------------------------------------
def build_model(resolution, syn_layers=DEFAULT_SYN_LAYERS, head_layers=DEFAULT_HEAD_LAYERS,
                classes=DEFAULT_CLASSES, channel_base=None, channel_max=None,
                conv_clamp=sg3.DEFAULT_CONV_CLAMP):
    """An nn.Module laid out as StyleGAN-XL's Generator, float32. forward(x) with x [N, 64 +
    classes] or [N, 64 + classes, 1, 1] (z, then the one-hot) -> the image [N, 3, R, R] float32.
    The synthesis input and layers, the generator's shell and configure(...) are
    stylegan3_reference.build_model's (the classes taken from a 16 px StyleGAN3-T of the same
    channel numbers, whose input is the stem's); the mapping is XL's."""
    torch = require_torch()
    from torch import nn

    n = network(resolution, syn_layers, head_layers, classes, channel_base, channel_max)
    cb, cm = n["channel_base"], n["channel_max"]
    specs = layer_specs(resolution, syn_layers, head_layers, cb, cm)
    base = sg3.build_model(STEM_RESOLUTION, "t", cb, cm, MAPPING_LAYERS, conv_clamp)
    if sg3.input_spec(STEM_RESOLUTION, "t", cb, cm) != input_spec(cb, cm, syn_layers):
        raise AssertionError("StyleGAN3's 16 px input is not the stem's")
    opts = base.opts
    SynthesisInput = type(base.synthesis.input)
    SynthesisLayer = type(getattr(base.synthesis, base.synthesis.layer_names[0]))
    FullyConnectedLayer = type(base.mapping.fc0)
    Generator = type(base)
    Sg3Synthesis = type(base.synthesis)  # its forward: the input, the layers, * 0.25
    del base

    class SynthesisNetwork(Sg3Synthesis):
        def __init__(self):
            nn.Module.__init__(self)
            self.input = SynthesisInput()
            self.layer_names = []
            for L in specs:
                setattr(self, L["name"], SynthesisLayer(L))
                self.layer_names.append(L["name"])

    class MappingNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w_avg", torch.zeros([classes, W_DIM]))
            self.embed = nn.Embedding(EMBED_ROWS, EMBED_DIM)
            self.embed_proj = FullyConnectedLayer(EMBED_DIM, XL_Z_DIM, "lrelu")
            for i in range(MAPPING_LAYERS):
                setattr(self, f"fc{i}", FullyConnectedLayer(2 * XL_Z_DIM if i == 0 else W_DIM,
                                                            W_DIM, "lrelu", MAPPING_LR))

        def forward(self, zc):
            dt = opts.float_dtype
            zc = zc.reshape(zc.shape[0], -1)
            x = common.normalize_2nd_moment(zc[:, :XL_Z_DIM].to(dt))
            y = self.embed_proj(self.embed(zc[:, XL_Z_DIM:].argmax(1)).to(dt))
            x = torch.cat([x, common.normalize_2nd_moment(y)], dim=1)
            for i in range(MAPPING_LAYERS):
                x = getattr(self, f"fc{i}")(x)
            return x  # psi 1: w_avg unused; every layer gets this w

    class XlGenerator(Generator):
        def __init__(self, **attributes):
            super().__init__(SynthesisNetwork(), **attributes)
            self.mapping = MappingNetwork()  # replaces StyleGAN3's, in its place

    return XlGenerator(resolution=resolution, syn_layers=syn_layers, head_layers=head_layers,
                       classes=classes, channel_base=cb, channel_max=cm)


def model_args(model):
    return (model.resolution, model.syn_layers, model.head_layers, model.classes,
            model.channel_base, model.channel_max)


def check_model(model):
    """AssertionError unless the model's state_dict is state_specs' and its parameter count
    param_count's."""
    a = model_args(model)
    common.check_state_dict(model, param_specs(*a, buffers=True), param_count(*a))


def mapping_explicit(model, zc):
    """The mapping in float64 written out from the state_dict: the embedding's row as the one-hot
    times the table (not the argmax), the FC layers as their definitions."""
    torch = require_torch()
    sd = {k: v.double() for k, v in model.state_dict().items() if k.startswith("mapping.")}
    zc = zc.reshape(zc.shape[0], -1).double()

    def norm(v):
        return v / (v.square().mean(dim=1, keepdim=True) + 1e-8).sqrt()

    def lrelu(v):
        return torch.where(v >= 0, v, v * 0.2) * math.sqrt(2)

    e = zc[:, XL_Z_DIM:] @ sd["mapping.embed.weight"][:model.classes]
    y = lrelu(e @ sd["mapping.embed_proj.weight"].t() / math.sqrt(EMBED_DIM)
              + sd["mapping.embed_proj.bias"])
    x = torch.cat([norm(zc[:, :XL_Z_DIM]), norm(y)], dim=1)
    for i in range(MAPPING_LAYERS):
        w = sd[f"mapping.fc{i}.weight"]
        x = lrelu(x @ w.t() * (MAPPING_LR / math.sqrt(w.shape[1]))
                  + sd[f"mapping.fc{i}.bias"] * MAPPING_LR)
    return x


def random_classes(torch, gen, batch, classes):
    """Class indices for a batch: a random permutation's first `batch` (cycled past `classes`), so
    the images' classes differ where they can."""
    perm = torch.randperm(classes, generator=gen)
    return perm[torch.arange(batch) % classes]


def make_input(torch, z, cls, classes):
    """cnnbench's input [N, 64 + classes, 1, 1]: z, then the one-hot of cls."""
    onehot = torch.nn.functional.one_hot(cls, classes).to(z.dtype)
    return torch.cat([z, onehot], dim=1).reshape(z.shape[0], -1, 1, 1).contiguous()


def network_of(args):
    return network(args.resolution, args.syn_layers, args.head_layers, args.classes,
                   args.channel_base, args.channel_max)


def write_case(args):
    """The write-case subcommand. Returns the exit status."""
    def check():
        n = network_of(args)
        common.check_batch(args.batch)
        return n

    torch, save_file, n, device = common.start_write_case(check)
    resolution, classes = args.resolution, args.classes
    a = model_args_of(n)
    t_start = time.perf_counter()
    status = 0
    specs = layer_specs(resolution, n["syn_layers"], n["head_layers"], n["channel_base"],
                        n["channel_max"])
    try:
        design = sg3.filter_design_difference(specs)
    except ImportError:
        design = None

    torch.manual_seed(args.seed)  # the construction's own draws, all overwritten below
    model = build_model(*a, conv_clamp=args.conv_clamp)
    check_model(model)
    gen = torch.Generator().manual_seed(args.seed)
    sg3.randomize(model, gen)
    z = torch.randn(args.batch, XL_Z_DIM, generator=gen)
    cls = random_classes(torch, gen, args.batch, classes)
    x = make_input(torch, z, cls, classes)
    model = model.to(device).eval()
    xd = x.to(device)
    clamp_index = max(i for i in range(len(specs) // 2 + 1) if not specs[i]["torgb"])
    calibrated = (sg3.calibrate_clamp(model, xd, clamp_index) if model.opts.conv_clamp else None)
    stats = []
    checks = []
    with torch.no_grad():
        model.configure(clamp_stats=stats)
        img = model(xd).float()
        model.configure(clamp_stats=None)
        t_main = time.perf_counter()
        w = model.mapping(xd)
        mapping_err = common.rel_l2(w, mapping_explicit(model, xd))
        other = (cls + 1) % classes if classes > 1 else None
        class_diff = None
        if other is not None:
            img2 = model(make_input(torch, z, other, classes).to(device)).float()
            class_diff = common.rel_l2(img2[0], img[0])
        if not args.skip_crosscheck:
            for what, kw in (
                    ("modulated conv unfused (x * s, conv, * d)", {"fused_modconv": False}),
                    ("filters as transposed/strided convs", {"filter_impl": "fast"}),
                    ("filters as blocked GEMMs", {"filter_impl": "gemm"}),
                    ("filters as banded matrices, grid written out",
                     {"filter_impl": "matrix", "grid": "explicit"})):
                o = model.configure(**kw)(xd).float()
                model.configure(fused_modconv=True, filter_impl="ref", grid="affine_grid")
                checks.append((what, common.rel_l2(o, img)))
            m64 = build_model(*a, conv_clamp=args.conv_clamp)
            m64.load_state_dict(model.state_dict())
            m64 = m64.to(device).double().configure(dtype=torch.float64,
                                                     float_dtype=torch.float64)
            checks.append(("float64", common.rel_l2(img, m64(xd.double()))))
            del m64
    img = img.contiguous().cpu()
    t_end = time.perf_counter()

    name = model_name(resolution)
    params = param_count(*a)
    meta = {"network": name, "resolution": str(resolution), "syn_layers": str(n["syn_layers"]),
            "head_layers": str(n["head_layers"]), "classes": str(classes),
            "channel_base": str(n["channel_base"]), "channel_max": str(n["channel_max"]),
            "conv_clamp": str(model.opts.conv_clamp), "truncation_psi": "1",
            "class_indices": ",".join(str(c) for c in cls.tolist()),
            "seed": str(args.seed), "batch": str(args.batch), "torch": torch.__version__,
            "device": str(device), "tool": "tools/stylegan_xl_reference.py write-case"}
    common.save_case(save_file, args.dir, model, x, {OUTPUT_NAME: img}, meta)

    print(f"{name} (syn_layers {n['syn_layers']}, head_layers {n['head_layers']}, classes "
          f"{classes}, channel_base {n['channel_base']}, channel_max {n['channel_max']}): "
          f"{params:,} parameters, {len(specs)} layers, conv_clamp {model.opts.conv_clamp}, seed "
          f"{args.seed}, batch {args.batch}, classes {cls.tolist()}, fp32 (TF32 off) on {device}; "
          f"files in {args.dir}")
    print(f"  cnnbench: CNNBENCH_XL_CASE={os.path.abspath(args.dir)}:{resolution}:"
          f"{n['syn_layers']}:{n['head_layers']}:{classes}:{n['channel_base']}:"
          f"{n['channel_max']}")
    if not common.report_rms(OUTPUT_NAME, img, sg3.RMS_BOUNDS):
        status = 1
        common.rms_error("the image", sg3.RMS_BOUNDS)
    if args.batch > 1:
        print(f"  images differ: rel_l2(image 1, image 0) {common.rel_l2(img[1], img[0]):.3g}")
    hits = sum(h for _, h, _ in stats)
    total = sum(k for _, _, k in stats)
    print(f"  clamp +-{model.opts.conv_clamp}: {hits:,} of {total:,} pre-clamp elements beyond "
          f"it ({hits / max(total, 1):.3%})")
    if calibrated:
        print(f"  (calibrate_clamp: {calibrated[0]}'s input RMS {calibrated[1]:.3g}, its "
              f"magnitude_ema set to {calibrated[2]:.3g})")
    if total and hits == total:
        status = 1
        print("error: every element hits the clamp", file=sys.stderr)

    def verdict(what, err, tol, above=False):
        nonlocal status
        good = math.isfinite(err) and (err > tol if above else err <= tol)
        if not good:
            status = 1
            print(f"error: {what}: {err:.3e} ({'not above' if above else 'more than'} {tol:g})",
                  file=sys.stderr)
        return "" if good else "  <- wrong"

    if design is None:
        print("  filter design: scipy not importable, not checked against it")
    else:
        print(f"  filter design against scipy.signal.firwin: max |diff| {design:.2e}"
              f"{verdict('the filter design', design, sg3.DESIGN_TOLERANCE)}")
    print(f"  mapping against the float64 one written out (one-hot @ embed): rel_l2 "
          f"{mapping_err:.3e}{verdict('the mapping', mapping_err, MAPPING_TOLERANCE)}")
    if class_diff is not None:
        print(f"  image 0 with class {other[0].item()} instead of {cls[0].item()}: rel_l2 "
              f"{class_diff:.3g}"
              f"{verdict('the class change', class_diff, CLASS_TOLERANCE, above=True)}")
    for what, err in checks:
        print(f"  cross-check, {what}: rel_l2 {err:.3e}"
              f"{verdict(f'the image ({what})', err, sg3.CROSSCHECK_TOLERANCE)}")
    print(f"  time: {t_main - t_start:.1f} s to the image, {t_end - t_start:.1f} s with the "
          f"cross-checks")
    return status


def model_args_of(n):
    return (n["resolution"], n["syn_layers"], n["head_layers"], n["classes"],
            n["channel_base"], n["channel_max"])


def compare(args):
    return common.compare_image(args, OUTPUT_NAME)


def bench(args):
    """PyTorch's generation, timed as pytorch_baseline.py times the torchvision models."""
    b = common.Bench(args, lambda: network_of(args))
    torch, device, n = b.torch, b.device, b.checked
    a = model_args_of(n)
    resolution, classes = args.resolution, args.classes
    name = model_name(resolution)
    torch.manual_seed(0)
    model = build_model(*a, conv_clamp=args.conv_clamp)
    sg3.randomize(model, torch.Generator().manual_seed(0))
    model = model.eval().to(device=device)
    model.configure(dtype=b.dtype, channels_last=args.memory_format == "channels_last",
                    filter_impl=args.filter_impl, fused_modconv=args.modconv == "fused")
    params = param_count(*a)
    doc = b.document(
        {"resolution": resolution, "conv_clamp": model.opts.conv_clamp,
         "modulated_conv": args.modconv, "filtered_lrelu": args.filter_impl,
         "synthesis_dtype": "every layer", "mapping_and_input_dtype": "float32",
         "parameters_dtype": "float32 (cast per use)"},
        {"model": name, "syn_layers": n["syn_layers"], "head_layers": n["head_layers"],
         "classes": classes, "channel_base": n["channel_base"],
         "channel_max": n["channel_max"], "parameters": params,
         "gmacs_per_image": conv_macs(resolution, n["syn_layers"], n["head_layers"],
                                      n["channel_base"], n["channel_max"]) / 1e9},
        memory_format=args.memory_format)

    def make(batch):
        z = torch.randn(batch, XL_Z_DIM, device=device)
        cls = torch.arange(batch, device=device) % classes
        return make_input(torch, z, cls, classes)

    return b.run(model, doc, f"{name}, {params:,} parameters", name, name, resolution, make,
                 resolution=resolution)


# --------------------------------------------------------------------------------------------
# summary and main
# --------------------------------------------------------------------------------------------
def summary(args):
    n = network_of(args)
    a = model_args_of(n)
    total = param_count(*a)
    mods = module_param_counts(*a)
    lay = (args.resolution, n["syn_layers"], n["head_layers"], n["channel_base"],
           n["channel_max"])
    specs = layer_specs(*lay)
    inp = input_spec(n["channel_base"], n["channel_max"], n["syn_layers"])
    print(f"{model_name(args.resolution)}: syn_layers {n['syn_layers']}, head_layers "
          f"{n['head_layers']}, classes {n['classes']}, channel_base {n['channel_base']}, "
          f"channel_max {n['channel_max']}, {total:,} parameters (mapping {mods['mapping']:,}, "
          f"synthesis {total - mods['mapping']:,}), {len(specs)} layers, num_ws "
          f"{len(specs) + 1}, {conv_macs(*lay) / 1e9:.3f} conv GMACs per image")
    print(f"  input: {inp['channels']} channels at {inp['size']}x{inp['size']}, fs "
          f"{inp['sampling_rate']:g}, bandwidth {inp['bandwidth']:g}, "
          f"{mods['synthesis.input']:,} parameters")
    for L in specs:
        print(f"  {L['name']} ({L['stage']} px stage): {L['in_channels']} -> "
              f"{L['out_channels']}, {L['in_size']} -> {L['out_size']}, k {L['kernel']}, fs "
              f"{L['in_rate']} -> {L['out_rate']} (tmp {L['tmp_rate']}), cutoff "
              f"{L['in_cutoff']:.4g} -> {L['out_cutoff']:.4g}, up {L['up']} down {L['down']}, "
              f"taps {L['up_taps']}/{L['down_taps']}, padding [{L['pad_lo']}, {L['pad_hi']}], "
              f"{mods['synthesis.' + L['name']]:,} parameters")
    expected = expected_total(n)
    if expected is not None:
        if expected != total:
            print(f"error: {total:,} parameters, networks.md 9.3 has {expected:,}",
                  file=sys.stderr)
            return 1
        print(f"  = networks.md 9.3's {expected:,}")
    return 0


def add_network_args(p, resolution):
    p.add_argument("--resolution", type=int, default=resolution, help="default %(default)s")
    p.add_argument("--syn-layers", "--syn_layers", dest="syn_layers", type=int,
                   default=DEFAULT_SYN_LAYERS, help="the 16 px stem's layers (default "
                                                    "%(default)s)")
    p.add_argument("--head-layers", "--head_layers", dest="head_layers", type=int,
                   default=DEFAULT_HEAD_LAYERS, help="layers per doubling (default %(default)s)")
    p.add_argument("--classes", type=int, default=DEFAULT_CLASSES,
                   help="the one-hot's width, 1 to 1000 (default %(default)s)")
    p.add_argument("--channel-base", "--channel_base", dest="channel_base", type=int,
                   default=None, help=f"default {DEFAULT_CHANNEL_BASE}")
    p.add_argument("--channel-max", "--channel_max", dest="channel_max", type=int,
                   default=None, help=f"default {DEFAULT_CHANNEL_MAX}")


def main(argv=None):
    ap = argparse.ArgumentParser(description="StyleGAN-XL's generator in PyTorch: reference "
                                             "cases, their comparison and a speed baseline.")
    sub = ap.add_subparsers(dest="command", required=True)

    def conv_clamp(p):
        common.add_conv_clamp(p, sg3.DEFAULT_CONV_CLAMP, "filtered_lrelu's clamp")

    p = sub.add_parser("summary", help="parameters and the layer list (no torch)")
    add_network_args(p, 1024)
    p = sub.add_parser("write-case", help="random weights, z and classes, the fp32 image")
    p.add_argument("--dir", required=True)
    add_network_args(p, 32)
    common.add_case_args(p, "do not compute the image the other ways")
    conv_clamp(p)
    common.add_compare_parser(sub, "cnnbench's image against a reference",
                              "cnnbench's output0 or logits (float32 NCHW)",
                              sg3.DEFAULT_TOLERANCE)
    p = sub.add_parser("bench", help="PyTorch's generation speed (needs a CUDA GPU)")
    add_network_args(p, 256)
    common.add_bench_args(p, "1,8,16")
    p.add_argument("--filter-impl", default="gemm", choices=("gemm", "fast", "ref"))
    p.add_argument("--memory-format", default="channels_last",
                   choices=("channels_last", "contiguous"))
    p.add_argument("--modconv", default="unfused", choices=("unfused", "fused"))
    common.add_timing_args(p)
    conv_clamp(p)
    args = ap.parse_args(argv)
    return common.run_command({"summary": summary, "write-case": write_case, "compare": compare,
                               "bench": bench}[args.command], args)


if __name__ == "__main__":
    sys.exit(main())
