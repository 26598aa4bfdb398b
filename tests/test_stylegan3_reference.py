"""Tests of tools/stylegan3_reference.py (stdlib unittest; the torch parts skip without torch).

    python3 -m unittest -v tests/test_stylegan3_reference.py   (or: tests.test_stylegan3_reference)

Without torch, numpy or scipy: the parameter totals of StyleGAN3-T and -R at 256, 512 and 1024
against networks.md 9.2's; the layer names against its lists; the schedule (sampling rates,
cutoffs, sizes, channels) and every layer's up/down factors, taps and padding (a few by hand, all
by the geometry, and numerically in 1-D: the padded filter chain lands on the output size and a
shift of the padding moves the result); the state_dict's names and shapes (buffers where NVlabs
registers them); the filter design (scipy's documented figures for kaiser_beta and kaiser_atten,
the Kaiser window's and J1's definitions, taps scipy 1.10.1's firwin gave for two layers, unit DC
gain and symmetry); the comparison, on safetensors files written here; the torch-free
subcommands with torch blocked. With scipy: every filter of T and R against scipy's design. With
torch: the model's state_dict is the layer list's, the upfirdn2d formulations agree, the modulated
conv's two forms agree, and (with safetensors) write-case runs at 16 px.
"""
import functools
import importlib.util
import os
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import stylegan3_reference as sg3  # noqa: E402
import torch_reference_common as common  # noqa: E402
from torch_reference_common import upfirdn1d  # noqa: E402

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_SCIPY = importlib.util.find_spec("scipy") is not None
HAVE_SAFETENSORS = importlib.util.find_spec("safetensors") is not None

# networks.md 9.2's lists.
T1024_NAMES = ["L0_36_512", "L1_36_512", "L2_52_512", "L3_52_512", "L4_84_512", "L5_148_512",
               "L6_148_512", "L7_276_323", "L8_276_203", "L9_532_128", "L10_1044_81",
               "L11_1044_51", "L12_1044_32", "L13_1024_32", "L14_1024_3"]
T256_NAMES = ["L0_36_512", "L1_36_512", "L2_36_512", "L3_52_512", "L4_52_512", "L5_84_512",
              "L6_84_512", "L7_148_512", "L8_148_512", "L9_148_362", "L10_276_256",
              "L11_276_181", "L12_276_128", "L13_256_128", "L14_256_3"]
R1024_CHANNELS = [1024] * 7 + [645, 406, 256, 161, 102, 64, 64, 3]


run_main = functools.partial(common.run_main, sg3.main)  # (status, stdout, stderr)


def by_name(resolution, config="t", **kw):
    return {L["name"]: L for L in sg3.layer_specs(resolution, config, **kw)}


class ParametersTest(unittest.TestCase):
    def test_totals_are_networks_md(self):
        self.assertEqual(sg3.param_count(256, "t"), 28_472_133)
        self.assertEqual(sg3.param_count(512, "t"), 24_873_519)
        self.assertEqual(sg3.param_count(1024, "t"), 22_313_167)
        self.assertEqual(sg3.param_count(256, "r"), 18_816_387)
        self.assertEqual(sg3.param_count(512, "r"), 16_665_594)
        self.assertEqual(sg3.param_count(1024, "r"), 15_093_151)
        for (cfg, r, cb, cm, ml), total in sg3.EXPECTED_PARAMETERS.items():
            self.assertEqual(sg3.param_count(r, cfg, cb, cm, mapping_layers=ml), total)

    def test_module_counts(self):
        mods = sg3.module_param_counts(1024, "t")
        self.assertEqual(mods["mapping"], 525_312)  # 2 x (512 x 512 + 512)
        # The input: 512 x 512 mixing + the affine 512 -> 4.
        self.assertEqual(mods["synthesis.input"], 512 * 512 + 4 * 512 + 4)
        # L0: 3x3 conv 512 -> 512 with bias, affine 512 -> 512.
        self.assertEqual(mods["synthesis.L0_36_512"], 512 * 512 * 9 + 512 + 512 * 512 + 512)
        self.assertEqual(mods["synthesis.L14_1024_3"], 3 * 32 + 3 + 32 * 512 + 32)
        self.assertEqual(sum(mods.values()), 22_313_167)
        # networks.md 9.2 (issue #49): R's input weight 1024^2, L0 weight + bias 1024 x 1024 + 1024.
        shapes = dict(sg3.param_specs(1024, "r"))
        self.assertEqual(shapes["synthesis.input.weight"], [1024, 1024])
        self.assertEqual(sg3.numel(shapes["synthesis.L0_36_1024.weight"])
                         + sg3.numel(shapes["synthesis.L0_36_1024.bias"]), 1_049_600)
        self.assertEqual(sg3.param_count(1024, "t", mapping_layers=8)
                         - sg3.param_count(1024, "t"), 6 * (512 * 512 + 512))

    def test_channel_overrides(self):
        # The tiny case of the brief: 16 px, channel_base 1024, channel_max 64.
        specs = sg3.layer_specs(16, "t", channel_base=1024, channel_max=64)
        self.assertEqual([L["out_channels"] for L in specs], [64] * 14 + [3])
        self.assertEqual(specs[-2]["name"], "L13_16_64")
        self.assertEqual(sg3.input_spec(16, "t", 1024, 64)["channels"], 64)
        with self.assertRaises(ValueError):
            sg3.config_of("t", channel_base=0)
        with self.assertRaises(ValueError):
            sg3.config_of("x")


class ScheduleTest(unittest.TestCase):
    def test_layer_names_are_networks_mds(self):
        self.assertEqual([L["name"] for L in sg3.layer_specs(1024, "t")], T1024_NAMES)
        self.assertEqual([L["name"] for L in sg3.layer_specs(256, "t")], T256_NAMES)
        r = sg3.layer_specs(1024, "r")
        self.assertEqual([L["out_channels"] for L in r], R1024_CHANNELS)
        self.assertEqual([L["out_size"] for L in r],
                         [L["out_size"] for L in sg3.layer_specs(1024, "t")])

    def test_schedule(self):
        s = sg3.schedule(1024, 32768, 512)
        self.assertEqual([x["sampling_rate"] for x in s],
                         [16, 16, 32, 32, 64, 128, 128, 256, 256, 512, 1024, 1024, 1024, 1024,
                          1024])
        self.assertAlmostEqual(s[0]["cutoff"], 2.0)
        self.assertAlmostEqual(s[0]["stopband"], 2 ** 2.1)
        self.assertAlmostEqual(s[12]["cutoff"], 512.0)
        self.assertAlmostEqual(s[14]["stopband"], 512 * 2 ** 0.3)
        self.assertAlmostEqual(s[6]["cutoff"], 2 * 256 ** 0.5)  # halfway in the exponent
        self.assertAlmostEqual(s[0]["half_width"], 6.0)  # max(2^2.1, 8) - 2
        self.assertEqual(sg3.input_spec(1024, "t"),
                         {"channels": 512, "size": 36, "sampling_rate": 16.0, "bandwidth": 2.0})
        self.assertEqual(sg3.num_ws(), 16)
        for bad in (8, 0, 300, 1000):
            with self.assertRaises(ValueError):
                sg3.check_resolution(bad)

    def test_factors_taps_padding(self):
        t = by_name(1024)
        L0 = t["L0_36_512"]
        self.assertEqual((L0["up"], L0["down"], L0["up_taps"], L0["down_taps"], L0["tmp_rate"]),
                         (2, 2, 12, 12, 32))
        # pad_total = 35 * 2 + 1 - 38 * 2 + 12 + 12 - 2 = 17; lo = (17 + 2) // 2.
        self.assertEqual((L0["pad_lo"], L0["pad_hi"]), (9, 8))
        L9 = t["L9_532_128"]
        self.assertEqual((L9["up"], L9["down"], L9["up_taps"], L9["down_taps"], L9["tmp_rate"]),
                         (4, 2, 24, 12, 1024))
        # 531 * 2 + 1 - 278 * 4 + 24 + 12 - 2 = -15; lo = (-15 + 4) // 2 = -6 (floor).
        self.assertEqual((L9["pad_lo"], L9["pad_hi"]), (-6, -9))
        L13 = t["L13_1024_32"]  # critically sampled, 1044 -> 1024
        self.assertEqual((L13["up"], L13["down"], L13["pad_lo"], L13["pad_hi"]), (2, 2, -11, -12))
        rgb = t["L14_1024_3"]
        self.assertEqual((rgb["up"], rgb["down"], rgb["up_taps"], rgb["down_taps"],
                          rgb["tmp_rate"], rgb["kernel"], rgb["pad_lo"], rgb["pad_hi"]),
                         (1, 1, 1, 1, 1024, 1, 0, 0))
        self.assertTrue(rgb["torgb"] and rgb["critical"])
        self.assertEqual([L["critical"] for L in t.values()], [False] * 12 + [True] * 3)
        # R: kernel 1, radial down filters but in the critically sampled layers.
        r = sg3.layer_specs(256, "r")
        self.assertEqual([L["radial"] for L in r], [True] * 12 + [False] * 3)
        self.assertEqual({L["kernel"] for L in r[:-1]}, {1})
        r0 = r[0]  # conv output 36: 35 * 2 + 1 - 36 * 2 + 22 = 21
        self.assertEqual((r0["pad_lo"], r0["pad_hi"]), (11, 10))

    def test_geometry_of_every_layer(self):
        for cfg in ("t", "r"):
            for res in (16, 32, 64, 128, 256, 512, 1024):
                for L in sg3.layer_specs(res, cfg):
                    k = L["kernel"]
                    self.assertEqual(L["conv_size"], L["in_size"] + k - 1)
                    up_len = L["conv_size"] * L["up"] + L["pad_lo"] + L["pad_hi"]
                    self.assertEqual(L["tmp_size"], up_len - L["up_taps"] + 1)
                    self.assertEqual((L["tmp_size"] - L["down_taps"]) // L["down"] + 1,
                                     L["out_size"])
                    # The down-sampling is exact: no sample left over.
                    self.assertEqual((L["tmp_size"] - L["down_taps"]) % L["down"], 0)
                    self.assertIn(L["up"], (1, 2, 4))
                    self.assertIn(L["down"], (1, 2))
                    self.assertEqual(L["tmp_rate"], L["in_rate"] * L["up"])
                    self.assertEqual(L["tmp_rate"], L["out_rate"] * L["down"])


class NamesTest(unittest.TestCase):
    def test_state_dict(self):
        shapes = dict(sg3.param_specs(1024, "t", buffers=True))
        want = {
            "mapping.fc0.weight": [512, 512], "mapping.fc1.bias": [512], "mapping.w_avg": [512],
            "synthesis.input.weight": [512, 512], "synthesis.input.affine.weight": [4, 512],
            "synthesis.input.affine.bias": [4], "synthesis.input.transform": [3, 3],
            "synthesis.input.freqs": [512, 2], "synthesis.input.phases": [512],
            "synthesis.L0_36_512.weight": [512, 512, 3, 3],
            "synthesis.L0_36_512.magnitude_ema": [],
            "synthesis.L0_36_512.up_filter": [12], "synthesis.L0_36_512.down_filter": [12],
            "synthesis.L9_532_128.up_filter": [24], "synthesis.L9_532_128.down_filter": [12],
            "synthesis.L9_532_128.affine.weight": [203, 512],
            "synthesis.L14_1024_3.weight": [3, 32, 1, 1],
            "synthesis.L14_1024_3.affine.bias": [32],
        }
        for name, shape in want.items():
            self.assertEqual(shapes.get(name), shape, name)
        for absent in ("synthesis.L14_1024_3.up_filter", "synthesis.L14_1024_3.down_filter",
                       "mapping.fc2.weight", "synthesis.L15_1024_3.weight",
                       "synthesis.input.bias", "mapping.embed.weight"):
            self.assertNotIn(absent, shapes)
        r = dict(sg3.param_specs(256, "r", buffers=True))
        self.assertEqual(r["synthesis.L0_36_1024.down_filter"], [12, 12])
        self.assertEqual(r["synthesis.L0_36_1024.up_filter"], [12])
        self.assertEqual(r["synthesis.L12_276_256.down_filter"], [12])  # critical: separable
        self.assertEqual(r["synthesis.L0_36_1024.weight"], [1024, 1024, 1, 1])

    def test_nvlabs_order(self):
        names = [n for n, _ in sg3.param_specs(256, "t", buffers=True)]
        self.assertEqual(names[:6], ["synthesis.input.weight", "synthesis.input.transform",
                                     "synthesis.input.freqs", "synthesis.input.phases",
                                     "synthesis.input.affine.weight",
                                     "synthesis.input.affine.bias"])
        self.assertEqual(names[6:13], [f"synthesis.L0_36_512.{k}" for k in (
            "weight", "bias", "magnitude_ema", "up_filter", "down_filter", "affine.weight",
            "affine.bias")])
        self.assertEqual(names[-5:], ["mapping.w_avg", "mapping.fc0.weight", "mapping.fc0.bias",
                                      "mapping.fc1.weight", "mapping.fc1.bias"])
        self.assertEqual(len(names), len(set(names)))

    def test_model_name(self):
        self.assertEqual(sg3.model_name("t", 1024), "stylegan3_t_1024")


class FilterDesignTest(unittest.TestCase):
    def test_kaiser_formulas_are_scipys(self):
        # scipy.signal's docstrings: kaiser_beta(65) = 6.20426, kaiser_atten(211, 0.0375) =
        # 64.48099630593983.
        self.assertAlmostEqual(sg3.kaiser_beta(65), 6.20426, places=9)
        self.assertAlmostEqual(sg3.kaiser_atten(211, 0.0375), 64.48099630593983, places=12)
        self.assertAlmostEqual(sg3.kaiser_beta(30), 0.5842 * 9 ** 0.4 + 0.07886 * 9)
        self.assertEqual(sg3.kaiser_beta(20), 0.0)

    def test_bessel_functions(self):
        # I0 and J1 at a few points (Abramowitz & Stegun tables).
        self.assertAlmostEqual(sg3.bessel_i0(0.0), 1.0)
        self.assertAlmostEqual(sg3.bessel_i0(1.0), 1.2660658777520082, places=14)
        self.assertAlmostEqual(sg3.bessel_i0(5.0), 27.239871823604442, places=11)
        self.assertAlmostEqual(sg3.bessel_j1(0.0), 0.0, places=15)
        self.assertAlmostEqual(sg3.bessel_j1(1.0), 0.44005058574493355, places=14)
        self.assertAlmostEqual(sg3.bessel_j1(10.0), 0.04347274616886141, places=14)
        self.assertAlmostEqual(sg3.bessel_j1(3.8317059702075125), 0.0, places=14)  # first zero
        w = sg3.kaiser_window(9, 6.20426)
        self.assertAlmostEqual(w[4], 1.0, places=15)
        self.assertAlmostEqual(w[0], 1 / sg3.bessel_i0(6.20426), places=15)
        self.assertEqual(sg3.kaiser_window(4, 0.0), [1.0] * 4)

    def test_known_filters(self):
        # scipy 1.10.1's firwin(12, 2, width=12, fs=32): T-1024 L0's up and down filters.
        L0 = sg3.layer_specs(1024, "t")[0]
        up, down = sg3.layer_filters(L0)
        want = [0.000791902149740628, 0.010018318156623213, 0.038949522472001424,
                0.09241278989917955, 0.1565256153446172, 0.201301851977838]
        for a, b in zip(up, want + want[::-1]):
            self.assertAlmostEqual(a, b, places=14)
        self.assertEqual(up, down)  # cutoff 2 and half width 6 on both sides
        # L9_532_128's up filter (24 taps, cutoff 80.63..., width 94.73..., fs 1024).
        L9 = sg3.layer_specs(1024, "t")[9]
        up9, down9 = sg3.layer_filters(L9)
        self.assertEqual((len(up9), len(down9)), (24, 12))
        for a, b in zip(up9, [-0.002656519079285889, -0.006814422614794948,
                              -0.011533527230692023]):
            self.assertAlmostEqual(a, b, places=14)
        # R-256 L0's radial down filter (scipy.special.j1 under np.kaiser's outer product).
        r0 = sg3.layer_filters(sg3.layer_specs(256, "r")[0])[1]
        self.assertEqual((len(r0), len(r0[0])), (12, 12))
        for a, b in ((r0[0][0], 8.412096704036594e-07), (r0[0][2], 4.0277926572886675e-05),
                     (r0[5][5], 0.038754885402425575), (r0[0][5], 0.0002052621264188234),
                     (r0[2][3], 0.0038798586076316754)):
            self.assertAlmostEqual(a, b, places=14)

    def test_filter_properties(self):
        for cfg in ("t", "r"):
            for L in sg3.layer_specs(256, cfg):
                up, down = sg3.layer_filters(L)
                self.assertEqual(up is None, L["up_taps"] == 1)
                self.assertEqual(down is None, L["down_taps"] == 1)
                for f in (up, down):
                    if f is None:
                        continue
                    flat = [v for row in f for v in row] if isinstance(f[0], list) else f
                    self.assertAlmostEqual(sum(flat), 1.0, places=12)  # unit DC gain
                    for a, b in zip(flat, flat[::-1]):
                        self.assertAlmostEqual(a, b, places=15)  # symmetric
        self.assertIsNone(sg3.design_lowpass_filter(1, 2.0, 1.0, 16.0))

    @unittest.skipUnless(HAVE_SCIPY, "scipy not installed")
    def test_every_filter_against_scipy(self):
        for cfg in ("t", "r"):
            for res in (16, 256, 1024):
                self.assertLess(sg3.filter_design_difference(sg3.layer_specs(res, cfg)), 1e-12)

    def test_padding_numerically_in_1d(self):
        # T-1024 L9 along one axis: the conv output (278 samples), up 4 with the 24-tap filter and
        # the padding [-6, -9], the 12-tap filter and down 2: 532 samples, as the layer's size. A
        # constant input stays about constant in the middle (unit DC gain: gain up per axis).
        L = sg3.layer_specs(1024, "t")[9]
        up, down = sg3.layer_filters(L)
        x = [1.0] * L["conv_size"]
        y = upfirdn1d(x, up, up=L["up"], pad0=L["pad_lo"], pad1=L["pad_hi"], gain=L["up"])
        self.assertEqual(len(y), L["tmp_size"])
        z = upfirdn1d(y, down, down=L["down"])
        self.assertEqual(len(z), L["out_size"])
        for v in z[20:-20]:
            self.assertAlmostEqual(v, 1.0, delta=2e-2)
        # The same for L0 (up 2, padding [9, 8]).
        L = sg3.layer_specs(1024, "t")[0]
        up, down = sg3.layer_filters(L)
        y = upfirdn1d([1.0] * L["conv_size"], up, up=2, pad0=9, pad1=8, gain=2)
        self.assertEqual(len(upfirdn1d(y, down, down=2)), 36)

    def test_padding_lo_is_the_symmetric_choice(self):
        # An impulse in the middle of a layer's input comes out centred (the symmetric
        # interpretation); shifting the padding by one moves it off centre.
        L = sg3.layer_specs(64, "t", channel_base=1024, channel_max=64)[0]
        up, down = sg3.layer_filters(L)
        n = L["conv_size"]  # 38, even: the centre is between samples 18 and 19
        x = [0.0] * n
        x[n // 2 - 1] = x[n // 2] = 1.0

        def run(p0, p1):
            y = upfirdn1d(x, up, up=L["up"], pad0=p0, pad1=p1, gain=L["up"])
            return upfirdn1d(y, down, down=L["down"])

        z = run(L["pad_lo"], L["pad_hi"])
        self.assertEqual(len(z), L["out_size"])
        for a, b in zip(z, z[::-1]):
            self.assertAlmostEqual(a, b, places=12)
        shifted = run(L["pad_lo"] + 1, L["pad_hi"] - 1)
        self.assertGreater(max(abs(a - b) for a, b in zip(shifted, shifted[::-1])), 1e-3)


class CompareSubcommandTest(common.ImageCompareFiles, unittest.TestCase):
    """main(["compare", ...]) on safetensors files written here: ImageCompareFiles' tests."""
    main = staticmethod(sg3.main)
    TOLERANCE = 1e-3


class SummaryTest(unittest.TestCase):
    def test_summary_subcommand(self):
        status, out, err = run_main(["summary", "--config", "t", "--resolution", "1024"])
        self.assertEqual(status, 0, err)
        self.assertIn("stylegan3_t_1024", out)
        self.assertIn("22,313,167 parameters", out)
        self.assertIn("= networks.md 9.2's 22,313,167", out)
        self.assertIn("L9_532_128: 203 -> 128, 276 -> 532, k 3, fs 256 -> 512 (tmp 1024)", out)
        self.assertIn("up 4 down 2, taps 24/12, padding [-6, -9]", out)
        for r, total in ((256, "28,472,133"), (512, "24,873,519")):
            status, out, err = run_main(["summary", "--resolution", str(r)])
            self.assertEqual(status, 0, err)
            self.assertIn(f"{total} parameters", out)
        status, out, err = run_main(["summary", "--config", "r", "--resolution", "256"])
        self.assertEqual(status, 0, err)
        self.assertIn("18,816,387 parameters", out)
        self.assertIn("taps 12/12 (radial)", out)
        status, out, err = run_main(["summary", "--resolution", "16", "--channel-base", "1024",
                                     "--channel-max", "64"])
        self.assertEqual(status, 0, err)
        self.assertIn("L13_16_64", out)
        self.assertNotIn("networks.md", out)
        status, _, err = run_main(["summary", "--resolution", "300"])
        self.assertEqual(status, 2)
        self.assertIn("power of two", err)


class WithoutTorchTest(common.WithoutTorch, unittest.TestCase):
    """The tool with `import torch` failing: the torch-free subcommands run, the others exit 2."""
    MODULE = "stylegan3_reference"
    SUMMARY = ("--config", "t", "--resolution", "256")
    SUMMARY_SHOWS = "28,472,133 parameters"
    WRITE_CASE = ("--resolution", "16")
    BENCH = ("--resolution", "16", "--batches", "1")


@unittest.skipUnless(HAVE_TORCH, "torch not installed")
class TorchTest(unittest.TestCase):
    TINY = dict(resolution=16, config="t", channel_base=1024, channel_max=64)

    def test_model_state_dict_is_the_layer_list(self):
        for cfg, cb, cm in (("t", 1024, 64), ("r", 2048, 128)):
            model = sg3.build_model(16, cfg, cb, cm)
            sg3.check_model(model)  # raises on a difference

    def test_upfirdn2d_formulations_agree(self):
        import torch
        for what, err in sg3.upfirdn2d_crosscheck(torch, torch.device("cpu")):
            self.assertLess(err, 1e-12, what)

    def test_modulated_conv_forms_agree(self):
        import torch
        ops = sg3.torch_ops(torch)
        g = torch.Generator().manual_seed(0)
        x = torch.randn([3, 5, 9, 9], generator=g, dtype=torch.float64)
        w = torch.randn([4, 5, 3, 3], generator=g, dtype=torch.float64)
        s = torch.randn([3, 5], generator=g, dtype=torch.float64) + 1
        gain = torch.tensor(0.7, dtype=torch.float64)
        for demod in (True, False):
            a = ops["modulated_conv2d"](x, w, s, demodulate=demod, padding=2, input_gain=gain)
            b = ops["modulated_conv2d"](x, w, s, demodulate=demod, padding=2, input_gain=gain,
                                        fused=False)
            self.assertEqual(list(a.shape), [3, 4, 11, 11])
            self.assertLess(((a - b).norm() / a.norm()).item(), 1e-12)
        # The styles' pre-normalisation is over the whole batch, but with demodulation it is a
        # scale that cancels (but for the 1e-8): an image's output does not depend on the others.
        a = ops["modulated_conv2d"](x, w, s, demodulate=True, padding=2)
        s2 = s.clone()
        s2[1:] *= 3
        b = ops["modulated_conv2d"](x, w, s2, demodulate=True, padding=2)
        self.assertLess((a[0] - b[0]).abs().max().item(), 1e-6)
        s3 = s.clone()
        s3[1:] = s3[1:] ** 2
        c = ops["modulated_conv2d"](x, w, s3, demodulate=True, padding=2)
        self.assertLess((a[0] - c[0]).abs().max().item(), 1e-6)

    def test_fourier_grid_forms_agree(self):
        import torch
        model = sg3.build_model(**self.TINY)
        g = torch.Generator().manual_seed(3)
        sg3.randomize(model, g)
        w = torch.randn([2, 512], generator=g)
        with torch.no_grad():
            a = model.synthesis.input(w)
            b = model.configure(grid="explicit").synthesis.input(w)
        self.assertEqual(list(a.shape), [2, 64, 36, 36])
        self.assertLess(((a - b).norm() / a.norm()).item(), 1e-5)

    @unittest.skipUnless(HAVE_SAFETENSORS, "safetensors not installed")
    def test_write_case_tiny(self):
        with tempfile.TemporaryDirectory() as d:
            status, out, err = run_main(["write-case", "--dir", d, "--resolution", "16",
                                         "--channel-base", "1024", "--channel-max", "64",
                                         "--batch", "2", "--seed", "1"])
            self.assertEqual(status, 0, out + err)
            self.assertIn("output0 [2, 3, 16, 16]", out)
            ref, _ = common.read_safetensors(os.path.join(d, "reference.safetensors"))
            self.assertEqual(ref["output0"].shape, [2, 3, 16, 16])
            z, _ = common.read_safetensors(os.path.join(d, "input.safetensors"))
            self.assertEqual(z["input"].shape, [2, 512, 1, 1])
            weights, _ = common.read_safetensors(os.path.join(d, "weights.safetensors"))
            # A safetensors file's tensors are named, not ordered (the real writer sorts them).
            self.assertEqual(sorted((k, t.shape) for k, t in weights.items()),
                             sorted(sg3.param_specs(16, "t", 1024, 64, buffers=True)))
            status, out, _ = run_main(["compare", "--reference",
                                       os.path.join(d, "reference.safetensors"), "--ours",
                                       os.path.join(d, "reference.safetensors")])
            self.assertEqual(status, 0, out)


if __name__ == "__main__":
    unittest.main()
