#!/usr/bin/env python3
"""StyleGAN3-T's training step in PyTorch (the generator and NVlabs' StyleGAN2 discriminator):
reference cases for cnnbench's native training step, and a peer.

Issue 6's training step: G and D forward and backward, the non-saturating logistic loss, R1 every
16 steps, Adam. The generator is tools/stylegan3_reference.py's (build_model, randomize,
calibrate_clamp and its ops, imported); the discriminator and the training phases are this tool's,
written from NVlabs stylegan3's semantics (training/networks_stylegan2.py's Discriminator,
training/loss.py's StyleGAN2Loss, training/training_loop.py's phases and train.py's
--cfg stylegan3-t), not copied.

The discriminator (networks_stylegan2.Discriminator, architecture 'resnet', c_dim 0, 3 channels,
channel_base 32768, channel_max 512, conv_clamp 256, mbstd group 4 with 1 channel), float32:
  - channels(res) = min(channel_base // res, channel_max); a block b{res} for res = R, R/2, ..., 8
    with tmp = channels(res), out = channels(res / 2); b{R} starts with fromrgb (1x1 conv 3 ->
    tmp, lrelu). Block: y = skip(x, gain sqrt(0.5)) (1x1 conv, no bias, down 2, linear, NO clamp:
    NVlabs builds skip without conv_clamp); x = conv0(x) (3x3, lrelu); x = conv1(x, gain
    sqrt(0.5)) (3x3, lrelu, down 2); x = y + x.
  - Conv2dLayer: x conv (weight / sqrt(in k^2)), then bias_act: + bias, lrelu(0.2) (or linear),
    * act_gain * gain (act_gain sqrt(2) for lrelu, 1 for linear), clamp(+-conv_clamp * gain).
    Down-sampling as conv2d_resample: the FIR [1,3,3,1] (its outer product / 64, a [4, 4] buffer
    `resample_filter` in every layer and block, as NVlabs registers it); 3x3 down: upfirdn2d with
    padding 2 on each side (1 + (4 - 2 + 1) // 2 and 1 + (4 - 2) // 2), then conv stride 2
    unpadded; 1x1 down: upfirdn2d down 2 with padding 1, then the 1x1 conv.
  - b4 (the epilogue, float32 also in 'mixed'): minibatch std (G = min(4, N) samples a group,
    sample n in group n % (N / G): the [N, ...] tensor read as [G, N / G, ...]; the std over a
    group (biased variance, + 1e-8 inside the sqrt), its mean over channels and pixels, one extra
    channel), conv 3x3 (C + 1 -> C, lrelu, clamp), fc (C * 16 -> C, lrelu, FullyConnectedLayer:
    W / sqrt(in), NCHW flatten), out (C -> 1, linear).
  - Names as NVlabs' state_dict: b256.fromrgb.weight/bias, b256.conv0.weight/bias,
    b256.conv1.weight/bias, b256.skip.weight, ..., b4.conv.weight/bias, b4.fc.weight/bias,
    b4.out.weight/bias (and the buffers b{res}.resample_filter, b{res}.{layer}.resample_filter).
    256 px: 28,864,129 parameters (summary prints the blocks).

One training iteration's phases (StyleGAN2Loss.accumulate_gradients for stylegan3-t: pl_weight 0
so G's phase is Gmain alone (G_reg_interval None: 'Gboth', which is 'Gmain' without path length),
no style mixing, no augmentation, blur_sigma 0, r1_gamma --gamma, D_reg_interval 16):
  Gmain  ws = mapping(z_gmain) (psi 1, no w_avg update), img = synthesis(ws) (no magnitude_ema
         update), logits = D(img); loss = softplus(-logits).mean(); its gradients for G's
         parameters (D's parameters do not require grad; the gradient flows through D to img).
  Dmain  G on z_dmain with update_emas (mapping: w_avg = mean_n(w).lerp(w_avg, 0.998); every
         SynthesisLayer, BEFORE its input gain magnitude_ema.rsqrt() is read: magnitude_ema =
         mean(x^2 of its input, float32).lerp(magnitude_ema, 0.5 ** (batch / 20000))), no
         gradient into G (its parameters do not require grad); loss_gen = softplus(D(img)).mean()
         and loss_real = softplus(-D(reals)).mean(), each backward with gain 1 (the gradients of
         D's parameters are their sum).
  Dreg   x = reals.requires_grad_(); logits = D(x); g = autograd.grad(logits.sum(), x,
         create_graph=True); r1_penalty = g.square().sum([1, 2, 3]) [N]; loss = (r1_penalty *
         gamma / 2).mean() * 16 (the gain is the reg interval); gradients of D's parameters.
         b4.out.bias does not reach g: no gradient (torch's None; NVlabs' training_loop leaves
         such a parameter out of the Adam step). After mbstd D is piecewise linear, so the
         gradients of b4.conv.bias and b4.fc.bias are 0 (exact zeros from torch's ops; None
         from NVlabs' CUDA bias_act, which has no second-order term for lrelu: on a GPU NVlabs'
         Adam step skips them as well). The reference holds zeros for all three; case.json lists
         them ("no_gradient", "no_gradient_nvlabs_cuda"); the bench skips all three.
  A real iteration (bench): Gmain + Adam(G), Dmain + Adam(D), every 16th iteration (index % 16 ==
  0, the first one included) Dreg + Adam(D), then G_ema = G.lerp(G_ema, 0.5 ** (batch / (ema_kimg
  * 1000))) with ema_kimg = batch * 10 / 32 (its buffers copied; training_loop's ema_rampup 0.05,
  ema_nimg = min(ema_kimg * 1000, cur_nimg * 0.05), which lowers the beta during the first 6,250
  iterations, left out: the same work). Before each step NVlabs concatenates the
  gradients, nan_to_num(nan 0, +-1e5) and splits them again; so does the bench. Adam: G lr 0.0025,
  D lr 0.002, betas (0, 0.99), eps 1e-8; D's lazy regularisation: mb_ratio = 16 / 17, lr *=
  mb_ratio, betas ** mb_ratio.

Subcommands:
  summary    [--resolution 256 --d-channel-base 32768 --d-channel-max 512 ...] the
             discriminator's blocks and parameters, the generator's total, the hyper-parameters
             (no torch).
  write-case --dir DIR --resolution R --batch N --seed K [--gamma 2] [--d-bias-std 0.1]
             [--channel-base CB --channel-max CM --d-channel-base --d-channel-max --conv-clamp
             --d-conv-clamp --mbstd-group] [--filter-impl ref] [--device auto] [--skip-crosscheck]
             DIR/g.safetensors       G's state_dict as stylegan3_reference.py write-case writes its
                                     weights (its randomize from --seed, then its calibrate_clamp
                                     on z_gmain), float32;
             DIR/d.safetensors       D's parameters, NVlabs' names, float32 (OIHW, [out, in]):
                                     weights N(0, 1) as NVlabs initialises them, biases N(0,
                                     --d-bias-std) (NVlabs: 0, which --d-bias-std 0 gives) so that
                                     they matter;
             DIR/inputs.safetensors  z_gmain [N, 512], z_dmain [N, 512] ~ N(0, 1), reals [N, 3, R,
                                     R] ~ U(-1, 1), float32 NCHW;
             DIR/reference.safetensors  Gmain.loss [1], Gmain.logits [N], Gmain.grad.<G parameter>;
                                     Dmain.loss_gen, Dmain.loss_real [1], Dmain.logits_gen,
                                     Dmain.logits_real [N], Dmain.grad.<D parameter>,
                                     Dmain.mapping.w_avg [512],
                                     Dmain.synthesis.<layer>.magnitude_ema [1] (after the update);
                                     Dreg.logits [N], Dreg.r1_penalty [N], Dreg.r1_grads [N, 3, R,
                                     R], Dreg.grad.<D parameter>;
             DIR/case.json           every hyper-parameter.
             Each phase from the same state (the weights and buffers as written). fp32, TF32 off,
             on CUDA where there is one (--device). Gmain recomputes each synthesis layer in its
             backward (activation checkpointing; --no-checkpoint keeps the whole graph: at 256 px
             batch 2 that is over 23 GB on a CPU). Unless --skip-crosscheck, checks the gradients
             against central differences in float64 along random directions (Gmain: G's
             parameters; Dmain, Dreg: D's parameters; Dreg.r1_grads: the reals), which costs two
             float64 G forwards and about ten D evaluations. Exit 1 where a value is not finite, a
             gradient of Gmain or Dmain is all zero or a check differs by more than its tolerance
             (the files are written all the same). On a CPU, set OMP_NUM_THREADS to the cores
             (Debian's torch 1.13 uses one thread otherwise); the synthesis' FIR filters dominate
             there (depthwise convs over up-sampled tensors: a 256 px case takes many minutes).
  compare    --reference DIR/reference.safetensors --ours OURS.safetensors [--tolerance 1e-3]
             [--phase Gmain|Dmain|Dreg]: relative L2 and max |ours - ref| of every reference
             tensor (of the phase), grouped by phase and sorted, the worst per phase; a shape that
             differs only by dimensions of size 1 ([N, 1] for [N], [] for [1]) is read as the
             reference's; an all-zero reference tensor (Dreg's gradients of b4.conv.bias and
             b4.fc.bias, 0 in exact arithmetic; b4.out.bias, which has none) is compared by max
             |ours| against the tolerance. Exit 1 where a tensor is missing in ours (named),
             misshapen or over the tolerance; 2 where a file cannot be read or the reference has
             no tensor of the phase. Stdlib only (torch, where installed, makes it faster).
  bench      --resolution 256 --batches 4,8,16 --precision fp32|tf32|mixed --iters K --out JSON
             [--warmup-iters 16] [--device cuda] [--filter-impl gemm] [--modconv unfused]
             [--memory-format channels_last]: PyTorch's training iteration (above) per batch:
             a warm-up, then K iterations (rounded up to whole windows of 16, so that each window
             holds one Dreg) between CUDA events. Row: ms per iteration (the mean over the windows;
             ms_min and ms_max the windows' extremes), img_s = batch * iterations / seconds,
             s_per_5kimg = 5000 / img_s, kimg_per_hour, phase_ms (mean per occurrence), peak
             memory (torch.cuda.max_memory_allocated and _reserved), the settings. Precisions:
             fp32 (TF32 off, as NVlabs' training_loop sets it), tf32 (TF32 on), mixed (NVlabs' own:
             fp16 in the generator's layers whose sampling rate * 2^4 > R and the discriminator's
             blocks of res >= max(2^(log2 R + 1 - 4), 8), i.e. the top 4 resolutions; conv_clamp
             256 as in fp32 (skip none), no loss scaling; parameters float32, cast per use; TF32
             off). With --device cpu it runs on the CPU (perf_counter timing, no memory figures):
             for tests.

Random inputs (write-case), from one torch.Generator seeded --seed, in this order: G's state
(stylegan3_reference.randomize: the same as its write-case with that seed), z_gmain, z_dmain, the
reals, D's parameters in state_dict order. Safetensors files are written with the safetensors
package where it is installed, else with this tool's own writer (the same format).

Usage: python3 tools/stylegan3_train_reference.py summary --resolution 256
       python3 tools/stylegan3_train_reference.py write-case --dir /tmp/sg3t --resolution 16 \\
           --channel-base 1024 --channel-max 64 --d-channel-base 256 --d-channel-max 32 \\
           --batch 2 --seed 1
       python3 tools/stylegan3_train_reference.py compare \\
           --reference /tmp/sg3t/reference.safetensors --ours /tmp/sg3t/ours.safetensors
       python3 tools/stylegan3_train_reference.py bench --resolution 256 --batches 4,8,16 \\
           --precision fp32 --iters 32 --out results/pytorch_sg3_train.json
"""
import argparse
import copy
import datetime
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The generator, its ops and random weights are stylegan3_reference.py's; the safetensors reading
# and the comparison's arithmetic torch_reference_common.py's.
import stylegan3_reference as sg3  # noqa: E402
import torch_reference_common as common  # noqa: E402
from torch_reference_common import (LRELU_GAIN, LRELU_SLOPE, Z_DIM, numel,  # noqa: E402
                                    require_torch)

CONFIG = "t"
IMG_CHANNELS = 3
# networks_stylegan2.Discriminator as stylegan3's train.py builds it.
D_CHANNEL_BASE = 32768
D_CHANNEL_MAX = 512
D_CONV_CLAMP = 256
D_MIN_RESOLUTION = 8
EPILOGUE_RESOLUTION = 4
RESAMPLE_FILTER = (1, 3, 3, 1)
MBSTD_GROUP = 4
MBSTD_CHANNELS = 1
NUM_FP16_RES = 4            # train.py's num_fp16_res, G's and D's ('mixed')
SKIP_GAIN = math.sqrt(0.5)
DEFAULT_D_BIAS_STD = 0.1
# The loss and the optimisers (train.py --cfg stylegan3-t, loss.py, training_loop.py).
DEFAULT_GAMMA = 2.0
D_REG_INTERVAL = 16
W_AVG_BETA = 0.998          # StyleGAN3's MappingNetwork
MAGNITUDE_EMA_IMAGES = 20_000  # magnitude_ema_beta = 0.5 ** (batch / 20,000)
EMA_IMAGES_PER_BATCH_IMAGE = 1000 * 10 / 32  # ema_kimg = batch * 10 / 32
G_LR = 0.0025
D_LR = 0.002
ADAM_BETAS = (0.0, 0.99)
ADAM_EPS = 1e-8
NAN_TO_NUM = {"nan": 0.0, "posinf": 1e5, "neginf": -1e5}
PHASES = ("Gmain", "Dmain", "Dreg")
WINDOW = D_REG_INTERVAL     # bench: iterations per timed window (one Dreg each)
REPORT_IMAGES = 5000        # "time for 5 kimg"
DEFAULT_TOLERANCE = 1e-3
# write-case's central differences, float64, along N(0, 1) directions. Dreg's loss is
# discontinuous in D's parameters (the input gradient's lrelu masks flip where a pre-activation
# crosses 0): a step small enough that none crosses; the other losses are continuous.
FD_EPS = 1e-7
FD_EPS_R1 = 1e-9
FD_TOLERANCE = 1e-3         # |fd - <grad, v>| / |fd| for the fp32 gradients
# compare --exact: a tensor passes where ours is within the tolerance of the float64 gradients,
# or no further from them than EXACT_FACTOR times PyTorch fp32's own distance.
EXACT_FACTOR = 2.0
PRECISIONS = ("fp32", "tf32", "mixed")


# --------------------------------------------------------------------------------------------
# The discriminator as a layer list, the hyper-parameters (no torch)
# --------------------------------------------------------------------------------------------
def check_d_resolution(resolution):
    """ValueError unless the discriminator takes the resolution (a power of two from 8)."""
    if resolution < D_MIN_RESOLUTION or resolution & (resolution - 1):
        raise ValueError(f"the discriminator needs a power of two from {D_MIN_RESOLUTION}, not "
                         f"{resolution}")


def d_channels(res, channel_base=D_CHANNEL_BASE, channel_max=D_CHANNEL_MAX):
    return min(channel_base // res, channel_max)


def d_blocks(resolution, channel_base=D_CHANNEL_BASE, channel_max=D_CHANNEL_MAX):
    """The blocks b{R} ... b8: [{name, resolution, tmp, out, fromrgb}]; ValueError for a bad
    resolution or a channel number below 1."""
    check_d_resolution(resolution)
    if channel_base < 1 or channel_max < 1:
        raise ValueError("the discriminator's channel base and max must be positive")
    out = []
    res = resolution
    while res > EPILOGUE_RESOLUTION:
        tmp = d_channels(res, channel_base, channel_max)
        if tmp < 1:
            raise ValueError(f"channel_base {channel_base} leaves b{res} without channels")
        out.append({"name": f"b{res}", "resolution": res, "tmp": tmp,
                    "out": d_channels(res // 2, channel_base, channel_max),
                    "fromrgb": res == resolution})
        res //= 2
    return out


def d_state_specs(resolution, channel_base=D_CHANNEL_BASE, channel_max=D_CHANNEL_MAX,
                  mbstd_channels=MBSTD_CHANNELS):
    """[(name, shape, trainable)] of NVlabs Discriminator's state_dict, in its order (each
    module's parameters, then its buffers, then its children's)."""
    specs = []
    fir = [len(RESAMPLE_FILTER)] * 2

    def conv(prefix, cin, cout, k, bias=True):
        specs.append((f"{prefix}.weight", [cout, cin, k, k], True))
        if bias:
            specs.append((f"{prefix}.bias", [cout], True))
        specs.append((f"{prefix}.resample_filter", fir, False))

    for b in d_blocks(resolution, channel_base, channel_max):
        p = b["name"]
        specs.append((f"{p}.resample_filter", fir, False))
        if b["fromrgb"]:
            conv(f"{p}.fromrgb", IMG_CHANNELS, b["tmp"], 1)
        conv(f"{p}.conv0", b["tmp"], b["tmp"], 3)
        conv(f"{p}.conv1", b["tmp"], b["out"], 3)
        conv(f"{p}.skip", b["tmp"], b["out"], 1, bias=False)
    c = d_channels(EPILOGUE_RESOLUTION, channel_base, channel_max)
    conv("b4.conv", c + mbstd_channels, c, 3)
    specs.append(("b4.fc.weight", [c, c * EPILOGUE_RESOLUTION ** 2], True))
    specs.append(("b4.fc.bias", [c], True))
    specs.append(("b4.out.weight", [1, c], True))
    specs.append(("b4.out.bias", [1], True))
    return specs


d_param_specs, d_param_count, d_module_param_counts = sg3.param_functions(d_state_specs)


def d_macs(resolution, channel_base=D_CHANNEL_BASE, channel_max=D_CHANNEL_MAX):
    """Multiply-accumulates per image of D's forward: convs at their output size, the FC layers;
    the FIR filters not counted."""
    total = 0
    for b in d_blocks(resolution, channel_base, channel_max):
        r, tmp, out = b["resolution"], b["tmp"], b["out"]
        if b["fromrgb"]:
            total += r * r * IMG_CHANNELS * tmp
        total += r * r * tmp * tmp * 9 + (r // 2) ** 2 * (tmp * out * 9 + tmp * out)
    c = d_channels(EPILOGUE_RESOLUTION, channel_base, channel_max)
    return total + 16 * (c + MBSTD_CHANNELS) * c * 9 + 16 * c * c + c


def mbstd_group(batch, group_size=MBSTD_GROUP):
    """MinibatchStdLayer's group size, min(group_size, batch); ValueError where it does not
    divide the batch (NVlabs' reshape would fail)."""
    g = min(group_size, batch)
    if g < 1 or batch % g:
        raise ValueError(f"the batch ({batch}) must be a multiple of the minibatch-std group "
                         f"min({group_size}, batch) = {g}")
    return g


def magnitude_ema_beta(batch):
    return 0.5 ** (batch / MAGNITUDE_EMA_IMAGES)


def g_ema_beta(batch):
    """training_loop's G_ema beta for train.py's ema_kimg = batch * 10 / 32 (no ramp-up)."""
    return 0.5 ** (batch / (batch * EMA_IMAGES_PER_BATCH_IMAGE))


def lazy_adam(lr, betas, interval):
    """training_loop's lazy regularisation: (lr * r, [beta ** r]) with r = interval /
    (interval + 1)."""
    r = interval / (interval + 1)
    return lr * r, tuple(b ** r for b in betas)


def g_fp16_layers(resolution, channel_base=None, channel_max=None):
    """The synthesis layers NVlabs runs in fp16 (num_fp16_res 4): out sampling rate * 2^4 > R."""
    return [L["name"] for L in sg3.layer_specs(resolution, CONFIG, channel_base, channel_max)
            if L["out_rate"] * 2 ** NUM_FP16_RES > resolution]


def d_fp16_resolution(resolution):
    """Discriminator blocks of res >= this run in fp16 (num_fp16_res 4)."""
    return max(2 ** (int(math.log2(resolution)) + 1 - NUM_FP16_RES), 8)


def model_name(resolution):
    return f"{sg3.model_name(CONFIG, resolution)}_train"


# --------------------------------------------------------------------------------------------
# torch: the discriminator, the phases
# --------------------------------------------------------------------------------------------
def minibatch_std(x, group_size=MBSTD_GROUP, num_channels=MBSTD_CHANNELS):
    """MinibatchStdLayer: x [N, C, H, W] with num_channels extra channels appended. Sample n is in
    group n % (N / G) (G = min(group_size, N)); per group and per channel slice of C /
    num_channels channels, the std over the group's G samples (biased variance + 1e-8, then the
    sqrt) averaged over the slice's channels and the pixels, the same for the group's samples."""
    torch = require_torch()
    n, c, h, w = x.shape
    g, f = mbstd_group(n, group_size), num_channels
    grouped = x.reshape(g, n // g, f, c // f, h, w)  # [G, N / G, F, c, H, W]
    dev = grouped - grouped.mean(dim=0, keepdim=True)
    std = (dev.square().mean(dim=0) + 1e-8).sqrt()   # [N / G, F, c, H, W]
    feature = std.mean(dim=[2, 3, 4]).repeat(g, 1)   # [N, F]: row n is group n % (N / G)
    return torch.cat([x, feature.reshape(n, f, 1, 1).expand(n, f, h, w)], dim=1)


def build_discriminator(resolution, channel_base=D_CHANNEL_BASE, channel_max=D_CHANNEL_MAX,
                        conv_clamp=D_CONV_CLAMP, mbstd_group_size=MBSTD_GROUP,
                        mbstd_num_channels=MBSTD_CHANNELS):
    """An nn.Module laid out as NVlabs' Discriminator (its state_dict is NVlabs', names and
    order), float32 parameters initialised as NVlabs' (weights N(0, 1), biases 0). forward(img)
    with img [N, 3, R, R] -> logits [N, 1] in img's dtype. model.configure(...) sets how it runs:
    filter_impl (stylegan3_reference's upfirdn2d: "ref", "fast", "matrix"), channels_last,
    block_dtypes ({res: dtype}, the blocks to run in another dtype: 'mixed'), clamp_stats (None or
    a list that gets (name, hits, elements) per clamped layer), kink_stats (None or a list that
    gets (name,) + stylegan3_reference.near_kinks per lrelu)."""
    torch = require_torch()
    from types import SimpleNamespace

    from torch import nn

    F = torch.nn.functional
    ops = sg3.torch_ops(torch)
    blocks = d_blocks(resolution, channel_base, channel_max)
    opts = SimpleNamespace(filter_impl="ref", channels_last=False, block_dtypes={},
                           clamp_stats=None, kink_stats=None,
                           conv_clamp=common.clamp_option(conv_clamp))
    FullyConnectedLayer, _ = common.generator_modules(torch, opts, 0)

    def fir():
        f = torch.tensor(RESAMPLE_FILTER, dtype=torch.float32)
        f = f.outer(f)
        return f / f.sum()

    def bias_act(x, b, lrelu, gain, clamp, name):
        """bias_act's reference path: + b, lrelu(0.2), * gain, clamp(+-clamp)."""
        if b is not None:
            x = x + b.to(x.dtype).reshape(1, -1, 1, 1)
        if lrelu:
            if opts.kink_stats is not None:
                opts.kink_stats.append((name,) + sg3.near_kinks(x))
            x = F.leaky_relu(x, LRELU_SLOPE)
        if gain != 1:
            x = x * gain
        if clamp is not None:
            if opts.clamp_stats is not None:
                opts.clamp_stats.append((name, (x.abs() > clamp).sum().item(), x.numel()))
            x = x.clamp(-clamp, clamp)
        return x

    class Conv2dLayer(nn.Module):
        def __init__(self, name, cin, cout, k, bias=True, lrelu=True, down=1, clamped=True):
            super().__init__()
            self.name, self.kernel, self.down, self.lrelu = name, k, down, lrelu
            self.clamped = clamped  # NVlabs: skip has no conv_clamp
            self.weight_gain = 1 / math.sqrt(cin * k * k)
            self.act_gain = LRELU_GAIN if lrelu else 1.0
            self.weight = nn.Parameter(torch.randn([cout, cin, k, k]))
            self.bias = nn.Parameter(torch.zeros([cout])) if bias else None
            self.register_buffer("resample_filter", fir())

        def forward(self, x, gain=1.0):
            w = (self.weight * self.weight_gain).to(x.dtype)
            pad = self.kernel // 2
            if self.down == 1:
                x = F.conv2d(x, w, padding=pad)
            else:  # conv2d_resample: the FIR's padding widened by the down-sampling's
                taps = self.resample_filter.shape[-1]
                lo = pad + (taps - self.down + 1) // 2
                hi = pad + (taps - self.down) // 2
                resample = ops["upfirdn2d"][opts.filter_impl]
                if self.kernel == 1:  # filter and down-sample, then the 1x1 conv
                    x = resample(x, self.resample_filter, down=self.down,
                                 padding=(lo, hi, lo, hi))
                    x = F.conv2d(x, w)
                else:  # filter, then the strided conv
                    x = resample(x, self.resample_filter, padding=(lo, hi, lo, hi))
                    x = F.conv2d(x, w, stride=self.down)
            clamp = opts.conv_clamp * gain if self.clamped and opts.conv_clamp else None
            return bias_act(x, self.bias, self.lrelu, self.act_gain * gain, clamp, self.name)

    class DiscriminatorBlock(nn.Module):
        def __init__(self, b):
            super().__init__()
            self.res, self.has_fromrgb = b["resolution"], b["fromrgb"]
            p, tmp, out = b["name"], b["tmp"], b["out"]
            self.register_buffer("resample_filter", fir())
            if self.has_fromrgb:
                self.fromrgb = Conv2dLayer(f"{p}.fromrgb", IMG_CHANNELS, tmp, 1)
            self.conv0 = Conv2dLayer(f"{p}.conv0", tmp, tmp, 3)
            self.conv1 = Conv2dLayer(f"{p}.conv1", tmp, out, 3, down=2)
            self.skip = Conv2dLayer(f"{p}.skip", tmp, out, 1, bias=False, lrelu=False, down=2,
                                    clamped=False)

        def forward(self, x, img):
            dtype = opts.block_dtypes.get(self.res, img.dtype)
            mf = torch.channels_last if opts.channels_last else torch.contiguous_format
            if self.has_fromrgb:
                x = self.fromrgb(img.to(dtype=dtype, memory_format=mf))
            else:
                x = x.to(dtype=dtype, memory_format=mf)
            y = self.skip(x, gain=SKIP_GAIN)
            x = self.conv1(self.conv0(x), gain=SKIP_GAIN)
            return y + x

    class DiscriminatorEpilogue(nn.Module):
        def __init__(self):
            super().__init__()
            c = d_channels(EPILOGUE_RESOLUTION, channel_base, channel_max)
            self.conv = Conv2dLayer("b4.conv", c + mbstd_num_channels, c, 3)
            self.fc = FullyConnectedLayer(c * EPILOGUE_RESOLUTION ** 2, c, "lrelu")
            self.fc.kink_name = "b4.fc"
            self.out = FullyConnectedLayer(c, 1)

        def forward(self, x, dtype):
            x = x.to(dtype=dtype, memory_format=torch.contiguous_format)
            if mbstd_num_channels > 0:
                x = minibatch_std(x, mbstd_group_size, mbstd_num_channels)
            x = self.conv(x)
            return self.out(self.fc(x.flatten(1)))

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.resolution, self.channel_base, self.channel_max = (resolution, channel_base,
                                                                    channel_max)
            self.mbstd_num_channels = mbstd_num_channels
            self.opts = opts
            self.block_names = []
            for b in blocks:
                setattr(self, b["name"], DiscriminatorBlock(b))
                self.block_names.append(b["name"])
            self.b4 = DiscriminatorEpilogue()

        def configure(self, **kw):
            for k, v in kw.items():
                if not hasattr(opts, k):
                    raise AttributeError(f"no option {k}")
                setattr(opts, k, v)
            return self

        def forward(self, img):
            x = None
            for name in self.block_names:
                x = getattr(self, name)(x, img)
            return self.b4(x, img.dtype)  # the epilogue in the image's dtype (float32)

    return Discriminator()


def check_discriminator(model):
    """AssertionError unless the model's state_dict is d_state_specs' (names, shapes, order) and
    its parameter count d_param_count's."""
    a = (model.resolution, model.channel_base, model.channel_max, model.mbstd_num_channels)
    common.check_state_dict(model, d_param_specs(*a, buffers=True), d_param_count(*a),
                            what="discriminator's layer list")


def randomize_discriminator(model, generator, bias_std=DEFAULT_D_BIAS_STD):
    """Weights N(0, 1) (NVlabs' init), biases N(0, bias_std) (0: NVlabs' zeros), drawn from the
    generator in state_dict order; the FIR buffers kept."""
    torch = require_torch()
    randn = common.normal_draws(torch, generator)

    def draw(name, last, t):
        if last == "resample_filter":
            return None
        if last == "weight":
            return randn(t.shape)
        if last == "bias":
            return randn(t.shape, bias_std) if bias_std > 0 else torch.zeros(t.shape)
        raise AssertionError(f"no random draw for {name}")

    common.fill_state(model, draw)


class EmaUpdates:
    """update_emas=True for stylegan3_reference's generator, by hooks (its forward has no such
    switch): while `enabled`, every synthesis layer's magnitude_ema is updated from its input
    before the layer reads it (a forward pre-hook), and the mapping's w_avg from its output."""

    def __init__(self, torch, model, batch):
        self.torch, self.enabled = torch, False
        self.beta = magnitude_ema_beta(batch)
        self.handles = [getattr(model.synthesis, name).register_forward_pre_hook(self.layer)
                        for name in model.synthesis.layer_names]
        self.handles.append(model.mapping.register_forward_hook(self.mapping))

    def layer(self, module, inputs):
        if self.enabled:
            with self.torch.no_grad():
                cur = inputs[0].detach().to(self.torch.float32).square().mean()
                module.magnitude_ema.copy_(cur.lerp(module.magnitude_ema, self.beta))

    def mapping(self, module, inputs, output):
        if self.enabled:
            with self.torch.no_grad():
                module.w_avg.copy_(output.detach().mean(dim=0).lerp(module.w_avg, W_AVG_BETA))

    def remove(self):
        for h in self.handles:
            h.remove()


def ema_buffers(model):
    """{name: tensor} of the buffers Dmain updates: mapping.w_avg and every magnitude_ema."""
    return {k: v for k, v in model.state_dict().items()
            if k == "mapping.w_avg" or k.endswith(".magnitude_ema")}


def g_mixed_precision(torch, model, resolution, channel_base=None, channel_max=None):
    """NVlabs' mixed precision for stylegan3_reference's generator, by hooks: each synthesis
    layer sets the model's dtype option before it runs (fp16 for g_fp16_layers, else fp32)."""
    fp16 = set(g_fp16_layers(resolution, channel_base, channel_max))
    handles = []
    for name in model.synthesis.layer_names:
        dtype = torch.float16 if name in fp16 else torch.float32

        def hook(module, inputs, dtype=dtype):
            model.opts.dtype = dtype

        handles.append(getattr(model.synthesis, name).register_forward_pre_hook(hook))
    return handles


def checkpoint_layers(torch, model):
    """Activation checkpointing of every synthesis layer (torch.utils.checkpoint, non-reentrant):
    the backward keeps only the layers' inputs and recomputes each layer's forward (the same ops,
    the same values), so that Gmain fits a CPU's memory at 256 px. Returns a function that undoes
    it. The forward pre-hooks still run once per call (the recomputation calls forward)."""
    from torch.utils import checkpoint

    layers = [getattr(model.synthesis, name) for name in model.synthesis.layer_names]
    for layer in layers:
        def forward(x, w, plain=layer.forward):
            return checkpoint.checkpoint(plain, x, w, use_reentrant=False)

        layer.forward = forward  # an instance attribute over the class's forward

    def undo():
        for layer in layers:
            del layer.forward
    return undo


def gmain(torch, G, D, z):
    """Gmain: backward of softplus(-D(G(z))).mean() into G's parameters (D's frozen). Returns
    (loss, logits [N]), detached."""
    G.requires_grad_(True)
    D.requires_grad_(False)
    logits = D(G(z)).flatten()
    loss = torch.nn.functional.softplus(-logits).mean()
    loss.backward()
    G.requires_grad_(False)
    return loss.detach(), logits.detach()


def dmain(torch, G, D, z, reals, emas):
    """Dmain: G(z) with the EMA updates (emas, an EmaUpdates) and no graph, then
    softplus(D(img)).mean() and softplus(-D(reals)).mean(), each backward into D's parameters.
    Returns {loss_gen, loss_real, logits_gen, logits_real, image}, detached."""
    F = torch.nn.functional
    G.requires_grad_(False)
    D.requires_grad_(True)
    emas.enabled = True
    try:
        img = G(z)
    finally:
        emas.enabled = False
    logits_gen = D(img).flatten()
    loss_gen = F.softplus(logits_gen).mean()
    loss_gen.backward()
    logits_real = D(reals.detach()).flatten()
    loss_real = F.softplus(-logits_real).mean()
    loss_real.backward()
    D.requires_grad_(False)
    return {"loss_gen": loss_gen.detach(), "loss_real": loss_real.detach(),
            "logits_gen": logits_gen.detach(), "logits_real": logits_real.detach(),
            "image": img.detach()}


def dreg_terms(torch, D, reals, gamma, gain=D_REG_INTERVAL, create_graph=True):
    """The R1 terms: (loss = (r1_penalty * gamma / 2).mean() * gain, logits [N], r1_penalty [N],
    r1_grads = d logits.sum() / d reals); with create_graph=False only the values (also under
    torch.no_grad)."""
    with torch.enable_grad():
        x = reals.detach().requires_grad_(True)
        logits = D(x).flatten()
        (g,) = torch.autograd.grad(logits.sum(), [x], create_graph=create_graph)
        r1 = g.square().sum(dim=[1, 2, 3])
        return (r1 * (gamma / 2)).mean() * gain, logits, r1, g


def dreg(torch, D, reals, gamma):
    """Dreg: backward of dreg_terms' loss (the double backward) into D's parameters. Returns
    {loss, logits, r1_penalty, r1_grads}, detached."""
    D.requires_grad_(True)
    loss, logits, r1, g = dreg_terms(torch, D, reals, gamma)
    loss.backward()
    D.requires_grad_(False)
    return {"loss": loss.detach(), "logits": logits.detach(), "r1_penalty": r1.detach(),
            "r1_grads": g.detach()}


def take_grads(module, prefix, none=None):
    """{prefix + name: grad} of every parameter (a copy; the .grad fields cleared). A parameter
    the loss does not reach has no gradient (None in torch and NVlabs, whose training_loop then
    leaves it out of the Adam step: Dreg's b4.out.bias): zeros here, its name appended to
    `none`."""
    out = {}
    for name, p in module.named_parameters():
        if p.grad is None:
            out[prefix + name] = p.detach().new_zeros(p.shape)
            if none is not None:
                none.append(prefix + name)
        else:
            out[prefix + name] = p.grad.detach().clone()
        p.grad = None
    return out


# --------------------------------------------------------------------------------------------
# write-case
# --------------------------------------------------------------------------------------------
def save_tensors(path, tensors, metadata):
    """A safetensors file of float32 tensors: safetensors.torch.save_file where it imports, else
    the same format written here (header sorted by name, 8-byte aligned, little-endian data)."""
    torch = require_torch()
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in tensors.items()}
    try:
        from safetensors.torch import save_file
    except ImportError:
        save_file = None
    if save_file is not None:
        save_file(tensors, path, metadata=metadata)
        return
    import numpy as np

    header, blobs, offset = {"__metadata__": dict(metadata)}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        data = t.numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(np.array([len(text)], dtype="<u8").tobytes())
        f.write(text)
        for b in blobs:
            f.write(b)


def case_fingerprint(torch, dicts):
    """SHA-256 (hex, 16 digits) over the case's weights and inputs, every tensor by name in
    float32: the files of one write-case carry it, so that compare --exact can tell a float64
    file of another case."""
    import hashlib

    h = hashlib.sha256()
    for d in dicts:
        for name in sorted(d):
            t = d[name].detach().to("cpu", torch.float32).contiguous()
            h.update(name.encode() + b"\0" + str(list(t.shape)).encode())
            h.update(t.numpy().tobytes())
    return h.hexdigest()[:16]


# What must agree between reference.safetensors and reference64.safetensors (compare --exact).
CASE_KEYS = ("network", "resolution", "batch", "seed", "gamma", "case")


def other_case(ref_meta, exact_meta):
    """The first of CASE_KEYS on which two files' metadata disagree, as a message; None where
    none does (a key either file lacks is not compared)."""
    for k in CASE_KEYS:
        if k in ref_meta and k in exact_meta and ref_meta[k] != exact_meta[k]:
            return f"its {k} is {exact_meta[k]}, the reference's {ref_meta[k]}"
    return None


def check_case_args(args):
    """The case's and the bench's shared checks: G's and D's geometry, --gamma; returns G's
    config (stylegan3_reference.config_of)."""
    cfg = sg3.config_of(CONFIG, args.channel_base, args.channel_max)
    sg3.check_resolution(args.resolution)
    d_blocks(args.resolution, args.d_channel_base, args.d_channel_max)
    if args.mapping_layers < 1:
        raise ValueError("--mapping-layers must be at least 1")
    if args.gamma < 0:
        raise ValueError("--gamma must not be negative")
    if args.mbstd_group < 1:
        raise ValueError("--mbstd-group must be at least 1")
    return cfg


def build_pair(args):
    """(G, D) on the CPU, float32, NVlabs' construction (the torch seed's draws)."""
    G = sg3.build_model(args.resolution, CONFIG, args.channel_base, args.channel_max,
                        args.mapping_layers, args.conv_clamp)
    sg3.check_model(G)
    D = build_discriminator(args.resolution, args.d_channel_base, args.d_channel_max,
                            args.d_conv_clamp, args.mbstd_group)
    check_discriminator(D)
    return G, D


def float64_pair(torch, args, G, D, device):
    """Copies of G and D in float64 on `device`, with G's and D's weights and buffers."""
    G64 = sg3.build_model(args.resolution, CONFIG, args.channel_base, args.channel_max,
                          args.mapping_layers, args.conv_clamp)
    G64.load_state_dict(G.state_dict())
    G64 = G64.to(device).double().configure(dtype=torch.float64, float_dtype=torch.float64,
                                            filter_impl=args.filter_impl)
    D64 = build_discriminator(args.resolution, args.d_channel_base, args.d_channel_max,
                              args.d_conv_clamp, args.mbstd_group)
    D64.load_state_dict(D.state_dict())
    D64 = D64.to(device).double().configure(filter_impl=args.filter_impl)
    return G64, D64


def g64_image(G64, z):
    """G64's image in float64 (SynthesisNetwork.forward returns float32: its layers run here one
    by one instead)."""
    syn = G64.synthesis
    w = G64.mapping(z)
    img = syn.input(w)
    for name in syn.layer_names:
        img = getattr(syn, name)(img, w)
    return img * sg3.OUTPUT_SCALE


def float64_gradients(torch, args, G, D, inputs, dm_image, checkpoint):
    """Every phase's gradients again, in float64 on the same weights and inputs (Dmain on the
    fp32 phase's generated image, as NVlabs' Dmain reads G's output detached): what
    reference64.safetensors holds, so that compare --exact can say how far PyTorch's fp32
    gradients themselves are from exact, tensor by tensor. Returns (the gradients, the lrelu
    inputs' near_kinks per pass: {pass: [(layer, count, min |x| / rms, channels)]}, the layers
    recomputed by the checkpoints counted once)."""
    F = torch.nn.functional
    G64, D64 = float64_pair(torch, args, G, D, inputs["reals"].device)
    x64 = {k: v.double() for k, v in inputs.items()}
    out, kinks = {}, {}

    def record(what, model):
        """Starts recording `model`'s near_kinks; the function returned stops it."""
        stats = []
        model.configure(kink_stats=stats)

        def done():
            model.configure(kink_stats=None)
            first = {}
            for row in stats:
                first.setdefault(row[0], row)
            kinks[what] = list(first.values())
        return done

    G64.requires_grad_(True)
    D64.requires_grad_(False)
    undo = checkpoint_layers(torch, G64) if checkpoint else (lambda: None)
    g_done, d_done = record("Gmain: G", G64), record("Gmain: D", D64)
    F.softplus(-D64(g64_image(G64, x64["z_gmain"])).flatten()).mean().backward()
    g_done()
    d_done()
    undo()
    G64.requires_grad_(False)
    out.update(take_grads(G64, "Gmain.grad."))
    del G64
    D64.requires_grad_(True)
    d_done = record("Dmain: D on the generated images", D64)
    F.softplus(D64(dm_image.double()).flatten()).mean().backward()
    d_done()
    d_done = record("Dmain: D on the reals", D64)
    F.softplus(-D64(x64["reals"]).flatten()).mean().backward()
    d_done()
    out.update(take_grads(D64, "Dmain.grad."))
    dr = dreg(torch, D64, x64["reals"], args.gamma)
    out["Dreg.r1_grads"] = dr["r1_grads"]
    out.update(take_grads(D64, "Dreg.grad."))
    return {k: v.float().contiguous().cpu() for k, v in out.items()}, kinks


def directional_checks(torch, args, G, D, inputs, dm_image, ref):
    """Central differences in float64 against the fp32 gradients, along N(0, 1) directions:
    [(what, fd, <grad, v>, |fd - <grad, v>| / |fd|)]."""
    F = torch.nn.functional
    device = inputs["reals"].device
    gen = torch.Generator().manual_seed(args.seed + 1000)
    G64, D64 = float64_pair(torch, args, G, D, device)
    x64 = {k: v.double() for k, v in inputs.items()}
    out = []

    def along(module, prefix, loss_of, what, eps=FD_EPS):
        params = list(module.named_parameters())
        vs = [torch.randn(p.shape, generator=gen, dtype=torch.float64).to(device)
              for _, p in params]
        analytic = sum((ref[prefix + n].to(device, torch.float64) * v).sum().item()
                       for (n, _), v in zip(params, vs))
        keep = [p.detach().clone() for _, p in params]
        values = []
        with torch.no_grad():
            for sign in (1, -1):
                for (_, p), v, k in zip(params, vs, keep):
                    p.copy_(k + sign * eps * v)
                values.append(loss_of())
            for (_, p), k in zip(params, keep):
                p.copy_(k)
        fd = (values[0] - values[1]) / (2 * eps)
        out.append((what, fd, analytic, abs(fd - analytic) / max(abs(fd), 1e-300)))

    def gmain_loss():
        return F.softplus(-D64(g64_image(G64, x64["z_gmain"])).flatten()).mean().item()

    def dmain_loss():
        img = dm_image.double()
        return (F.softplus(D64(img).flatten()).mean()
                + F.softplus(-D64(x64["reals"]).flatten()).mean()).item()

    def dreg_loss():
        return dreg_terms(torch, D64, x64["reals"], args.gamma, create_graph=False)[0].item()

    along(G64, "Gmain.grad.", gmain_loss, "Gmain: G's parameters")
    along(D64, "Dmain.grad.", dmain_loss, "Dmain: D's parameters")
    along(D64, "Dreg.grad.", dreg_loss, "Dreg (double backward): D's parameters", FD_EPS_R1)
    u = torch.randn(x64["reals"].shape, generator=gen, dtype=torch.float64).to(device)
    with torch.no_grad():
        s = [D64(x64["reals"] + sign * FD_EPS * u).sum().item() for sign in (1, -1)]
    fd = (s[0] - s[1]) / (2 * FD_EPS)
    analytic = (ref["Dreg.r1_grads"].to(device, torch.float64) * u).sum().item()
    out.append(("Dreg.r1_grads: the reals", fd, analytic,
                abs(fd - analytic) / max(abs(fd), 1e-300)))
    return out


def write_case(args):
    """The write-case subcommand: the weights, the inputs, each phase's reference and case.json.
    Returns the exit status."""
    torch = require_torch()
    cfg = check_case_args(args)
    common.check_batch(args.batch)
    group = mbstd_group(args.batch, args.mbstd_group)
    if args.d_bias_std < 0:
        raise ValueError("--d-bias-std must not be negative")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device")
    device = torch.device(args.device if args.device != "auto" else
                          "cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    t_start = time.perf_counter()
    R, N = args.resolution, args.batch

    torch.manual_seed(args.seed)  # the construction's own draws, all overwritten below
    G, D = build_pair(args)
    gen = torch.Generator().manual_seed(args.seed)
    sg3.randomize(G, gen)
    inputs = {"z_gmain": torch.randn(N, Z_DIM, generator=gen),
              "z_dmain": torch.randn(N, Z_DIM, generator=gen),
              "reals": torch.rand([N, IMG_CHANNELS, R, R], generator=gen) * 2 - 1}
    randomize_discriminator(D, gen, args.d_bias_std)
    G, D = G.to(device), D.to(device)
    G.configure(filter_impl=args.filter_impl)
    D.configure(filter_impl=args.filter_impl)
    x = {k: v.to(device) for k, v in inputs.items()}
    calibrated = sg3.calibrate_clamp(G, x["z_gmain"]) if G.opts.conv_clamp else None

    name = sg3.model_name(CONFIG, R)
    g_params = sg3.param_count(R, CONFIG, args.channel_base, args.channel_max,
                               mapping_layers=args.mapping_layers)
    d_params = d_param_count(R, args.d_channel_base, args.d_channel_max)
    mag_beta = magnitude_ema_beta(N)
    case = {
        "network": name, "tool": "tools/stylegan3_train_reference.py write-case",
        "resolution": R, "batch": N, "seed": args.seed, "dtype": "float32", "tf32": False,
        "device": str(device), "torch": torch.__version__, "filter_impl": args.filter_impl,
        "gamma": args.gamma, "r1_gain": D_REG_INTERVAL, "d_reg_interval": D_REG_INTERVAL,
        "mbstd_group_size": args.mbstd_group, "mbstd_group": group,
        "mbstd_num_channels": MBSTD_CHANNELS, "magnitude_ema_beta": mag_beta,
        "w_avg_beta": W_AVG_BETA, "truncation_psi": 1,
        "generator": {"config": CONFIG, "channel_base": cfg["channel_base"],
                      "channel_max": cfg["channel_max"], "mapping_layers": args.mapping_layers,
                      "conv_clamp": G.opts.conv_clamp, "parameters": g_params,
                      "calibrate_clamp": None if calibrated is None else
                      {"layer": calibrated[0], "input_rms": calibrated[1],
                       "magnitude_ema": calibrated[2]}},
        "discriminator": {"architecture": "resnet", "channel_base": args.d_channel_base,
                          "channel_max": args.d_channel_max,
                          "conv_clamp": D.opts.conv_clamp, "skip_conv_clamp": None,
                          "resample_filter": list(RESAMPLE_FILTER), "parameters": d_params,
                          "bias_std": args.d_bias_std,
                          "blocks": d_blocks(R, args.d_channel_base, args.d_channel_max)},
        "adam": {"g_lr": G_LR, "d_lr": D_LR, "betas": list(ADAM_BETAS), "eps": ADAM_EPS,
                 "d_lazy": list(lazy_adam(D_LR, ADAM_BETAS, D_REG_INTERVAL))},
        "phases": {
            "Gmain": "softplus(-D(G(z_gmain))).mean(), gradients of G's parameters",
            "Dmain": "G(z_dmain) with w_avg and magnitude_ema updated; softplus(D(img)).mean() "
                     "+ softplus(-D(reals)).mean(), gradients of D's parameters",
            "Dreg": "(r1_penalty * gamma / 2).mean() * 16, r1_penalty = |d D(reals).sum() / "
                    "d reals|^2 per image, gradients of D's parameters"},
        "files": {"g": "g.safetensors", "d": "d.safetensors", "inputs": "inputs.safetensors",
                  "reference": "reference.safetensors"},
    }
    meta = {"network": name, "resolution": str(R), "batch": str(N), "seed": str(args.seed),
            "gamma": repr(args.gamma), "torch": torch.__version__,
            "tool": "tools/stylegan3_train_reference.py write-case",
            "case": case_fingerprint(torch, [G.state_dict(), D.state_dict(), inputs])}
    os.makedirs(args.dir, exist_ok=True)
    save_tensors(os.path.join(args.dir, "g.safetensors"), G.state_dict(), meta)
    save_tensors(os.path.join(args.dir, "d.safetensors"),
                 {k: v for k, v in D.state_dict().items() if not k.endswith("resample_filter")},
                 meta)
    save_tensors(os.path.join(args.dir, "inputs.safetensors"), inputs, meta)

    # The phases, each from the state as written (Dmain's buffer updates undone after it).
    ref, times, g_stats, d_stats, no_gradient = {}, {}, [], [], []
    t = time.perf_counter()
    G.configure(clamp_stats=g_stats)
    D.configure(clamp_stats=d_stats)
    undo = (lambda: None) if args.no_checkpoint else checkpoint_layers(torch, G)
    loss, logits = gmain(torch, G, D, x["z_gmain"])
    undo()
    G.configure(clamp_stats=None)
    D.configure(clamp_stats=None)
    del g_stats[len(G.synthesis.layer_names):]  # the checkpoints' recomputations
    ref.update({"Gmain.loss": loss.reshape(1), "Gmain.logits": logits})
    ref.update(take_grads(G, "Gmain.grad.", no_gradient))
    for p in D.parameters():
        p.grad = None
    times["Gmain"] = time.perf_counter() - t

    t = time.perf_counter()
    before = {k: v.clone() for k, v in ema_buffers(G).items()}
    emas = EmaUpdates(torch, G, N)
    dm = dmain(torch, G, D, x["z_dmain"], x["reals"], emas)
    emas.remove()
    ref.update({"Dmain.loss_gen": dm["loss_gen"].reshape(1),
                "Dmain.loss_real": dm["loss_real"].reshape(1),
                "Dmain.logits_gen": dm["logits_gen"], "Dmain.logits_real": dm["logits_real"]})
    ref.update(take_grads(D, "Dmain.grad.", no_gradient))
    after = ema_buffers(G)
    for k, v in after.items():
        ref[f"Dmain.{k}"] = v.detach().clone().reshape(-1)
    with torch.no_grad():
        for k, v in after.items():
            v.copy_(before[k])
    times["Dmain"] = time.perf_counter() - t

    t = time.perf_counter()
    D.configure(clamp_stats=d_stats)
    dr = dreg(torch, D, x["reals"], args.gamma)
    D.configure(clamp_stats=None)
    ref.update({"Dreg.logits": dr["logits"], "Dreg.r1_penalty": dr["r1_penalty"],
                "Dreg.r1_grads": dr["r1_grads"]})
    ref.update(take_grads(D, "Dreg.grad.", no_gradient))
    times["Dreg"] = time.perf_counter() - t
    ref = {k: v.float().contiguous().cpu() for k, v in ref.items()}
    case["no_gradient"] = no_gradient  # zeros in the reference; NVlabs' Adam step skips them
    # NVlabs' CUDA bias_act has no second-order term for lrelu (d_b None): Dreg leaves every
    # bias after mbstd without a gradient there, so its Adam step skips them too.
    case["no_gradient_nvlabs_cuda"] = [
        k for k, v in ref.items() if k.startswith("Dreg.grad.") and not bool(v.ne(0).any())]
    save_tensors(os.path.join(args.dir, "reference.safetensors"), ref, meta)
    if args.float64:
        t = time.perf_counter()
        ref64, kinks = float64_gradients(torch, args, G, D, x, dm["image"],
                                         not args.no_checkpoint)
        save_tensors(os.path.join(args.dir, "reference64.safetensors"), ref64, meta)
        case["files"]["reference64"] = "reference64.safetensors"
        case["float64_near_kinks"] = {
            "margin_of_rms": sg3.KINK_MARGIN,
            "passes": {what: [{"layer": r[0], "elements": r[1], "min_of_rms": r[2],
                               "channels": r[3]} for r in rows]
                       for what, rows in kinks.items()}}
        times["float64"] = time.perf_counter() - t
    with open(os.path.join(args.dir, "case.json"), "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")

    status = 0
    print(f"{name} training step: G {g_params:,} + D {d_params:,} parameters, batch {N} "
          f"(mbstd group {group}), seed {args.seed}, gamma {args.gamma:g}, fp32 (TF32 off) on "
          f"{device}, filters {args.filter_impl}; files in {args.dir}")

    def vec(t):
        return ", ".join(f"{v:.4g}" for v in t.flatten().tolist()[:8]) + (
            ", ..." if t.numel() > 8 else "")

    def grad_line(prefix):
        gs = {k: v for k, v in ref.items() if k.startswith(prefix)}
        total = math.sqrt(sum(v.double().square().sum().item() for v in gs.values()))
        return f"{len(gs)} gradients, |grad| {total:.4g}"

    print(f"  Gmain: loss {ref['Gmain.loss'].item():.6g}, logits [{vec(ref['Gmain.logits'])}]; "
          f"{grad_line('Gmain.grad.')}")
    moved = sum(1 for k in after if not torch.equal(ref[f'Dmain.{k}'],
                                                      before[k].cpu().float().reshape(-1)))
    print(f"  Dmain: loss_gen {ref['Dmain.loss_gen'].item():.6g}, loss_real "
          f"{ref['Dmain.loss_real'].item():.6g}, logits_gen [{vec(ref['Dmain.logits_gen'])}], "
          f"logits_real [{vec(ref['Dmain.logits_real'])}]; {grad_line('Dmain.grad.')}; "
          f"{moved} of {len(after)} EMA buffers moved (magnitude_ema beta {mag_beta:.8f}, "
          f"w_avg beta {W_AVG_BETA})")
    print(f"  Dreg: loss {dr['loss'].item():.6g}, r1_penalty [{vec(ref['Dreg.r1_penalty'])}], "
          f"logits [{vec(ref['Dreg.logits'])}]; {grad_line('Dreg.grad.')}")
    for what, stats in (("G", g_stats), ("D", d_stats)):
        hits, total = sum(s[1] for s in stats), sum(s[2] for s in stats)
        print(f"  clamp in {what} (Gmain{', Dreg' if what == 'D' else ''}): {hits:,} of "
              f"{total:,} elements beyond it ({hits / max(total, 1):.3%})")
    if no_gradient:
        print(f"  no gradient (zeros in the reference; NVlabs' Adam step leaves them out): "
              f"{', '.join(no_gradient)}")
    if calibrated:
        print(f"  (stylegan3_reference.calibrate_clamp on z_gmain: {calibrated[0]}'s "
              f"magnitude_ema {calibrated[2]:.3g})")
    bad = [k for k, v in ref.items() if not bool(torch.isfinite(v).all())]
    zero = [k for k, v in ref.items() if ".grad." in k and not bool(v.ne(0).any())]
    # Dreg's loss depends on the parameters after the last smooth op (mbstd) only through the
    # lrelu masks: their gradients are 0 in exact arithmetic (torch gives exact zeros).
    degenerate = [k for k in zero if k not in no_gradient and not k.startswith("Dreg.")]
    if bad:
        status = 1
        print(f"error: not finite: {', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}",
              file=sys.stderr)
    if degenerate:
        status = 1
        print(f"error: all-zero gradients (degenerate case): {', '.join(degenerate[:5])}"
              f"{' ...' if len(degenerate) > 5 else ''}", file=sys.stderr)
    zero_r1 = [k for k in zero if k.startswith("Dreg.") and k not in no_gradient]
    if zero_r1:
        print(f"  zero gradients of Dreg (piecewise linear after mbstd; None with NVlabs' CUDA "
              f"bias_act): {', '.join(zero_r1)}")
    t = time.perf_counter()
    if not args.skip_crosscheck:
        for what, fd, analytic, err in directional_checks(torch, args, G, D, x, dm["image"],
                                                           ref):
            good = math.isfinite(err) and err <= FD_TOLERANCE
            # Dreg's are informational from 64 px: D is piecewise linear (lrelu), and at 256 px
            # some of its 246M pre-activations cross 0 inside the step (call 42: 57% and 1.2e-3
            # off, while Gmain's and Dmain's agreed to 1.2e-4 and 3e-6). At 16 px (the tests)
            # they still fail the case. --float64 gives Dreg's rounding against float64.
            informational = what.startswith("Dreg") and args.resolution >= 64
            if not good and not informational:
                status = 1
                print(f"error: {what}: the gradient differs from the central difference by "
                      f"{err:.3e} (more than {FD_TOLERANCE:g})", file=sys.stderr)
            flag = "" if good else "  (informational: lrelu kinks)" if informational else \
                "  <- differs"
            print(f"  cross-check, {what}: <grad, v> {analytic:.8g}, central difference "
                  f"(float64) {fd:.8g}, rel {err:.2e}{flag}")
    t_end = time.perf_counter()
    if args.float64:
        for phase in PHASES:
            errs = sorted(((math.sqrt(float((ref[k].double() - v.double()).square().sum()) /
                                      max(float(v.double().square().sum()), 1e-300)), k)
                           for k, v in ref64.items() if phase_of(k) == phase), reverse=True)
            print(f"  float64 {phase}: {len(errs)} gradients; the fp32 reference's furthest from "
                  f"float64: " + ", ".join(f"{k} {e:.2e}" for e, k in errs[:3]))
        # Where an fp32 run may take the other side of an lrelu's kink (compare names the
        # element that carries a failing tensor's error; a bias's channel should be here).
        for what, rows in kinks.items():
            near = [r for r in rows if r[1]]
            print(f"  float64 lrelu inputs within {sg3.KINK_MARGIN:g} of their RMS of 0, {what}: "
                  + (", ".join(f"{r[0]} {r[1]} (min {r[2]:.1e}, channels "
                               f"{' '.join(map(str, r[3]))})" for r in near) or "none"))
    print(f"  time: Gmain {times['Gmain']:.1f} s, Dmain {times['Dmain']:.1f} s, Dreg "
          f"{times['Dreg']:.1f} s" + (f", float64 {times['float64']:.1f} s" if args.float64
                                      else "") + f"; {t - t_start:.1f} s to the files"
          + ("" if args.skip_crosscheck else f", {t_end - t:.1f} s for the cross-checks"))
    return status


# --------------------------------------------------------------------------------------------
# compare (stdlib)
# --------------------------------------------------------------------------------------------
def phase_of(name):
    return name.split(".", 1)[0]


def squeezed(shape):
    return [d for d in shape if d != 1]


def compare(args):
    """The compare subcommand. Returns the exit status."""
    loaded = common.read_pair(args.reference, args.ours)
    if loaded is None:
        return 2
    ref, ours = loaded["reference"], loaded["ours"]
    exact = {}
    if args.exact:
        try:
            tensors, exact_meta = common.read_safetensors(args.exact)
            ref_meta = common.read_metadata(args.reference)
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"error: cannot read exact {args.exact}: {e}", file=sys.stderr)
            return 2
        why = other_case(ref_meta, exact_meta)
        if why:
            print(f"error: {args.exact} is from another case than {args.reference}: {why}",
                  file=sys.stderr)
            return 2
        exact = {k: (t.shape, t) for k, t in tensors.items()}
    names = sorted((n for n in ref if args.phase is None or phase_of(n) == args.phase),
                   key=lambda n: (PHASES.index(phase_of(n)) if phase_of(n) in PHASES
                                  else len(PHASES), n))
    if not names:
        print(f"error: the reference has no tensor{' of ' + args.phase if args.phase else ''}",
              file=sys.stderr)
        return 2
    missing = [n for n in names if n not in ours]
    misshapen, ours_as_ref = [], {}
    for n in names:
        if n not in ours:
            continue
        (rs, _), (os_, values) = ref[n], ours[n]
        if list(rs) == list(os_):
            ours_as_ref[n] = ours[n]
        elif numel(rs) == numel(os_) and squeezed(rs) == squeezed(os_):
            ours_as_ref[n] = (list(rs), values)
        else:
            misshapen.append(f"{n}: shape {list(os_)} in ours, {list(rs)} in the reference")
    rows = []
    for n in names:
        if n not in ours_as_ref:
            continue
        sum_sq_diff, sum_sq_ref, max_abs = common.raw_stats(ref[n][1], ours_as_ref[n][1])
        if not math.isfinite(max_abs):
            rel, ok = math.inf, False  # a NaN or inf in ours fails
        elif sum_sq_ref > 0:
            rel = math.sqrt(sum_sq_diff / sum_sq_ref)
            ok = rel <= args.tolerance
        else:  # an all-zero reference (Dreg's gradients after mbstd): max |ours| instead
            rel = 0.0 if sum_sq_diff == 0 else math.inf
            ok = max_abs <= args.tolerance
        row = {"name": n, "shape": list(ref[n][0]), "rel_l2": rel, "max_abs": max_abs,
               "ok": ok, "zero_ref": sum_sq_ref == 0}
        if n in exact and numel(exact[n][0]) == numel(ref[n][0]) and math.isfinite(max_abs):
            # Each against float64: ours within the tolerance, or no further than EXACT_FACTOR
            # times PyTorch fp32's own distance (a gradient fp32 cannot carry to 1e-3 there).
            d_ours, s_exact, _ = common.raw_stats(exact[n][1], ours_as_ref[n][1])
            if s_exact > 0:  # an all-zero float64 gradient gives no distance
                d_ref, _, _ = common.raw_stats(exact[n][1], ref[n][1])
                e_ours, e_ref = math.sqrt(d_ours / s_exact), math.sqrt(d_ref / s_exact)
                # Never worse than all zeros (e_ours 1), whatever fp32's own distance.
                row.update(exact_ours=e_ours, exact_ref=e_ref,
                           ok=ok or (e_ours < 1 and
                                     e_ours <= max(args.tolerance, EXACT_FACTOR * e_ref)))
                if not row["ok"]:  # where ours' error sits: one element, or spread
                    i, share = common.largest_error(exact[n][1], ours_as_ref[n][1])
                    row.update(largest_at=common.unravel(i, ref[n][0]), largest_share=share)
        rows.append(row)
    by_phase = {}
    for r in rows:
        by_phase.setdefault(phase_of(r["name"]), []).append(r)
    for phase, prs in by_phase.items():
        print(f"[{phase}]")
        for r in prs:
            note = " (zero reference: max_abs against the tolerance)" if r["zero_ref"] else ""
            if "exact_ours" in r:
                note += (f"; vs float64: ours {r['exact_ours']:.3e}, the reference "
                         f"{r['exact_ref']:.3e}")
            if "largest_at" in r:
                note += (f"; {r['largest_share']:.0%} of ours' squared error from float64 in "
                         f"element {r['largest_at']}")
            print(f"  {r['name']} {r['shape']}: rel_l2 {r['rel_l2']:.3e}, max_abs "
                  f"{r['max_abs']:.3e}{note}  {'ok' if r['ok'] else 'FAIL'}")
    for phase, prs in by_phase.items():
        worst = max(prs, key=lambda r: (not r["ok"], r["rel_l2"] if not r["zero_ref"] else 0))
        print(f"worst in {phase}: {worst['name']} rel_l2 {worst['rel_l2']:.3e}, max_abs "
              f"{worst['max_abs']:.3e} ({sum(not r['ok'] for r in prs)} of {len(prs)} over "
              f"the tolerance)")
    for m in misshapen:
        print(f"error: {m}", file=sys.stderr)
    if missing:
        print(f"missing in ours ({len(missing)} of {len(names)}): {', '.join(missing)}")
    failed = sum(not r["ok"] for r in rows)
    status = 1 if missing or misshapen or failed else 0
    how = (f" (relative L2; or within {EXACT_FACTOR:g}x the reference's own distance from "
           f"float64, {sum(1 for r in rows if 'exact_ours' in r)} tensors had one)" if args.exact
           else " (relative L2)")
    print(f"{'pass' if status == 0 else 'FAIL'}: {len(rows)} of {len(names)} tensors compared, "
          f"{failed} over the tolerance {args.tolerance:g}{how}, {len(missing)} "
          f"missing, {len(misshapen)} misshapen")
    return status


# --------------------------------------------------------------------------------------------
# bench
# --------------------------------------------------------------------------------------------
class Clock:
    """CUDA events on a GPU (read after a synchronize), perf_counter on the CPU."""

    def __init__(self, torch, device):
        self.torch, self.cuda = torch, device.type == "cuda"

    def mark(self):
        if not self.cuda:
            return time.perf_counter()
        e = self.torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def ms(self, a, b):
        return a.elapsed_time(b) if self.cuda else (b - a) * 1e3


class Trainer:
    """NVlabs' training iteration (the module's doc) on random reals, for the bench."""

    def __init__(self, torch, args, device, batch):
        self.torch, self.device, self.batch, self.index = torch, device, batch, 0
        R = args.resolution
        torch.manual_seed(0)  # NVlabs' initialisation (speed does not depend on the values)
        G, D = build_pair(args)
        self.G_ema = copy.deepcopy(G).eval().to(device)
        self.G, self.D = G.to(device), D.to(device)
        G.configure(filter_impl=args.filter_impl, fused_modconv=args.modconv == "fused",
                    channels_last=args.memory_format == "channels_last")
        D.configure(filter_impl="fast" if args.filter_impl == "gemm" else args.filter_impl,
                    channels_last=args.memory_format == "channels_last")
        self.hooks = []
        if args.precision == "mixed":
            self.hooks = g_mixed_precision(torch, G, R, args.channel_base, args.channel_max)
            D.configure(block_dtypes={b["resolution"]: torch.float16 for b in
                                      d_blocks(R, args.d_channel_base, args.d_channel_max)
                                      if b["resolution"] >= d_fp16_resolution(R)})
        self.emas = EmaUpdates(torch, G, batch)
        self.g_opt = torch.optim.Adam(G.parameters(), lr=G_LR, betas=ADAM_BETAS, eps=ADAM_EPS)
        lr, betas = lazy_adam(D_LR, ADAM_BETAS, D_REG_INTERVAL)
        self.d_opt = torch.optim.Adam(D.parameters(), lr=lr, betas=betas, eps=ADAM_EPS)
        self.reals = torch.rand([batch, IMG_CHANNELS, R, R], device=device) * 2 - 1
        self.gamma, self.ema_beta = args.gamma, g_ema_beta(batch)
        self.loss = None
        # Dreg's gradients of the biases after mbstd: zeros here, None with NVlabs' CUDA bias_act
        # (no second-order term for lrelu), which leaves them out of the Adam step.
        self.r1_none = [D.b4.conv.bias, D.b4.fc.bias]

    def update(self, module, opt):
        """training_loop's step: the gradients concatenated, nan_to_num, split back; Adam."""
        torch = self.torch
        params = [p for p in module.parameters() if p.grad is not None]
        if params:
            flat = torch.cat([p.grad.flatten() for p in params])
            torch.nan_to_num(flat, out=flat, **NAN_TO_NUM)
            for p, g in zip(params, flat.split([p.numel() for p in params])):
                p.grad = g.reshape(p.shape)
        opt.step()

    def iteration(self, clock=None, marks=None):
        """One iteration; with a clock, (phase, start, end) marks appended to `marks`."""
        torch, G, D = self.torch, self.G, self.D
        z = torch.randn([3 * self.batch, Z_DIM], device=self.device).split(self.batch)

        def phase(name, run):
            start = clock.mark() if clock else None
            run()
            if clock:
                marks.append((name, start, clock.mark()))

        def g_phase():
            self.g_opt.zero_grad(set_to_none=True)
            self.loss = gmain(torch, G, D, z[0])[0]
            self.update(G, self.g_opt)

        def d_phase():
            self.d_opt.zero_grad(set_to_none=True)
            dmain(torch, G, D, z[1], self.reals, self.emas)
            self.update(D, self.d_opt)

        def r_phase():
            self.d_opt.zero_grad(set_to_none=True)
            if self.gamma > 0:  # loss.py: r1_gamma 0 turns Dreg into 'none'
                dreg(torch, D, self.reals, self.gamma)
                for p in self.r1_none:
                    p.grad = None
            self.update(D, self.d_opt)

        def ema_phase():
            with torch.no_grad():
                for pe, p in zip(self.G_ema.parameters(), G.parameters()):
                    pe.copy_(p.lerp(pe, self.ema_beta))
                for be, b in zip(self.G_ema.buffers(), G.buffers()):
                    be.copy_(b)

        phase("Gmain", g_phase)
        phase("Dmain", d_phase)
        if self.index % D_REG_INTERVAL == 0:
            phase("Dreg", r_phase)
        phase("Gema", ema_phase)
        self.index += 1


def bench_environment(torch, device):
    env = {"torch": torch.__version__, "cudnn": None, "cuda": None, "gpu": None,
           "device": str(device),
           "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}
    if device.type == "cuda":
        env.update(common.bench_environment(torch, device))
    return env


def bench_row(torch, args, device, batch, clock):
    """One batch's row (an "error" instead of the figures where it fails, e.g. out of memory)."""
    import gc

    row = {"model": model_name(args.resolution), "mode": "train", "precision": args.precision,
           "batch": batch, "input_size": args.resolution}
    cuda = device.type == "cuda"
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    trainer = None
    try:
        mbstd_group(batch, args.mbstd_group)
        trainer = Trainer(torch, args, device, batch)
        for _ in range(args.warmup_iters):
            trainer.iteration()
        clock.sync()
        windows = -(-args.iters // WINDOW)
        reps, phases = [], {}
        for _ in range(windows):
            marks = []
            start = clock.mark()
            for _ in range(WINDOW):
                trainer.iteration(clock, marks)
            end = clock.mark()
            clock.sync()
            reps.append(clock.ms(start, end) / WINDOW)
            for name, a, b in marks:
                phases.setdefault(name, []).append(clock.ms(a, b))
        iters = windows * WINDOW
        ms = sum(reps) / len(reps)
        img_s = batch / ms * 1e3
        row.update(ms=ms, ms_min=min(reps), ms_max=max(reps), img_s=img_s,
                   s_per_5kimg=REPORT_IMAGES / img_s, kimg_per_hour=img_s * 3.6,
                   iters=iters, reps=reps, iters_per_rep=WINDOW,
                   phase_ms={k: sum(v) / len(v) for k, v in phases.items()},
                   phase_count={k: len(v) for k, v in phases.items()},
                   loss=float(trainer.loss.item()))
        if cuda:
            row.update(peak_allocated_mib=torch.cuda.max_memory_allocated(device) / 2**20,
                       peak_reserved_mib=torch.cuda.max_memory_reserved(device) / 2**20)
            row["peak_mib"] = row["peak_allocated_mib"]
        else:
            row.update(peak_allocated_mib=None, peak_reserved_mib=None, peak_mib=None)
    except (RuntimeError, ValueError) as e:  # torch.cuda.OutOfMemoryError is a RuntimeError
        text = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
        row["error"] = "out of memory" if "out of memory" in text else text
        print(f"  {row['model']} batch {batch}: error: {text}", file=sys.stderr)
    finally:
        if trainer is not None:
            trainer.emas.remove()
        del trainer
        gc.collect()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    return row


def write_json(path, doc):
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


def bench(args):
    """The bench subcommand: PyTorch's training iteration per batch. Returns 0."""
    torch = require_torch()
    cfg = check_case_args(args)
    batches = [int(b) for b in args.batches.split(",") if b.strip()]
    if not batches or min(batches) < 1:
        raise ValueError("--batches must list batch sizes of at least 1")
    if args.iters < 1 or args.warmup_iters < 0:
        raise ValueError("--iters must be at least 1 and --warmup-iters not negative")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise common.MissingDependency("no CUDA device (--device cpu runs on the CPU, for tests)")
    device = torch.device(args.device)
    tf32 = args.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    R = args.resolution
    g_params = sg3.param_count(R, CONFIG, args.channel_base, args.channel_max,
                               mapping_layers=args.mapping_layers)
    d_params = d_param_count(R, args.d_channel_base, args.d_channel_max)
    lr, betas = lazy_adam(D_LR, ADAM_BETAS, D_REG_INTERVAL)
    doc = {**bench_environment(torch, device), "settings": {
        "precision": args.precision, "cudnn_tf32": torch.backends.cudnn.allow_tf32,
        "matmul_tf32": torch.backends.cuda.matmul.allow_tf32, "cudnn_benchmark": True,
        "mixed": {"g_fp16_layers": g_fp16_layers(R, args.channel_base, args.channel_max),
                  "d_fp16_from_resolution": d_fp16_resolution(R),
                  "loss_scaling": None} if args.precision == "mixed" else None,
        "memory_format": args.memory_format, "filter_impl": args.filter_impl,
        "d_filter_impl": "fast" if args.filter_impl == "gemm" else args.filter_impl,
        "modulated_conv": args.modconv, "iters": -(-args.iters // WINDOW) * WINDOW,
        "window": WINDOW, "warmup_iters": args.warmup_iters, "gamma": args.gamma,
        "d_reg_interval": D_REG_INTERVAL, "g_adam": {"lr": G_LR, "betas": list(ADAM_BETAS),
                                                     "eps": ADAM_EPS},
        "d_adam": {"lr": lr, "betas": list(betas), "eps": ADAM_EPS},
        "nan_to_num": NAN_TO_NUM, "ema_kimg": "batch * 10 / 32", "ema_rampup": None,
        "magnitude_ema_beta": "0.5 ** (batch / 20000)", "w_avg_beta": W_AVG_BETA,
        "reals": "U(-1, 1), fixed on the device (no data loading)",
        "phases": "Gmain, Dmain, Dreg (iteration % 16 == 0), Gema"},
        "network": {"model": model_name(R), "resolution": R, "config": CONFIG,
                    "channel_base": cfg["channel_base"], "channel_max": cfg["channel_max"],
                    "mapping_layers": args.mapping_layers, "g_parameters": g_params,
                    "d_parameters": d_params, "d_channel_base": args.d_channel_base,
                    "d_channel_max": args.d_channel_max, "conv_clamp": args.conv_clamp,
                    "d_conv_clamp": args.d_conv_clamp,
                    "g_gmacs_per_image": sg3.conv_macs(R, CONFIG, args.channel_base,
                                                       args.channel_max,
                                                       args.mapping_layers) / 1e9,
                    "d_gmacs_per_image": d_macs(R, args.d_channel_base,
                                                args.d_channel_max) / 1e9},
        "rows": []}
    clock = Clock(torch, device)
    print(f"torch {doc['torch']}, cudnn {doc['cudnn']}, {doc['gpu'] or device}; "
          f"{model_name(R)} (G {g_params:,}, D {d_params:,} parameters), {args.precision}",
          flush=True)
    for batch in batches:
        row = bench_row(torch, args, device, batch, clock)
        doc["rows"].append(row)
        if "error" not in row:
            print(f"  batch {batch}: {row['ms']:.2f} ms per iteration, {row['img_s']:.1f} img/s, "
                  f"{row['s_per_5kimg']:.1f} s per 5 kimg, phases "
                  + ", ".join(f"{k} {v:.2f} ms" for k, v in row["phase_ms"].items())
                  + ("" if row["peak_mib"] is None else f", peak {row['peak_mib']:.0f} MiB"),
                  flush=True)
        if args.out:
            write_json(args.out, doc)
    return 0


# --------------------------------------------------------------------------------------------
# summary (no torch) and main
# --------------------------------------------------------------------------------------------
def summary(args):
    cfg = check_case_args(args)
    R = args.resolution
    specs = dict(d_param_specs(R, args.d_channel_base, args.d_channel_max))
    mods = d_module_param_counts(R, args.d_channel_base, args.d_channel_max)
    d_total = d_param_count(R, args.d_channel_base, args.d_channel_max)
    g_total = sg3.param_count(R, CONFIG, args.channel_base, args.channel_max,
                              mapping_layers=args.mapping_layers)
    g_macs = sg3.conv_macs(R, CONFIG, args.channel_base, args.channel_max, args.mapping_layers)
    print(f"{model_name(R)}: G {g_total:,} parameters (stylegan3_reference.py: channel_base "
          f"{cfg['channel_base']}, channel_max {cfg['channel_max']}, {args.mapping_layers} "
          f"mapping layers, {g_macs / 1e9:.1f} conv GMACs per image)")
    print(f"D (StyleGAN2 resnet, channel_base {args.d_channel_base}, channel_max "
          f"{args.d_channel_max}, conv_clamp {args.d_conv_clamp:g}, mbstd group "
          f"{args.mbstd_group}): {d_total:,} parameters, "
          f"{d_macs(R, args.d_channel_base, args.d_channel_max) / 1e9:.2f} GMACs per image")
    for b in d_blocks(R, args.d_channel_base, args.d_channel_max):
        n = sum(v for k, v in mods.items() if k.split(".")[0] == b["name"])
        print(f"  {b['name']}: {'fromrgb 3 -> ' + str(b['tmp']) + ', ' if b['fromrgb'] else ''}"
              f"conv0 {b['tmp']} -> {b['tmp']}, conv1 {b['tmp']} -> {b['out']} down 2, skip "
              f"{b['tmp']} -> {b['out']} down 2; {n:,} parameters")
    c = d_channels(EPILOGUE_RESOLUTION, args.d_channel_base, args.d_channel_max)
    print(f"  b4: mbstd (+{MBSTD_CHANNELS}), conv {c + MBSTD_CHANNELS} -> {c}, fc "
          f"{specs['b4.fc.weight'][1]} -> {c}, out {c} -> 1; "
          f"{sum(v for k, v in mods.items() if k.startswith('b4.')):,} parameters")
    lr, betas = lazy_adam(D_LR, ADAM_BETAS, D_REG_INTERVAL)
    print(f"loss: gamma {args.gamma:g}, R1 every {D_REG_INTERVAL} (gain {D_REG_INTERVAL}); Adam "
          f"G lr {G_LR}, D lr {lr:.6g} betas ({betas[0]:g}, {betas[1]:.6f}), eps {ADAM_EPS:g}; "
          f"w_avg beta {W_AVG_BETA}, magnitude_ema beta 0.5 ** (batch / {MAGNITUDE_EMA_IMAGES})"
          f"; mixed precision: G fp16 in "
          f"{len(g_fp16_layers(R, args.channel_base, args.channel_max))} layers, D blocks from "
          f"{d_fp16_resolution(R)} px")
    return 0


def add_network_args(p):
    p.add_argument("--resolution", type=int, default=256, help="default %(default)s")
    p.add_argument("--channel-base", dest="channel_base", type=int, default=None,
                   help="G's (default: stylegan3-t's 32768)")
    p.add_argument("--channel-max", dest="channel_max", type=int, default=None,
                   help="G's (default: stylegan3-t's 512)")
    p.add_argument("--mapping-layers", dest="mapping_layers", type=int,
                   default=sg3.DEFAULT_MAPPING_LAYERS, help="default %(default)s")
    common.add_conv_clamp(p, sg3.DEFAULT_CONV_CLAMP, "G's filtered_lrelu clamp")
    p.add_argument("--d-channel-base", dest="d_channel_base", type=int, default=D_CHANNEL_BASE,
                   help="default %(default)s")
    p.add_argument("--d-channel-max", dest="d_channel_max", type=int, default=D_CHANNEL_MAX,
                   help="default %(default)s")
    p.add_argument("--d-conv-clamp", dest="d_conv_clamp", type=float, default=D_CONV_CLAMP,
                   help="D's conv_clamp (default %(default)g; 0: none; skip has none)")
    p.add_argument("--mbstd-group", dest="mbstd_group", type=int, default=MBSTD_GROUP,
                   help="default %(default)s")
    p.add_argument("--gamma", type=float, default=DEFAULT_GAMMA,
                   help="R1 weight (default %(default)g)")


def main(argv=None):
    ap = argparse.ArgumentParser(description="StyleGAN3-T's training step in PyTorch: reference "
                                             "cases, their comparison and a speed peer.")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("summary", help="the discriminator, parameters, hyper-parameters (no torch)")
    add_network_args(p)
    p = sub.add_parser("write-case", help="random weights and inputs, each phase's fp32 reference")
    p.add_argument("--dir", required=True)
    add_network_args(p)
    common.add_case_args(p, "do not check the gradients against central differences")
    p.add_argument("--d-bias-std", dest="d_bias_std", type=float, default=DEFAULT_D_BIAS_STD,
                   help="D's biases ~ N(0, this) (default %(default)g; 0: NVlabs' zeros)")
    p.add_argument("--filter-impl", default="ref", choices=("ref", "fast", "gemm", "matrix"),
                   help="stylegan3_reference's upfirdn2d for G and D (default %(default)s: "
                        "NVlabs' reference path)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--float64", action="store_true",
                   help="also every gradient in float64 (reference64.safetensors), for compare "
                        "--exact")
    p.add_argument("--no-checkpoint", dest="no_checkpoint", action="store_true",
                   help="keep Gmain's whole graph (by default each synthesis layer is recomputed "
                        "in the backward: 256 px at batch 2 otherwise needs over 23 GB)")
    p = common.add_compare_parser(sub, "cnnbench's phases against a reference",
                                  "cnnbench's tensors, named as the reference's",
                                  DEFAULT_TOLERANCE, per=" per tensor")
    p.add_argument("--phase", default=None, choices=PHASES, help="only this phase's tensors")
    p.add_argument("--exact", default=None,
                   help="write-case --float64's reference64.safetensors: a gradient then passes "
                        "within the tolerance of it, or no further from it than "
                        f"{EXACT_FACTOR:g}x the fp32 reference's own distance")
    p = sub.add_parser("bench", help="PyTorch's training iteration speed (a CUDA GPU)")
    add_network_args(p)
    p.add_argument("--batches", default="4,8,16")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS)
    p.add_argument("--iters", type=int, default=32,
                   help=f"timed iterations, rounded up to windows of {WINDOW} (default "
                        f"%(default)s)")
    p.add_argument("--warmup-iters", dest="warmup_iters", type=int, default=WINDOW,
                   help="default %(default)s")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--filter-impl", default="gemm", choices=("gemm", "fast", "ref"),
                   help="G's filtered_lrelu resampling as stylegan3_reference.py bench's "
                        "(default %(default)s; D's FIR: fast for gemm)")
    p.add_argument("--modconv", default="unfused", choices=("unfused", "fused"),
                   help="G's modulated conv (default %(default)s)")
    p.add_argument("--memory-format", dest="memory_format", default="channels_last",
                   choices=("channels_last", "contiguous"))
    p.add_argument("--out", default=None, help="JSON output path (rewritten after every row)")
    args = ap.parse_args(argv)

    return common.run_command({"summary": summary, "write-case": write_case, "compare": compare,
                               "bench": bench}[args.command], args)


if __name__ == "__main__":
    sys.exit(main())
