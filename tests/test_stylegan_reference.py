"""Tests of tools/stylegan_reference.py's torch-free parts (stdlib unittest; no torch, no numpy).

    python3 -m unittest -v tests/test_stylegan_reference.py   (or: tests.test_stylegan_reference)

The layer list of StyleGAN2's generator against NVlabs' (networks.md 9.1) and cnnbench's graph
(tests/test_graph.cpp, StyleGan.Generator2MatchesNvlabs): the parameter totals of five
configurations, the per-block counts, the state_dict's names and shapes (parameters and buffers),
the channel schedules and the conv-only GMACs; the FIR arithmetic (setup_filter, upsample2d's
padding, conv2d_resample's up=2 paddings, checked numerically in 1-D: the fast path's transposed
conv + filter against the slow path's zero insertion + filter + conv); the choice of cnnbench's
output tensor and the comparison, on plain lists and, through main(), on small safetensors files
written here.
"""
import functools
import math
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import stylegan_reference as sg  # noqa: E402
import torch_reference_common as common  # noqa: E402
from torch_reference_common import upfirdn1d  # noqa: E402

F_1024 = (1024, 32768, 8)
PAPER256 = (256, 16384, 8)


run_main = functools.partial(common.run_main, sg.main)  # (status, stdout, stderr)


class ParametersTest(unittest.TestCase):
    def test_totals_are_nvlabs_and_cnnbenchs(self):
        # networks.md 9.1's table; the same five in tests/test_graph.cpp.
        self.assertEqual(sg.param_count(*F_1024), 30_370_060)
        self.assertEqual(sg.param_count(*PAPER256), 24_767_458)
        self.assertEqual(sg.param_count(1024, 32768, 2), 28_794_124)
        self.assertEqual(sg.param_count(512, 32768, 8), 30_276_583)
        self.assertEqual(sg.param_count(256, 32768, 8), 30_034_338)
        for key, total in sg.EXPECTED_PARAMETERS.items():
            self.assertEqual(sg.param_count(*key), total, key)
        # The named configurations at their own resolutions.
        for config, key in (("f", F_1024), ("paper256", PAPER256)):
            cb, ml = sg.config_of(config)
            self.assertEqual((sg.CONFIGS[config]["resolution"], cb, ml), key)

    def test_mapping_and_synthesis_totals(self):
        blocks = sg.block_param_counts(*F_1024)
        self.assertEqual(blocks["mapping"], 2_101_248)  # 8 x (512 x 512 + 512)
        self.assertEqual(sg.block_param_counts(1024, 32768, 2)["mapping"], 525_312)
        self.assertEqual(sg.param_count(*F_1024) - blocks["mapping"], 28_268_812)
        self.assertEqual(sg.param_count(*PAPER256) - sg.block_param_counts(*PAPER256)["mapping"],
                         22_666_210)

    def test_per_block_counts(self):
        # networks.md 9.1 "Params per block", asserted by test_graph.cpp too.
        blocks = sg.block_param_counts(*F_1024)
        self.assertEqual(blocks["synthesis.b4"], 2_894_852)
        for res in (8, 16, 32, 64):
            self.assertEqual(blocks[f"synthesis.b{res}"], 5_509_125, res)
        self.assertEqual(blocks["synthesis.b128"], 2_296_069)
        self.assertEqual(blocks["synthesis.b256"], 705_669)
        self.assertEqual(blocks["synthesis.b512"], 242_245)
        self.assertEqual(blocks["synthesis.b1024"], 93_477)
        self.assertEqual(sum(blocks.values()), 30_370_060)
        # b8 by hand: conv0 (512*512*9 + 512 + 512*512 + 512 + 1), conv1 the same, torgb
        # (3*512 + 3 + 512*512 + 512).
        layer = 512 * 512 * 9 + 512 + 512 * 512 + 512 + 1
        self.assertEqual(2 * layer + 3 * 512 + 3 + 512 * 512 + 512, 5_509_125)

    def test_buffers_are_not_parameters(self):
        specs = sg.state_specs(*F_1024)
        buffers = [n for n, _, t in specs if not t]
        # w_avg, a resample_filter per block and per SynthesisLayer, a noise_const per layer.
        layers = 2 * 9 - 1
        self.assertEqual(len(buffers), 1 + 9 + 2 * layers)
        self.assertTrue(all(n.endswith(("w_avg", "resample_filter", "noise_const"))
                            for n in buffers))
        # noise_strength is a parameter (one element per SynthesisLayer).
        strengths = [n for n, _ in sg.param_specs(*F_1024) if n.endswith("noise_strength")]
        self.assertEqual(len(strengths), layers)
        with_buffers = sum(sg.numel(s) for _, s in sg.param_specs(*F_1024, buffers=True))
        buffer_elems = 512 + 9 * 16 + layers * 16 + sum(
            2 * r * r if r > 4 else r * r for r in sg.block_resolutions(1024))
        self.assertEqual(with_buffers - sg.param_count(*F_1024), buffer_elems)


class NamesTest(unittest.TestCase):
    def test_representative_names_and_shapes(self):
        shapes = dict(sg.param_specs(*F_1024, buffers=True))
        self.assertEqual(len(shapes), len(sg.param_specs(*F_1024, buffers=True)))  # unique
        want = {
            "mapping.fc0.weight": [512, 512], "mapping.fc0.bias": [512],
            "mapping.fc7.weight": [512, 512], "mapping.fc7.bias": [512],
            "mapping.w_avg": [512],
            "synthesis.b4.const": [512, 4, 4],
            "synthesis.b4.resample_filter": [4, 4],
            "synthesis.b4.conv1.weight": [512, 512, 3, 3],
            "synthesis.b4.conv1.noise_const": [4, 4],
            "synthesis.b4.torgb.weight": [3, 512, 1, 1],
            "synthesis.b8.conv1.noise_strength": [],
            "synthesis.b8.conv1.noise_const": [8, 8],
            "synthesis.b8.conv0.resample_filter": [4, 4],
            "synthesis.b8.conv1.resample_filter": [4, 4],
            "synthesis.b128.conv0.weight": [256, 512, 3, 3],
            "synthesis.b128.conv0.bias": [256],
            "synthesis.b128.conv0.affine.weight": [512, 512],
            "synthesis.b128.conv0.affine.bias": [512],
            "synthesis.b128.conv0.noise_const": [128, 128],
            "synthesis.b128.conv1.weight": [256, 256, 3, 3],
            "synthesis.b128.conv1.affine.weight": [256, 512],
            "synthesis.b128.conv1.affine.bias": [256],
            "synthesis.b128.resample_filter": [4, 4],
            "synthesis.b1024.torgb.weight": [3, 32, 1, 1],
            "synthesis.b1024.torgb.bias": [3],
            "synthesis.b1024.torgb.affine.weight": [32, 512],
            "synthesis.b1024.torgb.affine.bias": [32],
            "synthesis.b1024.conv1.noise_const": [1024, 1024],
        }
        for name, shape in want.items():
            self.assertEqual(shapes.get(name), shape, name)
        for absent in ("synthesis.b8.torgb.noise_strength", "synthesis.b8.torgb.resample_filter",
                       "synthesis.b8.torgb.noise_const", "synthesis.b4.conv0.weight",
                       "synthesis.b8.const", "mapping.fc8.weight", "synthesis.b2048.conv1.weight",
                       "mapping.embed.weight"):
            self.assertNotIn(absent, shapes)
        self.assertEqual(sum(n.endswith(".affine.weight") for n in shapes), 17 + 9)

    def test_paper256_names(self):
        shapes = dict(sg.param_specs(*PAPER256, buffers=True))
        self.assertEqual(shapes["synthesis.b64.conv0.weight"], [256, 512, 3, 3])
        self.assertEqual(shapes["synthesis.b256.conv1.weight"], [64, 64, 3, 3])
        self.assertEqual(shapes["synthesis.b256.torgb.weight"], [3, 64, 1, 1])
        self.assertEqual(shapes["synthesis.b256.conv1.noise_const"], [256, 256])
        self.assertNotIn("synthesis.b512.conv0.weight", shapes)

    def test_nvlabs_state_dict_order(self):
        names = [n for n, _ in sg.param_specs(*PAPER256, buffers=True)]
        # Generator: synthesis, then mapping; a module's parameters, its buffers, its children.
        self.assertTrue(names[0].startswith("synthesis.b4."))
        self.assertEqual(names[-17:], ["mapping.w_avg"] + [f"mapping.fc{i}.{k}" for i in range(8)
                                                           for k in ("weight", "bias")])
        i = names.index("synthesis.b8.conv0.weight")
        self.assertEqual(names[i - 1:i + 7],
                         ["synthesis.b8.resample_filter"]
                         + [f"synthesis.b8.conv0.{k}" for k in
                            ("weight", "noise_strength", "bias", "resample_filter", "noise_const",
                             "affine.weight", "affine.bias")])
        self.assertEqual(names[:3], ["synthesis.b4.const", "synthesis.b4.resample_filter",
                                     "synthesis.b4.conv1.weight"])


class ScheduleTest(unittest.TestCase):
    def test_channel_schedules(self):
        f = {res: cout for res, _, cout in sg.channel_schedule(1024, 32768)}
        self.assertEqual(f, {4: 512, 8: 512, 16: 512, 32: 512, 64: 512, 128: 256, 256: 128,
                             512: 64, 1024: 32})
        p = {res: cout for res, _, cout in sg.channel_schedule(256, 16384)}
        self.assertEqual(p, {4: 512, 8: 512, 16: 512, 32: 512, 64: 256, 128: 128, 256: 64})
        sched = sg.channel_schedule(256, 16384)
        self.assertEqual(sched[0], (4, 0, 512))  # b4 starts from the const
        self.assertEqual(sched[4], (64, 512, 256))
        self.assertEqual([r for r, _, _ in sched], sg.block_resolutions(256))

    def test_num_ws_and_resolutions(self):
        self.assertEqual(sg.num_ws(256), 14)
        self.assertEqual(sg.num_ws(512), 16)
        self.assertEqual(sg.num_ws(1024), 18)
        self.assertEqual(sg.block_resolutions(4), [4])
        self.assertEqual(sg.block_resolutions(32), [4, 8, 16, 32])
        for bad in (0, 2, 300, 1000):
            with self.assertRaises(ValueError):
                sg.check_resolution(bad)
        with self.assertRaises(ValueError):
            sg.config_of("paper512")

    def test_gmacs(self):
        # test_graph.cpp's conv-only figures (networks.md's approximate 74.3 / 14.9 / 45.1 / 59.7).
        for key, gmacs in ((F_1024, 74.3), (PAPER256, 14.9), ((256, 32768, 8), 45.1),
                           ((512, 32768, 8), 59.7)):
            self.assertAlmostEqual(sg.conv_macs(*key) / 1e9, gmacs, delta=0.15, msg=key)
        # The mapping counts 512 x 512 a layer.
        self.assertEqual(sg.conv_macs(1024, 32768, 8) - sg.conv_macs(1024, 32768, 2),
                         6 * 512 * 512)

    def test_names(self):
        self.assertEqual(sg.model_name("f", 1024), "stylegan2_f_1024")
        self.assertEqual(sg.model_name("paper256", 256), "stylegan2_paper256_256")


# 1-D versions of NVlabs' ops, to check the padding plans numerically (one axis of the 2-D ops:
# the filter and the paddings act on each axis alike); upfirdn1d is torch_reference_common's.
def conv1d(x, w, pad=0, flip=False):
    """torch's conv1d (a correlation); flip=True: a true convolution (flip_weight=False)."""
    w = list(reversed(w)) if flip else list(w)
    y = [0.0] * pad + list(x) + [0.0] * pad
    return [sum(y[i + j] * w[j] for j in range(len(w))) for i in range(len(y) - len(w) + 1)]


def conv_transpose1d(x, w, stride, pad=0):
    """torch's conv_transpose1d: out[o + pad] += x[i] * w[k] for o = stride * i + k - ..."""
    n = (len(x) - 1) * stride + len(w)
    y = [0.0] * n
    for i, v in enumerate(x):
        for k, wk in enumerate(w):
            y[stride * i + k] += v * wk
    return y[pad:n - pad]


class FirArithmeticTest(unittest.TestCase):
    def test_setup_filter(self):
        f = sg.setup_filter()
        self.assertEqual(len(f), 4)
        self.assertTrue(all(len(row) == 4 for row in f))
        self.assertAlmostEqual(f[0][0], 1 / 64)
        self.assertAlmostEqual(f[0][1], 3 / 64)
        self.assertAlmostEqual(f[1][2], 9 / 64)
        self.assertAlmostEqual(f[3][3], 1 / 64)
        self.assertAlmostEqual(sum(map(sum, f)), 1.0)
        self.assertEqual(f, [list(r) for r in zip(*f)])  # symmetric

    def test_upsample2d_padding(self):
        self.assertEqual(sg.upsample2d_padding(4), [2, 1, 2, 1])
        self.assertEqual(sg.upsample2d_padding(4, padding=1), [3, 2, 3, 2])
        for h in (4, 8, 17, 512):
            p = sg.upsample2d_padding(4)
            self.assertEqual(sg.upfirdn2d_out_size(h, 4, 2, 1, p[0], p[1]), 2 * h)
        self.assertEqual(sg.filter2d_padding(4), [2, 1, 2, 1])
        self.assertEqual(sg.filter2d_padding(4, 1), [3, 2, 3, 2])
        self.assertEqual(sg.parse_padding(1), [1, 1, 1, 1])
        self.assertEqual(sg.parse_padding([1, 2]), [1, 1, 2, 2])

    def test_upsample_keeps_a_constant(self):
        # gain up^2 over two axes: sqrt(4) = 2 per axis; the filter's 1-D taps sum to 1.
        taps = [1 / 8, 3 / 8, 3 / 8, 1 / 8]
        p = sg.upsample2d_padding(4)
        y = upfirdn1d([1.0] * 6, taps, up=2, pad0=p[0], pad1=p[1], gain=2.0)
        self.assertEqual(len(y), 12)
        for v in y[2:-2]:
            self.assertAlmostEqual(v, 1.0)

    def test_conv2d_resample_plan(self):
        plan = sg.conv2d_resample_plan(3, 4, up=2, padding=1)
        self.assertEqual(plan, {"padding": [3, 2, 3, 2], "transpose_padding": [0, 0],
                                "filter_padding": [1, 1, 1, 1]})
        self.assertEqual(sg.conv2d_resample_plan(3, 4, up=1, padding=1), {"padding": [1, 1, 1, 1]})
        self.assertEqual(sg.conv2d_resample_plan(1, 1), {"padding": [0, 0, 0, 0]})  # ToRGB
        for h in (4, 8, 64, 512):
            self.assertEqual(sg.conv_transpose_out_size(h, 3, 2, 0), 2 * h + 1)
            self.assertEqual(sg.conv2d_resample_out_size(h, 3, 4, 2, 1, "fast"), 2 * h)
            self.assertEqual(sg.conv2d_resample_out_size(h, 3, 4, 2, 1, "slow"), 2 * h)
            self.assertEqual(sg.conv2d_resample_out_size(h, 3, 4, 1, 1), h)
            self.assertEqual(sg.conv2d_resample_out_size(h, 1, 1), h)

    def test_fast_path_equals_slow_path_in_1d(self):
        # The up=2 conv both ways along one axis: NVlabs' fast path (conv_transpose with the
        # kernel unflipped, as flip_weight=False gives, then the filter with the plan's padding
        # and gain 2 per axis) and its generic path (zero insertion with the filter, padding
        # [3, 2], then the flipped kernel's valid conv).
        taps = [1 / 8, 3 / 8, 3 / 8, 1 / 8]
        x = [0.3, -1.2, 2.0, 0.7, -0.4, 1.1, 0.05]
        w = [0.5, -0.25, 1.5]
        plan = sg.conv2d_resample_plan(3, 4, up=2, padding=1)
        t = conv_transpose1d(x, w, 2, plan["transpose_padding"][1])
        fp = plan["filter_padding"]
        fast = upfirdn1d(t, taps, pad0=fp[0], pad1=fp[1], gain=2.0)
        p = plan["padding"]
        slow = conv1d(upfirdn1d(x, taps, up=2, pad0=p[0], pad1=p[1], gain=2.0), w, flip=True)
        self.assertEqual(len(fast), 2 * len(x))
        self.assertEqual(len(slow), 2 * len(x))
        for a, b in zip(fast, slow):
            self.assertAlmostEqual(a, b, places=12)
        # A different padding on either side would shift the result: the plan is not arbitrary.
        shifted = upfirdn1d(t, taps, pad0=fp[0] + 1, pad1=fp[1] - 1, gain=2.0)
        self.assertGreater(max(abs(a - b) for a, b in zip(shifted, slow)), 1e-3)


class SelectOutputTest(unittest.TestCase):
    REF = [2, 3, 4, 4]

    def values(self):
        return [float(i) for i in range(sg.numel(self.REF))]

    def test_output0_as_it_is(self):
        name, entry, note = common.select_output({"output0": (self.REF, self.values())},
                                                 self.REF)
        self.assertEqual((name, entry[0], note), ("output0", self.REF, ""))
        # output0 wins over logits.
        name, _, _ = common.select_output({"logits": ([2, 48], self.values()),
                                           "output0": (self.REF, self.values())}, self.REF)
        self.assertEqual(name, "output0")

    def test_logits_flat_or_nchw(self):
        name, entry, note = common.select_output({"logits": ([2, 48], self.values())}, self.REF)
        self.assertEqual((name, entry[0]), ("logits", self.REF))
        self.assertIn("read as NCHW", note)
        name, entry, note = common.select_output({"logits": (self.REF, self.values())}, self.REF)
        self.assertEqual((name, entry[0]), ("logits", self.REF))
        self.assertEqual(note, "ours is 'logits'")

    def test_misfits(self):
        for shape in ([2, 3], [2, 4, 4, 3], [1, 96], [96], [2, 3, 16]):
            name, entry, problem = common.select_output({"logits": (shape, [])}, self.REF)
            self.assertIsNone(entry, shape)
            self.assertIn("has shape", problem)
        name, entry, problem = common.select_output({"output1": (self.REF, [])}, self.REF)
        self.assertIsNone(entry)
        self.assertIn("missing in ours", problem)

    def test_compare_on_plain_lists(self):
        ref = {"output0": (self.REF, self.values())}
        _, entry, _ = common.select_output({"logits": ([2, 48], self.values())}, self.REF)
        status, rows, problems = common.compare_outputs(ref, {"output0": entry},
                                                        sg.DEFAULT_TOLERANCE, ("output0",))
        self.assertEqual((status, problems, rows[0]["rel_l2"]), (0, [], 0.0))
        bad = self.values()
        bad[5] += 1.0
        status, rows, _ = common.compare_outputs(ref, {"output0": (self.REF, bad)}, 1e-3,
                                                 names=("output0",))
        self.assertEqual(status, 1)
        self.assertAlmostEqual(rows[0]["max_abs"], 1.0)
        norm = math.sqrt(sum(v * v for v in self.values()))
        self.assertAlmostEqual(rows[0]["rel_l2"], 1.0 / norm)
        near = [v * (1 + 1e-5) for v in self.values()]
        self.assertEqual(common.compare_outputs(ref, {"output0": (self.REF, near)}, 1e-3,
                                                names=("output0",))[0], 0)
        nan = self.values()[:-1] + [math.nan]
        status, rows, _ = common.compare_outputs(ref, {"output0": (self.REF, nan)}, 1e9,
                                                 names=("output0",))
        self.assertEqual(status, 1)
        self.assertEqual(rows[0]["max_abs"], math.inf)


class CompareSubcommandTest(common.ImageCompareFiles, unittest.TestCase):
    """main(["compare", ...]) on safetensors files written here (pure Python where torch is
    missing; with torch its float64 path): torch_reference_common.ImageCompareFiles' tests."""
    main = staticmethod(sg.main)
    TOLERANCE = 1e-3


class SummaryTest(unittest.TestCase):
    def test_summary_subcommand(self):
        status, out, err = run_main(["summary", "--config", "f"])
        self.assertEqual(status, 0, err)
        self.assertIn("stylegan2_f_1024", out)
        self.assertIn("30,370,060 parameters", out)
        self.assertIn("synthesis.b1024: 64 -> 32 channels at 1024x1024, 93,477 parameters", out)
        status, out, err = run_main(["summary", "--config", "paper256"])
        self.assertEqual(status, 0, err)
        self.assertIn("24,767,458 parameters", out)
        self.assertIn("synthesis.b4: const 512 channels", out)
        status, out, err = run_main(["summary", "--config", "f", "--resolution", "256"])
        self.assertEqual(status, 0, err)
        self.assertIn("30,034,338 parameters", out)
        status, _, err = run_main(["summary", "--config", "f", "--resolution", "300"])
        self.assertEqual(status, 2)
        self.assertIn("power of two", err)


class WithoutTorchTest(common.WithoutTorch, unittest.TestCase):
    """The tool with `import torch` failing (sys.modules["torch"] = None), torch installed or not:
    the module imports, the torch-free subcommands run, the others exit 2 with one line."""
    MODULE = "stylegan_reference"
    SUMMARY, SUMMARY_SHOWS = ("--config", "paper256"), "24,767,458 parameters"
    WRITE_CASE = ("--resolution", "16")
    BENCH = ("--resolution", "16", "--batches", "1")


if __name__ == "__main__":
    unittest.main()
