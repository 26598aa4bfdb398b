"""Tests of tools/stylegan3_train_reference.py (stdlib unittest; torch parts skip without torch).

    python3 -m unittest -v tests/test_stylegan3_train_reference.py

Without torch: the discriminator's parameter names, shapes and total at 256 (against a count
derived here from NVlabs' block structure: 28,864,129), the hyper-parameters (the EMA betas, the
lazy Adam, the minibatch-std group, the mixed-precision layers), the comparison on safetensors
files written here (phase groups, missing and perturbed tensors named, shapes, zero references,
--phase), the torch-free subcommands with torch blocked. With torch: the discriminator's
state_dict; minibatch std against a hand computation; the down-sampling convs against
conv2d_resample's definition written as sums; on a tiny discriminator in float64, R1's input
gradients and Dreg's parameter gradients (the double backward) against central differences; the
generator's EMA updates; write-case at 16 px (its own gradient cross-checks included; with and
without Gmain's activation checkpointing) and its round trip through compare; bench on the CPU.
"""
import functools
import importlib.util
import json
import math
import os
import random
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import stylegan3_reference as sg3  # noqa: E402
import stylegan3_train_reference as sg3t  # noqa: E402
import torch_reference_common as common  # noqa: E402

HAVE_TORCH = importlib.util.find_spec("torch") is not None

run_main = functools.partial(common.run_main, sg3t.main)  # (status, stdout, stderr)

# The tiny networks of the torch tests: G 16 px (as tests/test_stylegan3_reference.py's), D 16 px.
TINY = ["--resolution", "16", "--channel-base", "1024", "--channel-max", "64",
        "--d-channel-base", "256", "--d-channel-max", "32"]


def d_count_by_hand(resolution, channel_base=32768, channel_max=512):
    """NVlabs' Discriminator (resnet, c_dim 0, mbstd 1 channel) counted from its structure:
    fromrgb, then per block conv0 (3x3), conv1 (3x3, down), skip (1x1, no bias); the epilogue's
    conv (C + 1 -> C), fc (C * 4 * 4 -> C) and out (C -> 1)."""
    def ch(r):
        return min(channel_base // r, channel_max)

    def conv(cin, cout, k, bias=True):
        return cout * cin * k * k + (cout if bias else 0)

    total = conv(3, ch(resolution), 1)
    r = resolution
    while r >= 8:
        total += conv(ch(r), ch(r), 3) + conv(ch(r), ch(r // 2), 3)
        total += conv(ch(r), ch(r // 2), 1, bias=False)
        r //= 2
    c = ch(4)
    return total + conv(c + 1, c, 3) + (c * 16 * c + c) + (c + 1)


class DiscriminatorLayoutTest(unittest.TestCase):
    def test_total_at_256(self):
        self.assertEqual(d_count_by_hand(256), 28_864_129)
        self.assertEqual(sg3t.d_param_count(256), 28_864_129)
        for r, cb, cm in ((16, 256, 32), (8, 64, 8), (512, 32768, 512), (64, 16384, 256)):
            self.assertEqual(sg3t.d_param_count(r, cb, cm), d_count_by_hand(r, cb, cm), (r, cb))
        mods = sg3t.d_module_param_counts(256)
        self.assertEqual(mods["b256.fromrgb"], 3 * 128 + 128)
        self.assertEqual(mods["b256.skip"], 256 * 128)
        self.assertEqual(mods["b4.fc"], 512 * 8192 + 512)

    def test_names_and_shapes(self):
        shapes = dict(sg3t.d_param_specs(256, buffers=True))
        want = {
            "b256.fromrgb.weight": [128, 3, 1, 1], "b256.fromrgb.bias": [128],
            "b256.conv0.weight": [128, 128, 3, 3], "b256.conv1.weight": [256, 128, 3, 3],
            "b256.conv1.bias": [256], "b256.skip.weight": [256, 128, 1, 1],
            "b128.conv0.weight": [256, 256, 3, 3], "b128.conv1.weight": [512, 256, 3, 3],
            "b8.skip.weight": [512, 512, 1, 1], "b4.conv.weight": [512, 513, 3, 3],
            "b4.conv.bias": [512], "b4.fc.weight": [512, 8192], "b4.fc.bias": [512],
            "b4.out.weight": [1, 512], "b4.out.bias": [1],
            "b256.resample_filter": [4, 4], "b256.conv1.resample_filter": [4, 4],
            "b4.conv.resample_filter": [4, 4],
        }
        for name, shape in want.items():
            self.assertEqual(shapes.get(name), shape, name)
        for absent in ("b256.skip.bias", "b128.fromrgb.weight", "b4.fromrgb.weight",
                       "b4.mbstd.weight", "b2.conv0.weight", "mapping.fc0.weight"):
            self.assertNotIn(absent, shapes)
        params = [n for n, _ in sg3t.d_param_specs(256)]
        self.assertEqual(params[:5], ["b256.fromrgb.weight", "b256.fromrgb.bias",
                                      "b256.conv0.weight", "b256.conv0.bias",
                                      "b256.conv1.weight"])
        self.assertEqual(params[-6:], ["b4.conv.weight", "b4.conv.bias", "b4.fc.weight",
                                       "b4.fc.bias", "b4.out.weight", "b4.out.bias"])
        self.assertEqual(len(params), len(set(params)))
        self.assertEqual(len(params), 7 + 5 * 5 + 6)  # b256 7, b128..b8 5 each, b4 6
        self.assertEqual([b["name"] for b in sg3t.d_blocks(256)],
                         ["b256", "b128", "b64", "b32", "b16", "b8"])
        for bad in (4, 12, 0):
            with self.assertRaises(ValueError):
                sg3t.d_blocks(bad)

    def test_hyper_parameters(self):
        self.assertAlmostEqual(sg3t.magnitude_ema_beta(8), 0.5 ** (8 / 20000), places=15)
        self.assertAlmostEqual(sg3t.g_ema_beta(32), 0.5 ** (32 / 10000), places=15)
        self.assertAlmostEqual(sg3t.g_ema_beta(8), sg3t.g_ema_beta(64), places=15)
        lr, betas = sg3t.lazy_adam(0.002, (0.0, 0.99), 16)
        self.assertAlmostEqual(lr, 0.002 * 16 / 17, places=15)
        self.assertEqual(betas[0], 0.0)
        self.assertAlmostEqual(betas[1], 0.99 ** (16 / 17), places=15)
        self.assertEqual([sg3t.mbstd_group(n) for n in (1, 2, 3, 4, 8, 16)], [1, 2, 3, 4, 4, 4])
        for bad in (6, 10):
            with self.assertRaises(ValueError):
                sg3t.mbstd_group(bad)
        # NVlabs' fp16 rule (sampling rate * 16 > R): at 256 every layer but the three at 16 Hz.
        self.assertEqual(sg3t.g_fp16_layers(256), [L["name"] for L in sg3.layer_specs(256)][3:])
        self.assertEqual((sg3t.d_fp16_resolution(256), sg3t.d_fp16_resolution(1024),
                          sg3t.d_fp16_resolution(16)), (32, 128, 8))

    def test_summary_subcommand(self):
        status, out, err = run_main(["summary"])
        self.assertEqual(status, 0, err)
        self.assertIn("D (StyleGAN2 resnet, channel_base 32768, channel_max 512", out)
        self.assertIn("28,864,129 parameters", out)
        self.assertIn("G 28,472,133 parameters", out)
        self.assertIn("b256: fromrgb 3 -> 128, conv0 128 -> 128, conv1 128 -> 256", out)
        self.assertIn("b4: mbstd (+1), conv 513 -> 512, fc 8192 -> 512", out)
        status, _, err = run_main(["summary", "--resolution", "300"])
        self.assertEqual(status, 2)
        self.assertIn("power of two", err)


class CompareSubcommandTest(common.CompareFiles, unittest.TestCase):
    """main(["compare", ...]) on safetensors files written here."""
    main = staticmethod(sg3t.main)
    REF = {
        "Gmain.loss": ([1], [0.5]),
        "Gmain.grad.mapping.fc0.weight": ([2, 2], [1.0, -2.0, 3.0, 0.5]),
        "Dmain.logits_gen": ([2], [0.25, -0.75]),
        "Dmain.grad.b8.conv0.weight": ([3], [0.1, 0.2, 0.3]),
        "Dreg.grad.b4.out.bias": ([1], [0.0]),
        "Dreg.r1_penalty": ([2], [4.0, 5.0]),
    }

    def reference_tensors(self):
        return self.REF

    def with_changes(self, drop=(), **changes):
        t = {k: v for k, v in self.REF.items() if k not in drop}
        for k, v in changes.items():
            t[k.replace("__", ".")] = v
        return self.ours(t)

    def test_identical_passes_grouped_by_phase(self):
        out, _ = self.assert_compare(self.with_changes(), 0, "pass: 6 of 6 tensors compared")
        self.assertLess(out.index("[Gmain]"), out.index("[Dmain]"))
        self.assertLess(out.index("[Dmain]"), out.index("[Dreg]"))
        self.assertLess(out.index("Gmain.grad.mapping.fc0.weight"), out.index("Gmain.loss"))
        for phase in ("Gmain", "Dmain", "Dreg"):
            self.assertIn(f"worst in {phase}: ", out)
        self.assertIn("zero reference", out)

    def test_a_perturbed_tensor_fails_by_name(self):
        path = self.with_changes(Dmain__grad__b8__conv0__weight=([3], [0.1, 0.2, 0.31]))
        out, _ = self.assert_compare(path, 1, "FAIL")
        line = next(x for x in out.splitlines() if "Dmain.grad.b8.conv0.weight" in x
                    and "rel_l2" in x and "worst" not in x)
        self.assertTrue(line.endswith("FAIL"), line)
        self.assertIn("worst in Dmain: Dmain.grad.b8.conv0.weight", out)
        self.assertIn("1 over the tolerance", out)
        self.assert_compare(path, 0, extra=("--tolerance", "0.05"))
        self.assert_compare(path, 0, extra=("--phase", "Gmain"))

    def test_missing_tensors_are_named(self):
        path = self.with_changes(drop=("Dreg.r1_penalty", "Gmain.loss"))
        out, _ = self.assert_compare(path, 1, "missing in ours (2 of 6): Gmain.loss, "
                                              "Dreg.r1_penalty")
        self.assert_compare(path, 1, "missing in ours (1 of 2): Dreg.r1_penalty",
                            extra=("--phase", "Dreg"))
        self.assert_compare(path, 0, extra=("--phase", "Dmain"))

    def test_shapes(self):
        # [N, 1] for [N] and [] / [1, 1] for [1] are read as the reference's; [3] for [2] is not.
        self.assert_compare(self.with_changes(Dmain__logits_gen=([2, 1], [0.25, -0.75]),
                                              Gmain__loss=([], [0.5])), 0)
        code, out, err = self.compare(self.with_changes(Dreg__r1_penalty=([3], [4, 5, 6])))
        self.assertEqual(code, 1)
        self.assertIn("Dreg.r1_penalty: shape [3] in ours, [2] in the reference", err)

    def test_zero_reference_uses_max_abs(self):
        self.assert_compare(self.with_changes(Dreg__grad__b4__out__bias=([1], [1e-5])), 0)
        self.assert_compare(self.with_changes(Dreg__grad__b4__out__bias=([1], [0.01])), 1,
                            "FAIL")

    def test_non_finite_fails(self):
        self.assert_compare(self.with_changes(Dreg__r1_penalty=([2], [4.0, math.nan])), 1,
                            "FAIL")

    def test_exact_allows_the_references_own_distance_from_float64(self):
        # Ours 2.7e-2 from the reference: over 1e-3. Against float64 [0.1, 0.2, 0.305], the
        # reference is 1.4e-2 off and ours 1.4e-2: within 2x, so it passes; against a float64
        # equal to the reference it stays a failure; a NaN in ours fails either way.
        path = self.with_changes(Dmain__grad__b8__conv0__weight=([3], [0.1, 0.2, 0.31]))
        exact = os.path.join(self.dir.name, "reference64.safetensors")
        common.write_safetensors(exact, {"Dmain.grad.b8.conv0.weight": ([3], [0.1, 0.2, 0.305])})
        out, _ = self.assert_compare(path, 0, "pass: 6 of 6", "vs float64: ours 1.322e-02, the "
                                     "reference 1.322e-02", "1 tensors had one",
                                     extra=("--exact", exact))
        common.write_safetensors(exact, {"Dmain.grad.b8.conv0.weight": ([3], [0.1, 0.2, 0.3])})
        self.assert_compare(path, 1, "FAIL", "the reference 0.000e+00",
                            "100% of ours' squared error from float64 in element [2]",
                            extra=("--exact", exact))
        # Spread over two elements (0.01 and 0.02 off): the larger carries 80%.
        spread = self.with_changes(Dmain__grad__b8__conv0__weight=([3], [0.1, 0.21, 0.32]))
        self.assert_compare(spread, 1, "80% of ours' squared error from float64 in element [2]",
                            extra=("--exact", exact))
        # All zeros never pass, however far the reference is from float64.
        zeros = self.with_changes(Dmain__grad__b8__conv0__weight=([3], [0.0, 0.0, 0.0]))
        common.write_safetensors(exact, {"Dmain.grad.b8.conv0.weight": ([3], [0.3, -0.2, 0.1])})
        self.assert_compare(zeros, 1, "FAIL", extra=("--exact", exact))
        nan = self.with_changes(Dmain__grad__b8__conv0__weight=([3], [0.1, 0.2, math.nan]))
        self.assert_compare(nan, 1, "FAIL", extra=("--exact", exact))
        self.assert_compare(path, 2, "cannot read exact",
                            extra=("--exact", os.path.join(self.dir.name, "none")))

    def test_exact_from_another_case_is_refused(self):
        # write-case stamps every file with the case (network, size, batch, seed, gamma and a
        # fingerprint of the weights and inputs); a float64 file of another case is named.
        meta = {"network": "stylegan3_t", "resolution": "16", "batch": "2", "seed": "3",
                "gamma": "2.0", "case": "0123456789abcdef"}
        grads = {"Dmain.grad.b8.conv0.weight": ([3], [0.1, 0.2, 0.3])}
        ref = os.path.join(self.dir.name, "ref_meta.safetensors")
        common.write_safetensors(ref, grads, metadata=meta)
        exact = os.path.join(self.dir.name, "exact_meta.safetensors")
        common.write_safetensors(exact, grads, metadata=meta)
        self.assertEqual(common.read_metadata(exact), meta)
        status, out, _ = run_main(["compare", "--reference", ref, "--ours", ref, "--exact", exact])
        self.assertEqual(status, 0, out)
        for key, other in (("batch", "4"), ("case", "fedcba9876543210"), ("seed", "4")):
            common.write_safetensors(exact, grads, metadata=dict(meta, **{key: other}))
            status, _, err = run_main(["compare", "--reference", ref, "--ours", ref,
                                       "--exact", exact])
            self.assertEqual(status, 2, key)
            self.assertIn(f"is from another case than {ref}: its {key} is {other}", err)
        # A key only one file has is not compared (files of the tests' own writer).
        common.write_safetensors(exact, grads, metadata={"writer": "test"})
        self.assertEqual(run_main(["compare", "--reference", ref, "--ours", ref,
                                   "--exact", exact])[0], 0)

    def test_no_tensor_of_the_phase_exits_2(self):
        ref = os.path.join(self.dir.name, "only_g.safetensors")
        common.write_safetensors(ref, {"Gmain.loss": ([1], [1.0])})
        status, _, err = run_main(["compare", "--reference", ref, "--ours", ref,
                                   "--phase", "Dreg"])
        self.assertEqual(status, 2)
        self.assertIn("no tensor of Dreg", err)


class WithoutTorchTest(common.WithoutTorch, unittest.TestCase):
    """The tool with `import torch` failing: summary and compare run, the others exit 2."""
    MODULE = "stylegan3_train_reference"
    SUMMARY = ("--resolution", "256")
    SUMMARY_SHOWS = "28,864,129 parameters"
    WRITE_CASE = ("--resolution", "16")
    BENCH = ("--resolution", "16", "--batches", "2", "--device", "cpu")


@unittest.skipUnless(HAVE_TORCH, "torch not installed")
class TorchTest(unittest.TestCase):
    def tiny_d(self, resolution=8, conv_clamp=256, bias_std=0.1, seed=0):
        """A float64 discriminator: b8 (fromrgb, conv0, conv1, skip) and the epilogue, 8
        channels."""
        import torch
        D = sg3t.build_discriminator(resolution, 64, 8, conv_clamp)
        sg3t.check_discriminator(D)
        sg3t.randomize_discriminator(D, torch.Generator().manual_seed(seed), bias_std)
        return D.double()

    def test_state_dict_is_the_layer_list(self):
        sg3t.check_discriminator(sg3t.build_discriminator(256))  # raises on a difference
        D = sg3t.build_discriminator(16, 256, 32)
        sg3t.check_discriminator(D)
        # resample_filter [4, 4] in b16, b16.fromrgb/conv0/conv1/skip, b8 and its three, b4.conv
        self.assertEqual(sum(b.numel() for b in D.buffers()), 16 * 10)
        self.assertAlmostEqual(D.b16.resample_filter.sum().item(), 1.0, places=6)
        self.assertAlmostEqual(D.b16.resample_filter[1, 2].item(), 9 / 64, places=7)
        self.assertIsNone(D.b16.skip.bias)
        for name, p in D.named_parameters():
            if name.endswith(".bias"):
                self.assertEqual(p.abs().max().item(), 0.0, name)  # NVlabs' zeros

    def test_near_kinks_and_their_record(self):
        import torch
        x = torch.ones([2, 3, 4, 4], dtype=torch.float64)
        x[1, 2, 0, 3] = 1e-7  # rms about 1: one element within 1e-5 of it from 0
        x[0, 1, 1, 1] = -2e-6
        count, least, chans = sg3.near_kinks(x)
        self.assertEqual((count, chans), (2, [1, 2]))
        self.assertAlmostEqual(least, 1e-7 / math.sqrt((94 + 4e-12 + 1e-14) / 96), delta=1e-12)
        self.assertEqual(sg3.near_kinks(x, margin=1e-6)[0:1], (1,))
        # The discriminator records one row per lrelu, by layer name, when asked.
        D = self.tiny_d()
        stats = []
        D.configure(kink_stats=stats)
        D(torch.randn([2, 3, 8, 8], dtype=torch.float64, generator=torch.Generator()
                      .manual_seed(1)))
        D.configure(kink_stats=None)
        names = [r[0] for r in stats]
        self.assertIn("b8.conv0", names)
        self.assertIn("b8.conv1", names)
        self.assertIn("b4.fc", names)  # the epilogue's fully connected layer
        self.assertNotIn("b8.skip", names)  # linear
        for _, count, least, chans in stats:
            self.assertGreaterEqual(least, 0.0)
            self.assertEqual(count == 0, chans == [])

    def test_minibatch_std_by_hand(self):
        import torch
        g = torch.Generator().manual_seed(0)
        for n, c, f in ((8, 3, 1), (2, 3, 1), (3, 2, 1), (4, 4, 2)):
            x = torch.randn([n, c, 2, 3], generator=g, dtype=torch.float64)
            y = sg3t.minibatch_std(x, 4, f)
            self.assertEqual(list(y.shape), [n, c + f, 2, 3])
            self.assertTrue(torch.equal(y[:, :c], x))
            gs = min(4, n)
            v = x.tolist()
            for i in range(n):
                members = [m for m in range(n) if m % (n // gs) == i % (n // gs)]
                self.assertEqual(len(members), gs)
                for k in range(f):
                    stds = []
                    for ch in range(k * c // f, (k + 1) * c // f):
                        for h in range(2):
                            for w in range(3):
                                s = [v[m][ch][h][w] for m in members]
                                mean = sum(s) / gs
                                stds.append(math.sqrt(sum((a - mean) ** 2 for a in s) / gs
                                                      + 1e-8))
                    want = sum(stds) / len(stds)
                    got = y[i, c + k]
                    self.assertAlmostEqual(got.min().item(), want, places=12)
                    self.assertAlmostEqual(got.max().item(), want, places=12)
        with self.assertRaises(ValueError):
            sg3t.minibatch_std(torch.zeros([6, 2, 1, 1]), 4)

    def test_down_sampling_convs_are_conv2d_resample(self):
        # conv1 (3x3, down 2): FIR over x padded by 2, conv stride 2: y[i] = sum_{k, t} w[k] f[t]
        # x[2 i + k + t - 2] per axis; skip (1x1): FIR with padding 1, down 2, then the 1x1 conv.
        import torch
        D = self.tiny_d(8)
        g = torch.Generator().manual_seed(1)
        x = torch.randn([2, 8, 8, 8], generator=g, dtype=torch.float64)
        f = [v / 8 for v in (1, 3, 3, 1)]
        xl = x.tolist()

        def at(n, c, i, j):
            return xl[n][c][i][j] if 0 <= i < 8 and 0 <= j < 8 else 0.0

        for layer, k, pad, gain in ((D.b8.conv1, 3, 2, sg3t.SKIP_GAIN),
                                    (D.b8.skip, 1, 1, sg3t.SKIP_GAIN)):
            with torch.no_grad():
                got = layer(x, gain=gain)
            w = (layer.weight * layer.weight_gain).tolist()
            b = [0.0] * 8 if layer.bias is None else layer.bias.tolist()
            self.assertEqual(list(got.shape), [2, 8, 4, 4])
            for n, o, i, j in ((0, 0, 0, 0), (1, 3, 3, 2), (0, 7, 1, 3), (1, 5, 2, 0)):
                s = 0.0
                for c in range(8):
                    for ky in range(k):
                        for kx in range(k):
                            for ty in range(4):
                                for tx in range(4):
                                    s += (w[o][c][ky][kx] * f[ty] * f[tx]
                                          * at(n, c, 2 * i + ky + ty - pad,
                                               2 * j + kx + tx - pad))
                s += b[o]
                if layer.lrelu:  # bias_act: lrelu, * sqrt(2) * gain, clamp 256 * gain
                    s = (s if s > 0 else 0.2 * s) * math.sqrt(2)
                s = max(-256 * gain, min(256 * gain, s * gain)) if layer.clamped else s * gain
                self.assertAlmostEqual(got[n, o, i, j].item(), s, places=12)

    def dreg_loss(self, D, x, gamma=2.0):
        import torch
        return sg3t.dreg_terms(torch, D, x, gamma, create_graph=False)[0].item()

    def test_r1_grads_against_central_differences(self):
        import torch
        D = self.tiny_d(8)
        g = torch.Generator().manual_seed(2)
        x = torch.rand([4, 3, 8, 8], generator=g, dtype=torch.float64) * 2 - 1
        r = sg3t.dreg(torch, D, x, 2.0)
        self.assertTrue(torch.allclose(r["r1_penalty"], r["r1_grads"].square().sum([1, 2, 3])))
        self.assertAlmostEqual(r["loss"].item(), r["r1_penalty"].mean().item() * 16, places=12)
        rng = random.Random(3)
        h = 1e-6
        for _ in range(24):
            idx = tuple(rng.randrange(s) for s in x.shape)
            with torch.no_grad():
                xp, xm = x.clone(), x.clone()
                xp[idx] += h
                xm[idx] -= h
                fd = (D(xp).sum() - D(xm).sum()).item() / (2 * h)
            self.assertAlmostEqual(fd, r["r1_grads"][idx].item(), delta=1e-7 * (1 + abs(fd)))

    def test_dreg_double_backward_against_central_differences(self):
        # Per parameter tensor, along a random direction: the central difference of Dreg's loss
        # (float64, a step too small for any lrelu mask to flip) against <grad, v>; with the
        # default clamp and with one low enough to clip some pre-activations.
        import torch
        for clamp in (256, 0.4):
            D = self.tiny_d(8, conv_clamp=clamp)
            g = torch.Generator().manual_seed(4)
            x = torch.rand([4, 3, 8, 8], generator=g, dtype=torch.float64) * 2 - 1
            stats = []
            D.configure(clamp_stats=stats)
            sg3t.dreg(torch, D, x, 2.0)
            D.configure(clamp_stats=None)
            hits = sum(s[1] for s in stats)
            if clamp < 1:
                self.assertGreater(hits, 0)
            grads = {n: (p.grad.clone() if p.grad is not None else None)
                     for n, p in D.named_parameters()}
            D.zero_grad(set_to_none=True)
            self.assertIsNone(grads["b4.out.bias"])  # the input gradient does not see it
            for name, p in D.named_parameters():
                v = torch.randn(p.shape, generator=g, dtype=torch.float64)
                keep = p.detach().clone()
                eps = 1e-8
                losses = []
                with torch.no_grad():
                    for sign in (1, -1):
                        p.copy_(keep + sign * eps * v)
                        losses.append(self.dreg_loss(D, x))
                    p.copy_(keep)
                fd = (losses[0] - losses[1]) / (2 * eps)
                analytic = 0.0 if grads[name] is None else (grads[name] * v).sum().item()
                self.assertAlmostEqual(fd, analytic, delta=2e-6 * (1 + abs(fd)),
                                       msg=f"{name} (clamp {clamp})")
            for name in ("b4.conv.bias", "b4.fc.bias"):  # after mbstd: piecewise linear
                self.assertEqual(grads[name].abs().max().item(), 0.0, name)
            self.assertGreater(grads["b8.conv0.bias"].abs().max().item(), 0.0)

    def test_ema_updates(self):
        import torch
        G = sg3.build_model(16, "t", 1024, 64)
        sg3.randomize(G, torch.Generator().manual_seed(5))
        z = torch.randn([2, 512], generator=torch.Generator().manual_seed(6))
        before = {k: v.clone() for k, v in sg3t.ema_buffers(G).items()}
        self.assertEqual(len(before), 16)  # w_avg and 15 layers
        seen = {}
        for name in G.synthesis.layer_names:
            getattr(G.synthesis, name).register_forward_pre_hook(
                lambda m, i, name=name: seen.__setitem__(name, i[0].detach().clone()))
        emas = sg3t.EmaUpdates(torch, G, 8)
        with torch.no_grad():
            G(z)  # disabled: nothing moves
            for k, v in sg3t.ema_buffers(G).items():
                self.assertTrue(torch.equal(v, before[k]), k)
            emas.enabled = True
            img = G(z)
            emas.enabled = False
            w = G.mapping(z)
        beta = 0.5 ** (8 / 20000)
        after = sg3t.ema_buffers(G)
        self.assertTrue(torch.allclose(after["mapping.w_avg"],
                                       w.mean(0) + 0.998 * (before["mapping.w_avg"] - w.mean(0)),
                                       rtol=1e-6, atol=1e-6))
        for name in G.synthesis.layer_names:
            k = f"synthesis.{name}.magnitude_ema"
            cur = seen[name].double().square().mean().item()
            want = cur + beta * (before[k].item() - cur)
            self.assertAlmostEqual(after[k].item() / want, 1.0, places=5, msg=k)
            self.assertNotEqual(after[k].item(), before[k].item(), k)
        # Each layer read its updated EMA: a plain forward with the new buffers gives the image.
        emas.remove()
        with torch.no_grad():
            self.assertTrue(torch.equal(G(z), img))

    def test_write_case_and_compare_round_trip(self):
        import torch
        with tempfile.TemporaryDirectory() as d:
            # On the CPU: G's weights are checked bit for bit against a CPU rebuild below, and
            # calibrate_clamp's magnitude_ema differs in its last bits on a GPU.
            status, out, err = run_main(["write-case", "--dir", d, *TINY, "--batch", "2",
                                         "--seed", "1", "--float64", "--device", "cpu"])
            self.assertEqual(status, 0, out + err)
            written = out
            for what in ("Gmain: loss", "Dmain: loss_gen", "Dreg: loss",
                         "cross-check, Dreg (double backward)",
                         "no gradient (zeros in the reference; NVlabs' Adam step leaves them "
                         "out): Dreg.grad.b4.out.bias"):
                self.assertIn(what, out)
            self.assertEqual(out.count("  <- differs"), 0)

            def names(f):
                return common.read_safetensors(os.path.join(d, f))[0]

            g, dw, inputs = names("g.safetensors"), names("d.safetensors"), names(
                "inputs.safetensors")
            self.assertEqual(sorted((k, t.shape) for k, t in g.items()),
                             sorted(sg3.param_specs(16, "t", 1024, 64, buffers=True)))
            self.assertEqual(sorted((k, t.shape) for k, t in dw.items()),
                             sorted(sg3t.d_param_specs(16, 256, 32)))
            self.assertEqual({k: t.shape for k, t in inputs.items()},
                             {"z_gmain": [2, 512], "z_dmain": [2, 512],
                              "reals": [2, 3, 16, 16]})
            ref = names("reference.safetensors")
            g_params = dict(sg3.param_specs(16, "t", 1024, 64))
            d_params = dict(sg3t.d_param_specs(16, 256, 32))
            want = {"Gmain.loss": [1], "Gmain.logits": [2], "Dmain.loss_gen": [1],
                    "Dmain.loss_real": [1], "Dmain.logits_gen": [2], "Dmain.logits_real": [2],
                    "Dmain.mapping.w_avg": [512], "Dreg.logits": [2], "Dreg.r1_penalty": [2],
                    "Dreg.r1_grads": [2, 3, 16, 16]}
            want.update({f"Gmain.grad.{k}": s for k, s in g_params.items()})
            for phase in ("Dmain", "Dreg"):
                want.update({f"{phase}.grad.{k}": s for k, s in d_params.items()})
            want.update({f"Dmain.synthesis.{L['name']}.magnitude_ema": [1]
                         for L in sg3.layer_specs(16, "t", 1024, 64)})
            self.assertEqual({k: t.shape for k, t in ref.items()}, want)
            with open(os.path.join(d, "case.json")) as f:
                case = json.load(f)
            self.assertEqual((case["gamma"], case["r1_gain"], case["mbstd_group"],
                              case["w_avg_beta"], case["batch"], case["seed"]),
                             (2.0, 16, 2, 0.998, 2, 1))
            self.assertAlmostEqual(case["magnitude_ema_beta"], 0.5 ** (2 / 20000), places=15)
            self.assertEqual(case["discriminator"]["parameters"], d_count_by_hand(16, 256, 32))
            self.assertEqual(case["no_gradient"], ["Dreg.grad.b4.out.bias"])
            self.assertEqual(case["no_gradient_nvlabs_cuda"],
                             [f"Dreg.grad.b4.{k}.bias" for k in ("conv", "fc", "out")])

            # G's file is stylegan3_reference.py write-case's weights for the same seed and batch:
            # its randomize, then calibrate_clamp on the next draw (z).
            torch.manual_seed(1)
            G = sg3.build_model(16, "t", 1024, 64)
            gen = torch.Generator().manual_seed(1)
            sg3.randomize(G, gen)
            sg3.calibrate_clamp(G, torch.randn(2, 512, generator=gen))
            for k, v in G.state_dict().items():
                self.assertEqual(g[k].values(), v.flatten().tolist(), k)

            path = os.path.join(d, "reference.safetensors")
            status, out, _ = run_main(["compare", "--reference", path, "--ours", path])
            self.assertEqual(status, 0, out)
            self.assertIn(f"pass: {len(want)} of {len(want)} tensors compared", out)
            # --float64: every gradient and the reals' R1 gradient again in float64, close to
            # the fp32 reference at 16 px (the worst of each phase printed).
            exact = names("reference64.safetensors")
            grads = {k for k in want if ".grad." in k} | {"Dreg.r1_grads"}
            self.assertEqual(set(exact), grads)
            self.assertEqual(case["files"]["reference64"], "reference64.safetensors")
            for phase in ("Gmain", "Dmain", "Dreg"):
                self.assertIn(f"float64 {phase}: ", written)
            e = os.path.join(d, "reference64.safetensors")
            # Every file of the case carries its fingerprint (compare --exact checks it).
            case_id = common.read_metadata(path)["case"]
            self.assertEqual(len(case_id), 16)
            for f in ("g", "d", "inputs", "reference64"):
                self.assertEqual(common.read_metadata(os.path.join(d, f + ".safetensors"))["case"],
                                 case_id, f)
            status, out2, _ = run_main(["compare", "--reference", path, "--ours", path,
                                        "--exact", e])
            self.assertEqual(status, 0, out2)
            # All-zero float64 gradients (Dreg's after mbstd, b4.out.bias) give no distance.
            nonzero = sum(1 for k, t in exact.items() if any(v != 0 for v in t.values()))
            self.assertLess(nonzero, len(grads))
            self.assertIn(f"{nonzero} tensors had one", out2)
            r1 = ref["Dreg.r1_grads"].values()
            r1_64 = exact["Dreg.r1_grads"].values()
            num = sum((a - b) ** 2 for a, b in zip(r1, r1_64))
            self.assertLess(math.sqrt(num / sum(b * b for b in r1_64)), 1e-4)
            ours = {k: (t.shape, t.values()) for k, t in ref.items()
                    if k != "Dreg.r1_penalty"}
            shape, values = ours["Dmain.grad.b16.conv0.weight"]
            ours["Dmain.grad.b16.conv0.weight"] = (shape, [v * 1.01 for v in values])
            mine = os.path.join(d, "ours.safetensors")
            common.write_safetensors(mine, ours)
            status, out, _ = run_main(["compare", "--reference", path, "--ours", mine])
            self.assertEqual(status, 1, out)
            self.assertIn("missing in ours (1 of", out)
            self.assertIn("): Dreg.r1_penalty", out)
            self.assertIn("worst in Dmain: Dmain.grad.b16.conv0.weight rel_l2 1.000e-02", out)
            status, out, _ = run_main(["compare", "--reference", path, "--ours", mine,
                                       "--phase", "Gmain"])
            self.assertEqual(status, 0, out)

            # Gmain's activation checkpointing changes nothing.
            plain = os.path.join(d, "plain")
            status, out, err = run_main(["write-case", "--dir", plain, *TINY, "--batch", "2",
                                         "--seed", "1", "--no-checkpoint", "--skip-crosscheck"])
            self.assertEqual(status, 0, out + err)
            status, out, _ = run_main(["compare", "--reference", path, "--ours",
                                       os.path.join(plain, "reference.safetensors"),
                                       "--tolerance", "1e-6"])
            self.assertEqual(status, 0, out)

    def test_bench_on_the_cpu(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bench.json")
            status, out, err = run_main(["bench", "--device", "cpu", "--resolution", "16",
                                         "--channel-base", "256", "--channel-max", "16",
                                         "--d-channel-base", "128", "--d-channel-max", "16",
                                         "--batches", "2", "--iters", "5", "--warmup-iters",
                                         "1", "--filter-impl", "fast", "--precision", "fp32",
                                         "--out", path])
            self.assertEqual(status, 0, out + err)
            with open(path) as f:
                doc = json.load(f)
        self.assertEqual(doc["settings"]["precision"], "fp32")
        for k in ("cudnn_tf32", "matmul_tf32", "iters", "d_adam", "g_adam"):
            self.assertIn(k, doc["settings"])
        self.assertEqual(doc["settings"]["iters"], 16)  # rounded up to a window
        self.assertEqual(doc["network"]["d_parameters"], d_count_by_hand(16, 128, 16))
        (row,) = doc["rows"]
        self.assertNotIn("error", row)
        for k in ("model", "mode", "precision", "batch", "ms", "ms_min", "ms_max", "img_s",
                  "peak_mib", "reps", "s_per_5kimg", "phase_ms"):
            self.assertIn(k, row)
        self.assertEqual((row["model"], row["batch"], row["iters"], len(row["reps"])),
                         ("stylegan3_t_16_train", 2, 16, 1))
        self.assertEqual(row["phase_count"], {"Gmain": 16, "Dmain": 16, "Dreg": 1, "Gema": 16})
        self.assertAlmostEqual(row["img_s"], 2 / row["ms"] * 1e3)
        self.assertAlmostEqual(row["s_per_5kimg"], 5000 / row["img_s"])
        self.assertTrue(math.isfinite(row["loss"]))


if __name__ == "__main__":
    unittest.main()
