"""Tests of tools/int8_estimate.py on a made-up layer table and probe: measured ratios, a ratio
borrowed from the same stage, none (unchanged), a block that stays fp16 because INT8 loses there,
layer1 and the downsample left out, a form that disagreed with its emulation ignored, the
residual forms preferred for conv3, .xz input, and bad input.

Run from the repository root:  python3 -m unittest -v tests/test_int8_estimate.py
"""
import json
import lzma
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "tools", "int8_estimate.py")
sys.path.insert(0, os.path.join(ROOT, "tools"))

import int8_estimate as ie  # noqa: E402


def layer(name, us):
    return {"name": name, "tuned_us": us, "op": "conv+bias+relu"}


LAYERS = {"models": [
    {"model": "resnet50/fp16/batch:32", "layers": [layer("layer2.0.conv2", 1.0)]},
    {"model": "resnet50/fp16/batch:256", "layers": [
        layer("conv1", 500.0),
        layer("layer1.0.conv2", 100.0),  # layer1: left out
        layer("layer2.0.conv1", 100.0),
        layer("layer2.0.conv2", 100.0),
        layer("layer2.0.conv3", 100.0),
        layer("layer2.0.downsample.0", 100.0),  # stays fp16
        layer("layer3.0.conv1", 50.0),
        layer("layer3.0.conv2", 80.0),
        layer("layer3.0.conv3", 120.0),
        layer("layer3.1.conv1", 50.0),
        layer("layer3.1.conv2", 80.0),
        layer("layer3.1.conv3", 120.0),
        layer("fc", 100.0)]}]}


def variant(name, us, agrees=True):
    return {"variant": name, "best_us": us, "agrees": agrees}


PROBE = {"context": {}, "settings": {}, "cases": [
    # layer2.0: INT8 loses overall (conv1 and conv3 slower, conv2 a little faster): stays fp16.
    {"layer": "layer2.0.conv1", "variants": [variant("fp16", 100.0), variant("fp16_to_int8", 125.0)]},
    {"layer": "layer2.0.conv2", "variants": [variant("fp16", 100.0),
                                             variant("int8_to_int8_per_channel", 90.0)]},
    {"layer": "layer2.0.conv3", "variants": [variant("fp16_residual", 100.0),
                                             variant("int8_to_fp16_residual", 125.0)]},
    # layer3.1: measured; conv3 has both residual forms and the plain ones (the residual's win).
    # conv1's INT8 form ran fast but departed from its emulation: not counted.
    {"layer": "layer3.1.conv1", "variants": [variant("fp16", 50.0),
                                             variant("fp16_to_int8", 1.0, agrees=False)]},
    {"layer": "layer3.1.conv2", "variants": [variant("fp16", 80.0),
                                             variant("int8_to_int8_per_channel", 40.0)]},
    {"layer": "layer3.1.conv3", "variants": [variant("fp16", 120.0),
                                             variant("int8_to_fp16_per_channel", 60.0),
                                             variant("fp16_residual", 120.0),
                                             variant("int8_to_fp16_residual", 100.0)]},
]}


class Estimate(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.e = ie.estimate(LAYERS, PROBE, r"^resnet50/fp16/batch:256$", 2)
        cls.by = {c["name"]: c for b in cls.e["blocks"] for c in b["convs"]}
        cls.blocks = {b["block"]: b for b in cls.e["blocks"]}

    def test_only_bottleneck_convs_from_layer2(self):
        self.assertEqual(sorted(self.by), ["layer2.0.conv1", "layer2.0.conv2", "layer2.0.conv3",
                                           "layer3.0.conv1", "layer3.0.conv2", "layer3.0.conv3",
                                           "layer3.1.conv1", "layer3.1.conv2", "layer3.1.conv3"])

    def test_measured_ratios_and_the_residual_form_first(self):
        c = self.by["layer3.1.conv3"]
        self.assertEqual(c["form"], "int8_to_fp16_residual")
        self.assertAlmostEqual(c["ratio"], 1.2)
        self.assertEqual(c["source"], "measured")
        self.assertAlmostEqual(c["saved"], 120.0 * (1 - 1 / 1.2))

    def test_a_form_that_disagreed_is_not_used(self):
        for name in ("layer3.1.conv1", "layer3.0.conv1"):
            c = self.by[name]
            self.assertAlmostEqual(c["ratio"], 1.0, msg=name)
            self.assertEqual(c["source"], "no probe", msg=name)

    def test_same_stage_borrowed(self):
        c = self.by["layer3.0.conv2"]
        self.assertAlmostEqual(c["ratio"], 2.0)
        self.assertEqual(c["source"], "same stage (layer3.1.conv2)")

    def test_a_losing_block_stays_fp16(self):
        b = self.blocks["layer2.0"]
        self.assertFalse(b["int8"])
        self.assertLess(b["saved"], 0)
        self.assertTrue(self.blocks["layer3.1"]["int8"])

    def test_totals(self):
        self.assertAlmostEqual(self.e["layers_us"], 1600.0)
        per_block = 40.0 + 20.0  # conv2 80 -> 40, conv3 120 -> 100 (the residual forms)
        self.assertAlmostEqual(self.e["saved_us"], 2 * per_block)
        md = ie.markdown(self.e)
        self.assertIn("Of the layers' 1,600.0 us, 120.0 us would go (7.5%)", md)
        self.assertIn("| **layer2.0** | | | | | stays fp16 |", md)

    def test_no_probe_is_unchanged(self):
        e = ie.estimate(LAYERS, {"cases": []}, r"batch:256", 2)
        self.assertEqual(e["saved_us"], 0.0)
        self.assertTrue(all(c["source"] == "no probe" for b in e["blocks"] for c in b["convs"]))


class Program(unittest.TestCase):
    def run_tool(self, *args):
        return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)

    def test_xz_layers_and_out_md(self):
        with tempfile.TemporaryDirectory() as d:
            lp, pp, out = (os.path.join(d, n) for n in ("l.layers.json.xz", "p.json", "e.md"))
            with lzma.open(lp, "wt") as f:
                json.dump(LAYERS, f)
            with open(pp, "w") as f:
                json.dump(PROBE, f)
            r = self.run_tool("--layers", lp, "--probe", pp, "--out-md", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                self.assertIn("120.0 us would go", f.read())

    def test_bad_input_one_line_exit_2(self):
        with tempfile.TemporaryDirectory() as d:
            lp, pp = os.path.join(d, "l.json"), os.path.join(d, "p.json")
            with open(lp, "w") as f:
                json.dump(LAYERS, f)
            with open(pp, "w") as f:
                f.write("{not json")
            r = self.run_tool("--layers", lp, "--probe", pp)
            self.assertEqual(r.returncode, 2)
            self.assertRegex(r.stderr, r"^int8_estimate: .*p\.json: not JSON \(line 1")
            with open(pp, "w") as f:
                json.dump(PROBE, f)
            r = self.run_tool("--layers", lp, "--probe", pp, "--model", "vgg16")
            self.assertEqual(r.returncode, 2)
            self.assertIn("no model matches 'vgg16' (it has: resnet50/fp16/batch:32, "
                          "resnet50/fp16/batch:256)", r.stderr)
            r = self.run_tool("--layers", os.path.join(d, "missing.json"), "--probe", pp)
            self.assertEqual(r.returncode, 2)
            self.assertIn("missing.json: cannot read", r.stderr)
            r = self.run_tool("--layers", lp, "--probe", lp)
            self.assertEqual(r.returncode, 2)
            self.assertIn("not a cnnbench_fp8_probe JSON", r.stderr)


if __name__ == "__main__":
    unittest.main()
