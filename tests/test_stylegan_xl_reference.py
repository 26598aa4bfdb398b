"""Tests of tools/stylegan_xl_reference.py (stdlib unittest; the torch parts skip without torch).

    python3 -m unittest -v tests/test_stylegan_xl_reference.py

Without torch: the parameter totals against networks.md 9.3's; the layer names of a grown 32 px
network; the stem's schedule against StyleGAN3's (14 layers) and its input; the head's schedule
(compute_superres_filterparams' entry 0 is the last kept layer's); the state_dict's XL names;
argument checks; compare; summary, and the torch-free subcommands with torch blocked. With torch:
the model's state_dict is the layer list's, the mapping is its written-out form and reads the
class, and (with safetensors) write-case runs on a tiny grown network.
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
import stylegan_xl_reference as xl  # noqa: E402
import torch_reference_common as common  # noqa: E402

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_SAFETENSORS = importlib.util.find_spec("safetensors") is not None

run_main = functools.partial(common.run_main, xl.main)  # (status, stdout, stderr)

# The brief's tiny case: 32 px, a 4-layer stem, 3-layer heads, 10 classes, narrow channels.
TINY = dict(resolution=32, syn_layers=4, head_layers=3, classes=10, channel_base=256,
            channel_max=32)
TINY_ARGS = ["--resolution", "32", "--syn-layers", "4", "--head-layers", "3", "--classes", "10",
             "--channel-base", "256", "--channel-max", "32"]


def names(resolution, **kw):
    return [L["name"] for L in xl.layer_specs(resolution, **kw)]


class ParametersTest(unittest.TestCase):
    def test_totals_are_networks_md(self):
        for (r, syn, head, classes, cb, cm), total in xl.EXPECTED_PARAMETERS.items():
            self.assertEqual(xl.param_count(r, syn, head, classes, cb, cm), total, (r, syn))
        self.assertEqual(xl.param_count(16), 101_883_463)
        self.assertEqual(xl.param_count(256), 233_375_910)
        self.assertEqual(xl.param_count(512), 235_471_137)
        self.assertEqual(xl.param_count(1024), 236_106_655)
        self.assertEqual(xl.param_count(16, 14), 141_737_543)
        self.assertEqual(xl.param_count(256, 14), 273_156_689)
        self.assertEqual(xl.param_count(1024, 14), 275_887_434)

    def test_mapping_counts(self):
        # embed 1000 x 320, embed_proj 320 -> 64, fc0 128 -> 512, fc1 512 -> 512; w_avg not.
        mapping = 1000 * 320 + (320 * 64 + 64) + (128 * 512 + 512) + (512 * 512 + 512)
        self.assertEqual(xl.module_param_counts(256)["mapping"], mapping)
        self.assertEqual(xl.module_param_counts(256, classes=10)["mapping"], mapping)
        shapes = dict(xl.param_specs(256, classes=10, buffers=True))
        self.assertEqual(shapes["mapping.w_avg"], [10, 512])
        self.assertEqual(shapes["mapping.embed.weight"], [1000, 320])
        self.assertEqual(shapes["mapping.embed_proj.weight"], [64, 320])
        self.assertEqual(shapes["mapping.embed_proj.bias"], [64])
        self.assertEqual(shapes["mapping.fc0.weight"], [512, 128])
        self.assertNotIn("mapping.w_avg", dict(xl.param_specs(256)))
        # The classes change only w_avg: the count does not depend on them.
        self.assertEqual(xl.param_count(256, classes=10), xl.param_count(256))


class ScheduleTest(unittest.TestCase):
    def test_grown_32px_names(self):
        got = names(32)
        self.assertEqual(got[:8], [f"L{i}_36_1024" for i in range(8)])  # the stem's kept
        self.assertEqual(got[8], "L9_36_1024")  # stem_len 9: L8 is skipped
        self.assertEqual(got[-1], "L16_32_3")
        self.assertEqual(got[-2], "L15_32_1024")
        self.assertEqual(len(got), 8 + 7 + 1)
        self.assertEqual([L["stage"] for L in xl.layer_specs(32)], [16] * 8 + [32] * 8)
        self.assertEqual(names(16)[-3:], ["L8_36_1024", "L9_16_1024", "L10_16_3"])
        # Each stage replaces the last 3 entries with 8: 11 + 5 x 5 at 512.
        self.assertEqual(len(names(512)), 11 + 5 * 5)

    def test_tiny_names(self):
        self.assertEqual(names(32, syn_layers=4, head_layers=3, channel_base=256,
                               channel_max=32),
                         ["L0_36_32", "L1_36_32", "L3_36_32", "L4_52_8", "L5_32_8", "L6_32_3"])

    def test_stem_is_stylegan3s_schedule(self):
        # With 14 layers the stem is StyleGAN3's 16 px synthesis, layer for layer.
        self.assertEqual(xl.stem_schedule(14, 32768, 512), sg3.schedule(16, 32768, 512))
        ours = xl.layer_specs(16, syn_layers=14, channel_base=32768, channel_max=512)
        for L in ours:
            del L["stage"]
        self.assertEqual(ours, sg3.layer_specs(16, "t"))
        self.assertEqual(xl.input_spec(), sg3.input_spec(16, "t", 65536, 1024))
        self.assertEqual(xl.input_spec(256, 32), sg3.input_spec(16, "t", 256, 32))

    def test_head_schedule(self):
        stem = xl.stem_schedule(10, 65536, 1024)
        last = stem[10 - 3]  # the last kept layer's entry
        h = xl.head_schedule(last, 32, 7, 65536, 1024)
        self.assertEqual(len(h), 8)
        self.assertAlmostEqual(h[0]["cutoff"], last["cutoff"])
        self.assertEqual(h[0]["sampling_rate"], last["sampling_rate"])
        self.assertEqual(h[0]["channels"], last["channels"])
        self.assertAlmostEqual(h[0]["half_width"], last["half_width"])
        self.assertEqual(h[0]["size"], last["size"])
        self.assertAlmostEqual(h[5]["cutoff"], 16.0)
        self.assertAlmostEqual(h[7]["stopband"], 16 * 2 ** 0.3)
        self.assertEqual([e["size"] for e in h[-2:]], [32, 32])
        self.assertEqual(h[-1]["channels"], 3)
        # networks.md 9.3's head channels (each stage's own head, before the next cuts it):
        # 128 px 1024 -> 512, 256 px 609 -> 256, 512 px 304 -> 128, 1024 px 152 -> 64.
        by_stage = {}
        for r in (32, 64, 128, 256, 512, 1024):
            head = [L["out_channels"] for L in xl.layer_specs(r) if L["stage"] == r]
            by_stage[r] = head
        self.assertEqual((by_stage[128][0], by_stage[128][-2]), (1024, 512))
        self.assertEqual((by_stage[256][0], by_stage[256][-2]), (609, 256))
        self.assertEqual((by_stage[512][0], by_stage[512][-2]), (304, 128))
        self.assertEqual((by_stage[1024][0], by_stage[1024][-2]), (152, 64))
        self.assertEqual(set(by_stage[32][:-1]) | set(by_stage[64][:-1]), {1024})

    def test_geometry_lands_and_filters(self):
        for L in xl.layer_specs(1024):
            self.assertEqual(sg3.upfirdn_out_size(L["tmp_size"], L["down_taps"], 1, L["down"]),
                             L["out_size"])
            up, down = sg3.layer_filters(L)
            self.assertEqual(up is None, L["up_taps"] == 1)
            self.assertEqual(down is None, L["down_taps"] == 1)
        last = xl.layer_specs(1024)[-1]
        self.assertTrue(last["torgb"])
        self.assertEqual((last["in_size"], last["out_size"], last["kernel"]), (1024, 1024, 1))

    def test_bad_arguments(self):
        for kw in (dict(resolution=8), dict(resolution=48), dict(resolution=32, classes=0),
                   dict(resolution=32, classes=1001), dict(resolution=32, syn_layers=2),
                   dict(resolution=32, head_layers=2), dict(resolution=32, channel_max=0)):
            with self.assertRaises(ValueError, msg=str(kw)):
                xl.network(**kw)


class CompareSubcommandTest(common.ImageCompareFiles, unittest.TestCase):
    main = staticmethod(xl.main)
    TOLERANCE = 1e-3


class SummaryTest(unittest.TestCase):
    def test_summary_subcommand(self):
        status, out, err = run_main(["summary", "--resolution", "256"])
        self.assertEqual(status, 0, err)
        self.assertIn("stylegan_xl_256", out)
        self.assertIn("= networks.md 9.3's 233,375,910", out)
        status, out, err = run_main(["summary", "--resolution", "1024", "--syn-layers", "14"])
        self.assertEqual(status, 0, err)
        self.assertIn("275,887,434 parameters", out)
        status, out, err = run_main(["summary", *TINY_ARGS])
        self.assertEqual(status, 0, err)
        self.assertIn("L6_32_3", out)
        self.assertNotIn("networks.md", out)
        status, _, err = run_main(["summary", "--resolution", "300"])
        self.assertEqual(status, 2)
        self.assertIn("power of two", err)


class WithoutTorchTest(common.WithoutTorch, unittest.TestCase):
    MODULE = "stylegan_xl_reference"
    SUMMARY = ("--resolution", "16")
    SUMMARY_SHOWS = "101,883,463 parameters"
    WRITE_CASE = tuple(TINY_ARGS)
    BENCH = ("--resolution", "16", "--batches", "1")


@unittest.skipUnless(HAVE_TORCH, "torch not installed")
class TorchTest(unittest.TestCase):
    def test_model_state_dict_is_the_layer_list(self):
        model = xl.build_model(**TINY)
        xl.check_model(model)  # raises on a difference
        self.assertEqual(model.synthesis.layer_names, names(32, syn_layers=4, head_layers=3,
                                                            channel_base=256, channel_max=32))

    def test_mapping_reads_the_class(self):
        import torch
        model = xl.build_model(**TINY)
        g = torch.Generator().manual_seed(5)
        sg3.randomize(model, g)
        z = torch.randn([3, 64], generator=g)
        z[1] = z[0]
        x = xl.make_input(torch, z, torch.tensor([2, 7, 2]), 10)
        self.assertEqual(list(x.shape), [3, 74, 1, 1])
        with torch.no_grad():
            w = model.mapping(x)
            img = model(x)
        self.assertLess(common.rel_l2(w, xl.mapping_explicit(model, x)), 1e-5)
        self.assertGreater(common.rel_l2(w[1], w[0]), 1e-2)  # same z, another class
        self.assertEqual(list(img.shape), [3, 3, 32, 32])
        self.assertTrue(torch.isfinite(img).all())

    @unittest.skipUnless(HAVE_SAFETENSORS, "safetensors not installed")
    def test_write_case_tiny(self):
        with tempfile.TemporaryDirectory() as d:
            status, out, err = run_main(["write-case", "--dir", d, *TINY_ARGS, "--batch", "2",
                                         "--seed", "1"])
            self.assertEqual(status, 0, out + err)
            self.assertIn("output0 [2, 3, 32, 32]", out)
            x, _ = common.read_safetensors(os.path.join(d, "input.safetensors"))
            self.assertEqual(x["input"].shape, [2, 74, 1, 1])
            weights, _ = common.read_safetensors(os.path.join(d, "weights.safetensors"))
            self.assertEqual(sorted((k, t.shape) for k, t in weights.items()),
                             sorted(xl.param_specs(32, 4, 3, 10, 256, 32, buffers=True)))


if __name__ == "__main__":
    unittest.main()
