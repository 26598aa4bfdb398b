"""Tests of tools/yolor_reference.py's torch-free parts (stdlib unittest; no torch, no numpy).

    python3 -m unittest -v tests/test_yolor_reference.py   (or: tests.test_yolor_reference)

The cfg-style block list of YOLOR-CSP-X against what the real cfg is known to have (NOTES.md,
"YOLOR's layer list against the real cfg"): the block counts, every route's and shortcut's
references, the max-pools and upsamples, the channels into the heads' 1x1 convs, the parameter
total, the conv GMACs at 640 and 1280 px (networks/yolor.cpp's Graph figures) and the state_dict
names and shapes; the cfg parser on excerpts written as the cfg writes them; the comparison of
heads on plain lists and, through main(), on small safetensors files written here.
"""
import functools
import math
import os
import struct
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import torch_reference_common as common  # noqa: E402
import yolor_reference as yr  # noqa: E402

BLOCKS = yr.yolor_csp_x_blocks()

# The routes' layers as the real cfg has them (NOTES.md), by block index. NOTES.md lists 26; the
# other four are the FPN's and PAN's plain blocks' "Split" routes (layers = -2), which the cfg
# has as well.
CFG_ROUTES = {7: [-2], 19: [-1, -13], 23: [-2], 56: [-1, -34], 60: [-2], 93: [-1, -34],
              97: [-2], 115: [-1, -19], 118: [-2], 123: [-2], 125: [-4], 127: [-1, -3, -5, -6],
              132: [-1, -15], 136: [94], 138: [-1, -3], 148: [-1, -8], 152: [57], 154: [-1, -3],
              164: [-1, -8], 167: [-1, 149], 177: [-1, -8], 180: [-1, 133], 190: [-1, -8],
              198: [165], 204: [178], 210: [191]}
SPLIT_ROUTES = {141: [-2], 157: [-2], 170: [-2], 183: [-2]}

# Two excerpts of cfg/yolor_csp_x.cfg, written as it writes them (the SPP, blocks 122-127, and
# the first head, 198-203), for the parser.
CFG_SPP = """
### SPP ###
[maxpool]
stride=1
size=5

[route]
layers=-2

[maxpool]
stride=1
size=9

[route]
layers=-4

[maxpool]
stride=1
size=13

[route]
layers=-1,-3,-5,-6
### End SPP ###
"""
CFG_HEAD = """
[net]
batch=64
width=512

# YOLO-3

[route]
layers = 165

[convolutional]
batch_normalize=1
size=3
stride=1
pad=1
filters=320
activation=silu

[shift_channels]
from=192

[convolutional]
size=1
stride=1
pad=1
filters=255
activation=linear

[control_channels]
from=195

[yolo]
mask = 0,1,2
anchors = 12, 16, 19, 36, 40, 28, 36, 75, 76, 55, 72, 146, 142, 110, 192, 243, 459, 401
classes=80
num=9
"""


run_main = functools.partial(common.run_main, yr.main)  # (status, stdout, stderr)


class BlockListTest(unittest.TestCase):
    def test_block_counts_are_the_cfgs(self):
        self.assertEqual(len(BLOCKS), 216)
        self.assertEqual(yr.block_counts(BLOCKS), yr.EXPECTED_COUNTS)
        self.assertEqual(sum(yr.EXPECTED_COUNTS.values()), 216)
        self.assertEqual(yr.check_blocks(BLOCKS), [])

    def test_every_reference_points_back_to_an_existing_block(self):
        for i, blk in enumerate(BLOCKS):
            for ref in yr.references(blk):
                j = yr.resolve(i, ref)
                self.assertTrue(0 <= j < i, (i, blk))
                if blk["type"] in ("shift_channels", "control_channels"):
                    self.assertIn(BLOCKS[j]["type"], ("implicit_add", "implicit_mul"))
                else:  # routes and shortcuts name feature maps, not implicit tensors
                    self.assertNotIn(BLOCKS[j]["type"], ("implicit_add", "implicit_mul", "yolo"))
        with self.assertRaises(ValueError):
            yr.resolve(5, 5)
        with self.assertRaises(ValueError):
            yr.resolve(2, -3)

    def test_routes_are_the_cfgs(self):
        routes = {i: b["layers"] for i, b in enumerate(BLOCKS) if b["type"] == "route"}
        self.assertEqual(routes, {**CFG_ROUTES, **SPLIT_ROUTES})
        # The SPP's concat order [mp13, mp9, mp5, the 1x1] and the heads' sources, absolute.
        self.assertEqual([yr.resolve(127, r) for r in routes[127]], [126, 124, 122, 121])
        self.assertEqual([yr.resolve(132, r) for r in routes[132]], [131, 117])

    def test_shortcuts_maxpools_upsamples(self):
        shortcuts = [i for i, b in enumerate(BLOCKS) if b["type"] == "shortcut"]
        self.assertEqual(len(shortcuts), 29)
        self.assertTrue(all(BLOCKS[i]["from"] == -3 for i in shortcuts))
        self.assertEqual(shortcuts[:2], [4, 11])
        self.assertEqual(shortcuts[-1], 113)
        pools = {i: b["size"] for i, b in enumerate(BLOCKS) if b["type"] == "maxpool"}
        self.assertEqual(pools, {122: 5, 124: 9, 126: 13})
        self.assertEqual([i for i, b in enumerate(BLOCKS) if b["type"] == "upsample"], [135, 151])

    def test_implicits_and_heads(self):
        self.assertEqual([(b["type"], b["filters"]) for b in BLOCKS[192:198]],
                         [("implicit_add", 320), ("implicit_add", 640), ("implicit_add", 1280)]
                         + [("implicit_mul", 255)] * 3)
        for h, base in enumerate((198, 204, 210)):
            types = [b["type"] for b in BLOCKS[base:base + 6]]
            self.assertEqual(types, ["route", "convolutional", "shift_channels", "convolutional",
                                     "control_channels", "yolo"])
            self.assertEqual(BLOCKS[base + 2]["from"], 192 + h)
            self.assertEqual(BLOCKS[base + 4]["from"], 195 + h)
            self.assertTrue(BLOCKS[base + 1]["bn"])
            self.assertEqual(BLOCKS[base + 3], {"type": "convolutional", "filters": 255,
                                                "size": 1, "stride": 1, "bn": False})
        self.assertEqual([i for i, b in enumerate(BLOCKS)
                          if b["type"] == "convolutional" and not b["bn"]], list(yr.HEAD_CONVS))

    def test_shapes_at_the_heads(self):
        shapes = yr.infer_shapes(BLOCKS, 640)
        cin = yr.input_channels(BLOCKS)
        # Into each head's 1x1 conv: the 3x3's width, shifted by an ImplicitA of that width.
        self.assertEqual([cin[i] for i in yr.HEAD_CONVS], [320, 640, 1280])
        self.assertEqual([shapes[i - 1][0] for i in yr.HEAD_CONVS], [320, 640, 1280])
        self.assertEqual(yr.head_blocks(BLOCKS), [203, 209, 215])
        self.assertEqual([shapes[i] for i in (203, 209, 215)],
                         [(255, 80, 80), (255, 40, 40), (255, 20, 20)])
        self.assertEqual([shapes[i] for i in (165, 178, 191)],
                         [(160, 80, 80), (320, 40, 40), (640, 20, 20)])
        self.assertEqual(shapes[116], (1280, 20, 20))
        self.assertEqual(shapes[127], (2560, 20, 20))  # the SPP's concat of four 640s
        at_1280 = yr.infer_shapes(BLOCKS, 1280)
        self.assertEqual([at_1280[i] for i in (203, 209, 215)],
                         [(255, 160, 160), (255, 80, 80), (255, 40, 40)])

    def test_bad_lists_are_caught(self):
        bad = [dict(b) for b in BLOCKS]
        bad[19] = {"type": "route", "layers": [-1, -12]}  # block 7 (160 wide), not the split (80)
        self.assertTrue(any("parameters" in p for p in yr.check_blocks(bad)))
        bad = [dict(b) for b in BLOCKS]
        bad[136] = {"type": "route", "layers": [-1, 57]}  # 20x20 with 80x80
        with self.assertRaises(ValueError):
            yr.infer_shapes(bad, 640)
        self.assertTrue(yr.check_blocks(bad))
        bad = [dict(b) for b in BLOCKS]
        bad[4] = {"type": "shortcut", "from": -4}  # 80 channels at 320 px with the stem's 32
        with self.assertRaises(ValueError):
            yr.infer_shapes(bad, 640)
        self.assertTrue(any("216" in p for p in yr.check_blocks(BLOCKS[:-1])))
        with self.assertRaises(ValueError):
            yr.check_input_size(650)
        yr.check_input_size(64)


class ParametersTest(unittest.TestCase):
    def test_parameter_count(self):
        self.assertEqual(yr.param_count(BLOCKS), 99_754_058)
        # The implicits are parameters: 320 + 640 + 1280 + 3 x 255.
        implicit = sum(yr.numel(s) for n, s in yr.param_specs(BLOCKS) if n.endswith(".implicit"))
        self.assertEqual(implicit, 320 + 640 + 1280 + 3 * 255)

    def test_gmacs(self):
        self.assertEqual(yr.gmacs(BLOCKS, 640), 110.94)
        self.assertEqual(yr.gmacs(BLOCKS, 1280), 443.77)
        self.assertAlmostEqual(yr.conv_macs(BLOCKS, 640) / 1e9, 110.942, places=3)
        # Every conv is at most stride 2 with "same" padding: the MACs scale with the area.
        self.assertEqual(yr.conv_macs(BLOCKS, 1280), 4 * yr.conv_macs(BLOCKS, 640))

    def test_state_dict_names_and_shapes(self):
        specs = yr.param_specs(BLOCKS)
        shapes = dict(specs)
        self.assertEqual(len(shapes), len(specs))  # no name twice
        self.assertEqual(shapes["module_list.0.Conv2d.weight"], [32, 3, 3, 3])
        self.assertEqual(shapes["module_list.0.BatchNorm2d.weight"], [32])
        self.assertEqual(shapes["module_list.133.Conv2d.weight"], [640, 1280, 1, 1])
        self.assertEqual(shapes["module_list.201.Conv2d.weight"], [255, 320, 1, 1])
        self.assertEqual(shapes["module_list.201.Conv2d.bias"], [255])
        self.assertEqual(shapes["module_list.213.Conv2d.weight"], [255, 1280, 1, 1])
        self.assertEqual(shapes["module_list.192.implicit"], [1, 320, 1, 1])
        self.assertEqual(shapes["module_list.194.implicit"], [1, 1280, 1, 1])
        self.assertEqual(shapes["module_list.197.implicit"], [1, 255, 1, 1])
        for i in yr.HEAD_CONVS:
            self.assertFalse([n for n in shapes if n.startswith(f"module_list.{i}.BatchNorm2d")])
        self.assertNotIn("module_list.4.Conv2d.weight", shapes)  # a shortcut
        self.assertNotIn("module_list.0.Conv2d.bias", shapes)    # BN convs have no bias
        self.assertEqual(sum(n.endswith(".Conv2d.weight") for n in shapes), 137)
        self.assertEqual(sum(n.endswith(".Conv2d.bias") for n in shapes), 3)
        self.assertEqual(sum(n.endswith(".BatchNorm2d.weight") for n in shapes), 134)
        self.assertTrue(all(n.startswith("module_list.") for n in shapes))
        # With buffers: the running statistics, each after its gamma and beta; never
        # num_batches_tracked (write-case leaves it out of weights.safetensors).
        full = yr.param_specs(BLOCKS, buffers=True)
        self.assertEqual(len(full), len(specs) + 2 * 134)
        names = [n for n, _ in full]
        k = names.index("module_list.0.BatchNorm2d.weight")
        self.assertEqual(names[k - 1:k + 4],
                         ["module_list.0.Conv2d.weight"]
                         + [f"module_list.0.BatchNorm2d.{k}"
                            for k in ("weight", "bias", "running_mean", "running_var")])
        self.assertFalse([n for n in names if "num_batches_tracked" in n])

    def test_summary_subcommand(self):
        status, out, err = run_main(["summary"])
        self.assertEqual(status, 0, err)
        self.assertIn("99,754,058 parameters", out)
        self.assertIn("110.942 GMACs", out)
        self.assertIn("output2: block 215, stride 32, [N, 255, 20, 20]", out)


class CfgParserTest(unittest.TestCase):
    def test_excerpts_parse_to_the_block_list(self):
        self.assertEqual(yr.parse_cfg(CFG_SPP), BLOCKS[122:128])
        self.assertEqual(yr.parse_cfg(CFG_HEAD), BLOCKS[198:204])
        self.assertEqual(yr.block_differences(BLOCKS[198:204], yr.parse_cfg(CFG_HEAD)), [])

    def test_differences_are_reported(self):
        parsed = yr.parse_cfg(CFG_HEAD.replace("from=192", "from=193"))
        diffs = yr.block_differences(BLOCKS[198:204], parsed)
        self.assertEqual(len(diffs), 1)
        self.assertTrue(diffs[0].startswith("block 2:"))
        self.assertTrue(yr.block_differences(BLOCKS[198:204], parsed[:-1]))
        with self.assertRaises(ValueError):
            yr.parse_cfg("[convolutional]\nfilters=8\nsize=3\nstride=1\npad=1\nactivation=leaky")
        with self.assertRaises(ValueError):
            yr.parse_cfg("[reorg]\n")

    def test_check_cfg_subcommand(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "head.cfg")
            with open(path, "w") as f:
                f.write(CFG_HEAD)
            status, out, _ = run_main(["check-cfg", "--cfg", path])
            self.assertEqual(status, 1)  # 6 blocks against 216; block 0 differs too
            self.assertIn("216 blocks against 6", out)
            self.assertIn("block 0: ", out)
            status, _, err = run_main(["check-cfg", "--cfg", os.path.join(d, "missing.cfg")])
            self.assertEqual(status, 2)
            self.assertIn("cannot read", err)


class CompareTest(unittest.TestCase):
    def heads(self, scale=1.0, shapes=((1, 2, 2, 2), (1, 2, 1, 1), (1, 3, 1, 1))):
        out = {}
        for k, (name, shape) in enumerate(zip(yr.OUTPUT_NAMES, shapes)):
            n = yr.numel(shape)
            out[name] = (list(shape), [scale * ((i % 5) - 2 + 0.25 * k) for i in range(n)])
        return out

    def test_identical_heads_pass(self):
        ref = self.heads()
        status, rows, problems = yr.compare_outputs(ref, self.heads())
        self.assertEqual((status, problems), (0, []))
        self.assertEqual([r["rel_l2"] for r in rows], [0.0, 0.0, 0.0])
        self.assertTrue(all(r["ok"] for r in rows))

    def test_a_mismatch_is_flagged(self):
        ref, ours = self.heads(), self.heads()
        shape, values = ours["output1"]
        ours["output1"] = (shape, [values[0] + 0.5] + values[1:])
        status, rows, problems = yr.compare_outputs(ref, ours, tolerance=1e-4)
        self.assertEqual((status, problems), (1, []))
        self.assertEqual([r["ok"] for r in rows], [True, False, True])
        r = rows[1]
        self.assertAlmostEqual(r["max_abs"], 0.5)
        sum_sq_ref = sum(v * v for v in values)
        self.assertAlmostEqual(r["rel_l2"], 0.5 / math.sqrt(sum_sq_ref))
        # A tolerance above the error passes it.
        self.assertEqual(yr.compare_outputs(ref, ours, tolerance=r["rel_l2"] * 1.01)[0], 0)

    def test_small_relative_errors_pass(self):
        status, rows, _ = yr.compare_outputs(self.heads(), self.heads(scale=1 + 1e-6))
        self.assertEqual(status, 0)
        self.assertTrue(all(0 < r["rel_l2"] < 1e-5 for r in rows))

    def test_non_finite_values_fail(self):
        for bad in (math.nan, math.inf, -math.inf):
            ref, ours = self.heads(), self.heads()
            shape, values = ours["output2"]
            ours["output2"] = (shape, values[:-1] + [bad])
            status, rows, _ = yr.compare_outputs(ref, ours, tolerance=1e9)
            self.assertEqual(status, 1, bad)
            self.assertFalse(rows[2]["ok"])
            self.assertEqual(rows[2]["max_abs"], math.inf)

    def test_zero_reference(self):
        zero = {n: ([1, 2], [0.0, 0.0]) for n in yr.OUTPUT_NAMES}
        self.assertEqual(yr.compare_outputs(zero, zero)[0], 0)
        ours = dict(zero, output0=([1, 2], [0.0, 1e-3]))
        status, rows, _ = yr.compare_outputs(zero, ours)
        self.assertEqual(status, 1)
        self.assertEqual(rows[0]["rel_l2"], math.inf)

    def test_missing_tensors_and_shape_mismatches(self):
        ref, ours = self.heads(), self.heads()
        del ours["output2"]
        status, rows, problems = yr.compare_outputs(ref, ours)
        self.assertEqual(status, 2)
        self.assertEqual(len(rows), 2)
        self.assertEqual(problems, ["output2: missing in ours"])
        ours = self.heads(shapes=((1, 2, 2, 2), (1, 2, 1, 1), (1, 1, 1, 3)))  # NHWC, not NCHW
        status, _, problems = yr.compare_outputs(ref, ours)
        self.assertEqual(status, 2)
        self.assertIn("output2: shape [1, 1, 1, 3] in ours, [1, 3, 1, 1] in the reference (NCHW)",
                      problems)
        status, _, problems = yr.compare_outputs({}, {})
        self.assertEqual(status, 2)
        self.assertIn("output0: missing in reference and ours", problems)


class CompareSubcommandTest(common.CompareFiles, unittest.TestCase):
    """main(["compare", ...]) on safetensors files written here (pure Python where torch is
    missing; with torch its float64 path)."""
    main = staticmethod(yr.main)

    def reference_tensors(self):
        self.heads = {n: ([1, 3, 2, 2], [0.1 * (i + 1) * (k + 1) for i in range(12)])
                      for k, n in enumerate(yr.OUTPUT_NAMES)}
        return self.heads

    def test_reader(self):
        tensors, meta = common.read_safetensors(self.ref)
        self.assertEqual(meta, {"writer": "test"})
        self.assertEqual(sorted(tensors), list(yr.OUTPUT_NAMES))
        t = tensors["output1"]
        self.assertEqual((t.dtype, t.shape), ("F32", [1, 3, 2, 2]))
        for got, want in zip(t.values(), self.heads["output1"][1]):
            self.assertAlmostEqual(got, want, places=6)
        bad = os.path.join(self.dir.name, "bad.safetensors")
        with open(bad, "wb") as f:
            f.write(struct.pack("<Q", 1000) + b"{}")
        with self.assertRaises(ValueError):
            common.read_safetensors(bad)

    def test_pass(self):
        self.assert_compare(self.ours(self.heads), 0, "output2 [1, 3, 2, 2]: rel_l2 0.000e+00")
        self.assert_compare(self.ours(self.heads, "F64"), 0)  # float64 in ours: read as well

    def test_mismatch_exits_1(self):
        heads = dict(self.heads)
        shape, values = heads["output0"]
        heads["output0"] = (shape, [v * 1.01 for v in values])
        path = self.ours(heads)
        self.assert_compare(path, 1, "FAIL", "rel_l2 1.000e-02")
        self.assert_compare(path, 0, extra=("--tolerance", "0.02"))

    def test_missing_or_misshapen_exits_2(self):
        heads = {k: v for k, v in self.heads.items() if k != "output1"}
        self.assert_compare(self.ours(heads), 2, "output1: missing in ours")
        heads = dict(self.heads, output1=([1, 2, 2, 3], self.heads["output1"][1]))
        self.assert_compare(self.ours(heads), 2, "output1: shape [1, 2, 2, 3] in ours")


class CalibrationPlanTest(unittest.TestCase):
    def test_enough_values_in_bounded_forwards(self):
        self.assertEqual(yr.calibration_plan(64), (2, 512))
        self.assertEqual(yr.calibration_plan(640), (2, 6))
        self.assertEqual(yr.calibration_plan(1280), (4, 2))
        for size in (32, 64, 96, 320, 640, 1280, 2560):
            forwards, per = yr.calibration_plan(size)
            images = forwards * per
            self.assertGreaterEqual(images * (size // 32) ** 2, yr.CAL_VALUES, size)
            self.assertGreaterEqual(images, yr.CAL_MIN_IMAGES, size)
            self.assertTrue(per == 1 or per * size * size <= yr.CAL_CHUNK_PIXELS, size)


class WithoutTorchTest(common.WithoutTorch, unittest.TestCase):
    """The tool with `import torch` failing (sys.modules["torch"] = None), torch installed or not:
    the module imports, the torch-free subcommands run, the others exit 2 with one line."""
    MODULE = "yolor_reference"
    SUMMARY, SUMMARY_SHOWS = ("--size", "1280"), "443.769 GMACs"
    WRITE_CASE = ("--size", "64")
    BENCH = ("--size", "64", "--batches", "1")

    def test_mode_names_are_compare_pytorchs(self):
        # The bench rows' mode names (torch_reference_common's, all three tools').
        import compare_pytorch
        self.assertEqual(common.MODE_NAMES, compare_pytorch.PYTORCH_MODES)


if __name__ == "__main__":
    unittest.main()
