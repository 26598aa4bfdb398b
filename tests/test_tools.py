"""Tests of the Python tools (stdlib unittest); those needing torch skip where it is missing.

Run from anywhere:  python3 -m unittest tests/test_tools.py   (or: python3 tests/test_tools.py)
Covers tools/compare_pytorch.py (Google Benchmark JSON parsing, median choice, ratios, --check
exit codes, error cells) on synthetic files, tools/seed_table.py on tests/data/gb_zoo_fixture.json
and the seed CSV, tools/gen_mxnet_param_list.py's counts and its checked-in lists, and the
checked-in tests/data state_dict lists, the torch-free parts of pytorch_train_baseline.py
(options, rows) and train_step_crosscheck.py (options, the binary's command, the verdicts); with
torch also gen_state_dict_list.py against them, crosscheck_torchvision.py --dry-run and
pytorch_baseline.py's input sizes.
"""
import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")
DATA = os.path.join(ROOT, "tests", "data")
sys.path.insert(0, TOOLS)

import compare_pytorch as cp  # noqa: E402
import gen_mxnet_param_list as gm  # noqa: E402
import seed_table as st  # noqa: E402

HAVE_TORCH = (importlib.util.find_spec("torch") is not None
              and importlib.util.find_spec("torchvision") is not None)


# --------------------------------------------------------------------------------------------
# Synthetic inputs
# --------------------------------------------------------------------------------------------
def gb_entry(net, prec, mode, batch, img_s, run_type="iteration", rep=0, reps=1, agg=None,
             error=None):
    """One Google Benchmark 1.7 JSON entry like cnnbench writes (ms time unit, top-level counters)."""
    run_name = f"{net}/{prec}/{mode}/batch:{batch}"
    e = {"name": run_name + (f"_{agg}" if agg else ""), "run_name": run_name,
         "run_type": run_type, "repetitions": reps, "threads": 1, "time_unit": "ms",
         "family_index": 0, "per_family_instance_index": 0}
    if run_type == "iteration":
        e["repetition_index"] = rep
        e["iterations"] = 100
    else:
        e["aggregate_name"] = agg
        e["aggregate_unit"] = "percentage" if agg == "cv" else "time"
    if error:
        e.update(error_occurred=True, error_message=error)
        return e
    ms = batch / img_s * 1e3 if img_s else 0.0
    e.update(real_time=ms, cpu_time=ms / 10, img_per_s=img_s, ms_per_batch=ms, tflops=1.0,
             batch=batch, arena_peak_mib=100.0, device_peak_mib=200.0)
    return e


def gb_repeated(net, prec, mode, batch, values, median_agg=None):
    """Iteration entries for `values`, then mean/median/stddev/cv aggregates (median_agg or the
    true median, so a test can tell which one the parser used)."""
    n = len(values)
    out = [gb_entry(net, prec, mode, batch, v, rep=i, reps=n) for i, v in enumerate(values)]
    srt = sorted(values)
    true_median = srt[n // 2] if n % 2 else (srt[n // 2 - 1] + srt[n // 2]) / 2
    for agg, v in (("mean", sum(values) / n), ("median", median_agg or true_median),
                   ("stddev", 1.0), ("cv", 0.01)):
        out.append(gb_entry(net, prec, mode, batch, v, run_type="aggregate", reps=n, agg=agg))
    return out


CONTEXT = {"date": "2026-12-02T16:00:00+00:00", "host_name": "gpu-host",
           "executable": "build/release/cnnbench", "num_cpus": 16, "library_build_type": "release",
           "gpu_name": "NVIDIA H200", "gpu_sm_count": "132", "gpu_memory_mib": "143771",
           "driver_version": "580.00", "cudnn_version_loaded": "91900",
           "cudnn_version_compiled": "91900", "cnnbench_version": "0.1.0",
           "cnnbench_git": "abcdef123456"}


def pt_row(mode, batch, img_s, model="resnet50", with_range=True, error=None):
    if error:
        return {"model": model, "mode": mode, "batch": batch, "error": error}
    ms = batch / img_s * 1e3
    r = {"model": model, "mode": mode, "batch": batch, "ms": ms, "img_s": img_s, "peak_mib": 90.0}
    if with_range:
        r.update(ms_min=ms * 0.9, ms_max=ms * 1.1, reps=[ms * 0.9, ms, ms * 1.1])
    return r


class TempFiles(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, name, obj):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            json.dump(obj, f)
        return path

    def gb(self, entries, name="cnnbench.json"):
        return self.write(name, {"context": CONTEXT, "benchmarks": entries})

    def pt(self, rows, name="pytorch.json", **header):
        doc = {"torch": "2.11.0+cu130", "torchvision": "0.26.0", "cudnn": 91900,
               "gpu": "NVIDIA H200", "date": "2026-12-02T16:00:00+00:00", **header, "rows": rows}
        return self.write(name, doc)

    def run_main(self, *argv):
        """compare_pytorch.main in-process: (exit code, stdout)."""
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = cp.main(list(argv))
        return rc, out.getvalue()


# --------------------------------------------------------------------------------------------
class ParseTest(TempFiles):
    def test_parse_name(self):
        self.assertEqual(cp.parse_name("resnet50/fp16/graph/batch:32"),
                         ("resnet50", "fp16", "graph", 32))
        self.assertEqual(cp.parse_name("resnet50/fp16/graph/batch:32_median"),
                         ("resnet50", "fp16", "graph", 32))
        self.assertEqual(cp.parse_name("resnet152/bf16/eager/batch:256/real_time"),
                         ("resnet152", "bf16", "eager", 256))
        self.assertIsNone(cp.parse_name("BM_something"))
        self.assertIsNone(cp.parse_name("a/b/c/d"))

    def test_median_aggregate_preferred(self):
        # Iteration median is 1000; the median aggregate says 1001 and must win.
        entries = gb_repeated("resnet50", "fp16", "graph", 8, [990, 1000, 1010, 980, 1020],
                              median_agg=1001)
        ctx, cells = cp.load_cnnbench(self.gb(entries))
        c = cells[("resnet50", "fp16", "graph", 8)]
        self.assertAlmostEqual(c.img_s, 1001, places=6)
        self.assertAlmostEqual(c.lo, 980, places=6)
        self.assertAlmostEqual(c.hi, 1020, places=6)
        self.assertEqual(c.n, 5)
        self.assertEqual(ctx["gpu_name"], "NVIDIA H200")

    def test_median_of_iterations_without_aggregates(self):
        odd = [gb_entry("resnet50", "fp16", "graph", 1, v, rep=i, reps=3)
               for i, v in enumerate([300, 100, 200])]
        even = [gb_entry("resnet50", "fp16", "eager", 1, v, rep=i, reps=4)
                for i, v in enumerate([100, 400, 200, 300])]
        _, cells = cp.load_cnnbench(self.gb(odd + even))
        self.assertAlmostEqual(cells[("resnet50", "fp16", "graph", 1)].img_s, 200)
        self.assertAlmostEqual(cells[("resnet50", "fp16", "eager", 1)].img_s, 250)
        self.assertAlmostEqual(cells[("resnet50", "fp16", "eager", 1)].lo, 100)
        self.assertAlmostEqual(cells[("resnet50", "fp16", "eager", 1)].hi, 400)

    def test_single_run_and_time_fallback(self):
        e = gb_entry("resnet50", "fp16", "graph", 4, 2000)
        del e["img_per_s"]  # img/s then comes from batch / real_time (ms)
        _, cells = cp.load_cnnbench(self.gb([e]))
        self.assertAlmostEqual(cells[("resnet50", "fp16", "graph", 4)].img_s, 2000, places=6)

    def test_error_entries_become_error_cells(self):
        entries = [gb_entry("resnet50", "fp16", "graph", 256, None, error="out of memory")]
        entries += gb_repeated("resnet50", "fp16", "graph", 1, [1500, 1600, 1700])
        _, cells = cp.load_cnnbench(self.gb(entries))
        c = cells[("resnet50", "fp16", "graph", 256)]
        self.assertFalse(c.ok)
        self.assertEqual(c.error, "out of memory")
        self.assertTrue(cells[("resnet50", "fp16", "graph", 1)].ok)

    def test_cut_off_run_keeps_finished_benchmarks(self):
        # A sweep killed mid-way: Google Benchmark never closed its list, and the last entry is
        # half written. Every complete entry is kept and the table says the run was cut off.
        entries = gb_repeated("resnet50", "fp16", "graph", 1, [3000, 3100, 3050], median_agg=3050)
        entries += [gb_entry("resnet50", "fp16", "graph", 8, v, rep=i, reps=3)
                    for i, v in enumerate([15000, 15100, 15200])]
        text = json.dumps({"context": CONTEXT, "benchmarks": entries}, indent=2)
        cut = text.rfind('"img_per_s"')  # inside the last entry
        path = os.path.join(self.dir, "cut.json")
        with open(path, "w") as f:
            f.write(text[:cut])
        ctx, cells = cp.load_cnnbench(path)
        self.assertTrue(ctx.get("truncated"))
        self.assertAlmostEqual(cells[("resnet50", "fp16", "graph", 1)].img_s, 3050)
        self.assertEqual(cells[("resnet50", "fp16", "graph", 8)].n, 2)  # the third was cut
        with open(path, "w") as f:
            f.write("not json at all")
        with self.assertRaises(ValueError):
            cp.load_cnnbench(path)

    def test_pytorch_baseline_and_reference_formats(self):
        rows = [pt_row("fp16cl", 1, 300), pt_row("fp16cl_graph", 1, 1000),
                pt_row("fp16cl_graph", 8, 7000, with_range=False),  # reference-file style
                pt_row("fp32", 1, 180), pt_row("fp16cl", 1, 99, model="vgg16"),
                pt_row("fp16cl_graph", 256, None, error="CUDA out of memory")]
        hdr, cells = cp.load_pytorch(self.pt(rows), "resnet50", "fp16")
        self.assertEqual(set(cells), {("eager", 1), ("graph", 1), ("graph", 8), ("graph", 256)})
        g1 = cells[("graph", 1)]
        self.assertAlmostEqual(g1.img_s, 1000)
        self.assertAlmostEqual(g1.lo, 1000 / 1.1)  # slowest repetition
        self.assertAlmostEqual(g1.hi, 1000 / 0.9)
        self.assertIsNone(cells[("graph", 8)].lo)
        self.assertFalse(cells[("graph", 256)].ok)
        self.assertEqual(hdr["torch"], "2.11.0+cu130")

    @unittest.skipUnless(os.path.exists(os.path.join(ROOT, "..", "shared", "reference",
                                                     "pytorch_h200_2026-12-02.json")),
                         "shared reference file not present")
    def test_shared_reference_file(self):
        path = os.path.join(ROOT, "..", "shared", "reference", "pytorch_h200_2026-12-02.json")
        _, cells = cp.load_pytorch(path, "resnet50", "fp16")
        self.assertEqual(sorted(b for m, b in cells if m == "graph"), [1, 8, 32, 256])
        self.assertEqual(len([1 for m, _ in cells if m == "eager"]), 9)
        self.assertGreater(cells[("graph", 1)].img_s, 1000)


# --------------------------------------------------------------------------------------------
class TableAndCheckTest(TempFiles):
    def files(self, cb_graph, pt_graph, cb_eager=None, pt_eager=None, gb_extra=()):
        """cb_graph etc.: {batch: img_s}; cnnbench graph rows get 3 repetitions + aggregates."""
        entries = []
        for b, v in cb_graph.items():
            entries += gb_repeated("resnet50", "fp16", "graph", b, [v * 0.98, v, v * 1.02])
        for b, v in (cb_eager or {}).items():
            entries.append(gb_entry("resnet50", "fp16", "eager", b, v))
        entries += list(gb_extra)
        rows = [pt_row("fp16cl_graph", b, v) for b, v in pt_graph.items()]
        rows += [pt_row("fp16cl", b, v) for b, v in (pt_eager or {}).items()]
        return self.gb(entries), self.pt(rows)

    def test_ratio_and_table(self):
        gb, pt = self.files({1: 2000, 8: 9000, 32: 14000}, {1: 1000, 8: 7500},
                            cb_eager={1: 800}, pt_eager={1: 300, 32: 9000})
        rc, out = self.run_main("--cnnbench", gb, "--pytorch", pt)
        self.assertEqual(rc, 0)
        _, cb = cp.load_cnnbench(gb)
        _, ptc = cp.load_pytorch(pt, "resnet50", "fp16")
        rows = cp.build_rows(cb, ptc, "resnet50", "fp16")
        self.assertEqual([r["batch"] for r in rows], [1, 8, 32])
        self.assertAlmostEqual(rows[0]["ratio"], 2.0)
        self.assertAlmostEqual(rows[1]["ratio"], 1.2)
        self.assertIsNone(rows[2]["ratio"])  # no PyTorch graph row at batch 32
        table = [line for line in out.splitlines() if line.startswith("| ")]
        self.assertEqual(len(table), 4)  # header + 3 batches
        self.assertIn("| 1 | 2,000 (1,960–2,040) | 800 | 300 (273–333) | 1,000 (909–1,111) | "
                      "2.00x |", out)
        self.assertIn("| 32 | 14,000 (13,720–14,280) | – | 9,000 (8,182–10,000) | – | – |", out)
        self.assertIn("gpu_name=NVIDIA H200", out)
        self.assertIn("cnnbench_git=abcdef123456", out)

    def test_out_md(self):
        gb, pt = self.files({1: 2000}, {1: 1000})
        md = os.path.join(self.dir, "table.md")
        rc, out = self.run_main("--cnnbench", gb, "--pytorch", pt, "--out-md", md)
        self.assertEqual(rc, 0)
        with open(md) as f:
            self.assertEqual(f.read(), out)

    def test_check_passes(self):
        gb, pt = self.files({1: 1600, 8: 7100, 256: 17200}, {1: 1000, 8: 7000, 256: 17197})
        rc, out = self.run_main("--cnnbench", gb, "--pytorch", pt, "--check")
        self.assertEqual(rc, 0, out)
        self.assertIn("check passed", out)

    def test_check_fails_at_batch1_ratio(self):
        gb, pt = self.files({1: 1400, 8: 9000}, {1: 1000, 8: 7000})  # 1.4x < 1.5x
        rc, out = self.run_main("--cnnbench", gb, "--pytorch", pt, "--check")
        self.assertEqual(rc, 1)
        self.assertIn("batch 1:", out)

    def test_batch1_ratio_is_a_setting(self):
        gb, pt = self.files({1: 1400, 8: 9000}, {1: 1000, 8: 7000})  # 1.4x: enough for 1.3x
        rc, out = self.run_main("--cnnbench", gb, "--pytorch", pt, "--check", "--batch1-ratio", "1.3")
        self.assertEqual(rc, 0, out)
        rc, _ = self.run_main("--cnnbench", gb, "--pytorch", pt, "--check", "--batch1-ratio", "1.45")
        self.assertEqual(rc, 1)

    def test_check_fails_when_slower_at_a_larger_batch(self):
        gb, pt = self.files({1: 2000, 32: 13000}, {1: 1000, 32: 13500})
        rc, out = self.run_main("--cnnbench", gb, "--pytorch", pt, "--check")
        self.assertEqual(rc, 1)
        self.assertIn("batch 32:", out)

    def test_check_fails_without_batch1(self):
        gb, pt = self.files({8: 9000}, {8: 7000})
        rc, _ = self.run_main("--cnnbench", gb, "--pytorch", pt, "--check")
        self.assertEqual(rc, 1)

    def test_error_cells_shown_and_fail_check(self):
        err = gb_entry("resnet50", "fp16", "graph", 256, None, error="cudnnBackendFinalize failed")
        gb, pt = self.files({1: 2000}, {1: 1000, 256: 17000}, gb_extra=[err])
        rc, out = self.run_main("--cnnbench", gb, "--pytorch", pt)
        self.assertEqual(rc, 0)  # without --check an error is only shown
        self.assertIn("| 256 | error |", out)
        self.assertIn("cudnnBackendFinalize failed", out)
        rc, out = self.run_main("--cnnbench", gb, "--pytorch", pt, "--check")
        self.assertEqual(rc, 1)
        self.assertIn("batch 256:", out)

    def test_sizes_and_model_name_and_check_against_eager(self):
        """A network at two sizes: --input-size keeps one on both sides (a cnnbench name without
        /size:N is at --default-size); --pytorch-model names the PyTorch rows; --against eager
        checks against PyTorch eager, and its column is there."""
        def sized(entry, size):
            for k in ("name", "run_name"):
                base, _, rest = entry[k].partition("/batch:")
                b, _, suffix = rest.partition("_")
                entry[k] = f"{base}/batch:{b}/size:{size}" + (f"_{suffix}" if suffix else "")
            return entry
        entries = gb_repeated("stylegan3_t", "fp16", "graph", 1, [13.0, 13.1, 13.2])
        entries += [sized(e, 256) for e in gb_repeated("stylegan3_t", "fp16", "graph", 1,
                                                       [42.0, 42.6, 43.0])]
        rows = [dict(pt_row("fp16cl", 1, 17.3, model="stylegan3_t_x"), input_size=1024),
                dict(pt_row("fp16cl", 1, 31.6, model="stylegan3_t_x"), input_size=256),
                dict(pt_row("fp16cl_graph", 1, 32.9, model="stylegan3_t_x"), input_size=256)]
        gb, pt = self.gb(entries), self.pt(rows)
        self.assertEqual(cp.name_size("stylegan3_t/fp16/graph/batch:1/size:256_median"), 256)
        self.assertIsNone(cp.name_size("stylegan3_t/fp16/graph/batch:1"))
        common = ["--cnnbench", gb, "--pytorch", pt, "--network", "stylegan3_t",
                  "--pytorch-model", "stylegan3_t_x", "--default-size", "1024",
                  "--batch1-ratio", "1", "--check", "--against", "eager"]
        rc, out = self.run_main(*common, "--input-size", "256")
        self.assertEqual(rc, 0, out)
        self.assertIn("at 256", out)
        self.assertIn("| 1 | 42.6 (42.0–43.0) | – | 31.6 (28.7–35.1) | 32.9 (29.9–36.6) | "
                      "1.29x | 1.35x |", out)
        rc, out = self.run_main(*common, "--input-size", "1024")  # 13.1 < 17.3: fails
        self.assertEqual(rc, 1, out)
        self.assertIn("PyTorch eager", out)
        self.assertIn("| 1 | 13.1 (13.0–13.2) |", out)
        rc, out = self.run_main(*common[:-2], "--input-size", "256")  # against graph: 1.29x
        self.assertEqual(rc, 0, out)

    def test_pytorch_error_row_is_an_error_cell_not_a_failure(self):
        gb, pt_path = self.files({1: 2000, 256: 17000}, {1: 1000})
        with open(pt_path) as f:
            doc = json.load(f)
        doc["rows"].append(pt_row("fp16cl_graph", 256, None, error="CUDA out of memory"))
        pt = self.write("pytorch_err.json", doc)
        rc, out = self.run_main("--cnnbench", gb, "--pytorch", pt, "--check")
        self.assertEqual(rc, 0, out)
        self.assertIn("| 256 | 17,000 (16,660–17,340) | – | – | error | – |", out)

    def test_command_line_exit_codes(self):
        """The script as a program: exit 0 / 1 from --check, 2 for an unreadable input."""
        script = os.path.join(TOOLS, "compare_pytorch.py")
        good_gb, good_pt = self.files({1: 2000}, {1: 1000})
        args = [sys.executable, script, "--cnnbench", good_gb, "--pytorch", good_pt, "--check"]
        self.assertEqual(subprocess.run(args, capture_output=True).returncode, 0)
        slow_gb = self.gb(gb_repeated("resnet50", "fp16", "graph", 1, [900, 950, 1000]),
                          name="slow.json")
        args[3] = slow_gb
        self.assertEqual(subprocess.run(args, capture_output=True).returncode, 1)
        args[3] = os.path.join(self.dir, "missing.json")
        self.assertEqual(subprocess.run(args, capture_output=True).returncode, 2)


# --------------------------------------------------------------------------------------------
def read_state_dict_list(path):
    """[(name, dtype, shape tuple)] from a tests/data/*_state_dict.txt list; '-' is a scalar."""
    entries = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, dtype, shape = line.split()
            entries.append((name, dtype, () if shape == "-" else
                            tuple(int(d) for d in shape.split(","))))
    return entries


def param_count_comment(path):
    with open(path) as f:
        for line in f:
            if line.startswith("# trainable parameters:"):
                return int(line.split(":")[1])
    return None


class StateDictListTest(unittest.TestCase):
    def check_list(self, network, n_entries, n_params, last):
        path = os.path.join(DATA, f"{network}_state_dict.txt")
        entries = read_state_dict_list(path)
        self.assertEqual(len(entries), n_entries)
        self.assertEqual(entries[0], ("conv1.weight", "float32", (64, 3, 7, 7)))
        self.assertEqual(entries[-1], last)
        self.assertIn(("bn1.num_batches_tracked", "int64", ()), entries)
        self.assertEqual(len({e[0] for e in entries}), n_entries)  # names are unique
        self.assertEqual(param_count_comment(path), n_params)
        with open(path) as f:
            self.assertTrue(f.readline().startswith("# generated by: python3 "
                                                    "tools/gen_state_dict_list.py (torch "))
        return entries

    def test_resnet50(self):
        entries = self.check_list("resnet50", 320, 25_557_032, ("fc.bias", "float32", (1000,)))
        # Every BN has 5 entries; parameters = weight/bias of convs (no bias), BNs and fc.
        self.assertEqual(sum(1 for e in entries if e[0].endswith("num_batches_tracked")), 53)
        self.assertIn(("layer4.2.conv3.weight", "float32", (2048, 512, 1, 1)), entries)
        self.assertIn(("layer1.0.downsample.0.weight", "float32", (256, 64, 1, 1)), entries)
        self.assertIn(("fc.weight", "float32", (1000, 2048)), entries)

    def test_resnet152(self):
        entries = self.check_list("resnet152", 932, 60_192_808, ("fc.bias", "float32", (1000,)))
        self.assertIn(("layer3.35.bn3.running_var", "float32", (1024,)), entries)


    def check_other(self, network, n_entries, n_params, first, last):
        path = os.path.join(DATA, f"{network}_state_dict.txt")
        entries = read_state_dict_list(path)
        self.assertEqual(len(entries), n_entries)
        self.assertEqual(entries[0], first)
        self.assertEqual(entries[-1], last)
        self.assertEqual(len({e[0] for e in entries}), n_entries)
        self.assertEqual(param_count_comment(path), n_params)
        return entries

    def test_alexnet_and_vgg(self):
        last = ("classifier.6.bias", "float32", (1000,))
        e = self.check_other("alexnet", 16, 61_100_840,
                             ("features.0.weight", "float32", (64, 3, 11, 11)), last)
        self.assertIn(("classifier.1.weight", "float32", (4096, 9216)), e)
        for net, n, params in (("vgg16", 32, 138_357_544), ("vgg16_bn", 97, 138_365_992),
                               ("vgg19", 38, 143_667_240), ("vgg19_bn", 118, 143_678_248)):
            e = self.check_other(net, n, params, ("features.0.weight", "float32", (64, 3, 3, 3)),
                                 last)
            self.assertIn(("classifier.0.weight", "float32", (4096, 25088)), e)
            self.assertEqual(any(".running_mean" in x[0] for x in e), net.endswith("_bn"))
        self.assertIn(("features.1.running_var", "float32", (64,)),
                      read_state_dict_list(os.path.join(DATA, "vgg16_bn_state_dict.txt")))

    def test_inception_v3_with_and_without_aux(self):
        first = ("Conv2d_1a_3x3.conv.weight", "float32", (32, 3, 3, 3))
        last = ("fc.bias", "float32", (1000,))
        plain = self.check_other("inception_v3", 566, 23_834_568, first, last)
        aux = self.check_other("inception_v3_aux", 580, 27_161_264, first, last)
        self.assertFalse([e for e in plain if e[0].startswith("AuxLogits.")])
        self.assertEqual([e for e in aux if not e[0].startswith("AuxLogits.")], plain)
        self.assertIn(("AuxLogits.fc.weight", "float32", (1000, 768)), aux)
        self.assertIn(("Mixed_5b.branch5x5_1.conv.weight", "float32", (48, 192, 1, 1)), plain)

    def test_efficientnets(self):
        # (entries, params, stem channels, head channels) per variant; networks.md 7.4, 7.5.
        table = [(360, 5_288_548, 32, 1280), (508, 7_794_184, 32, 1280),
                 (508, 9_109_994, 32, 1408), (574, 12_233_232, 40, 1536),
                 (706, 19_341_616, 48, 1792), (854, 30_389_784, 48, 2048),
                 (986, 43_040_704, 56, 2304), (1200, 66_347_960, 64, 2560)]
        for v, (n, params, stem, head) in enumerate(table):
            e = self.check_other(f"efficientnet_b{v}", n, params,
                                 ("features.0.0.weight", "float32", (stem, 3, 3, 3)),
                                 ("classifier.1.bias", "float32", (1000,)))
            self.assertIn(("classifier.1.weight", "float32", (1000, head)), e)
        e = read_state_dict_list(os.path.join(DATA, "efficientnet_b0_state_dict.txt"))
        # SE squeeze = block input channels // 4 (192 // 4), not expanded // 4.
        self.assertIn(("features.7.0.block.2.fc1.weight", "float32", (48, 1152, 1, 1)), e)
        self.assertIn(("features.1.0.block.0.0.weight", "float32", (32, 1, 3, 3)), e)  # dw, no expand


# --------------------------------------------------------------------------------------------
class MxnetParamListTest(unittest.TestCase):
    """gen_mxnet_param_list.py's symbols: counts from networks.md, names, order, the files."""

    def test_counts(self):
        for (net, size), (params, gmacs) in gm.EXPECTED.items():
            entries, n_params, macs = gm.param_list(net, size)
            self.assertEqual(n_params, params, (net, size))
            self.assertEqual(round(macs / 1e9, 3), gmacs, (net, size))
            self.assertEqual(gm.check_expected(net, size, n_params, macs), [])
        self.assertEqual(gm.param_list("inception_bn", 224)[1], 11_295_240)
        self.assertEqual(gm.param_list("alexnet_lrn", 227)[1], 62_378_344)
        self.assertEqual(gm.param_list("alexnet_lrn", 224)[1], 50_844_008)
        self.assertAlmostEqual(gm.param_list("inception_bn", 224)[2] / 1e9, 1.987, places=3)
        self.assertTrue(gm.check_expected("alexnet_lrn", 224, 1, 1))  # a mismatch is reported

    def test_inception_bn_names_order_and_shapes(self):
        entries, _, _ = gm.param_list("inception_bn")
        names = [n for n, _ in entries]
        self.assertEqual(len(entries), 416)
        self.assertEqual(len(set(names)), 416)
        self.assertEqual(names[:6], ["conv_1_weight", "conv_1_bias", "bn_1_gamma", "bn_1_beta",
                                     "conv_2_red_weight", "conv_2_red_bias"])
        shapes = dict(entries)
        self.assertEqual(shapes["fc1_weight"], (1000, 1024))
        self.assertEqual(shapes["conv_3c_3x3_weight"], (160, 128, 3, 3))
        self.assertEqual(shapes["conv_5b_proj_weight"], (128, 1024, 1, 1))
        self.assertEqual(shapes["bn_3a_double_3x3_0_gamma"], (96,))
        # Arguments first (fc1 last among them), then every BN's moving_mean/var in the same order.
        i = names.index("fc1_bias")
        self.assertFalse([n for n in names[:i] if "moving" in n])
        aux = names[i + 1:]
        self.assertEqual(aux[:2], ["bn_1_moving_mean", "bn_1_moving_var"])
        gammas = [n[:-len("_gamma")] for n in names if n.endswith("_gamma")]
        self.assertEqual(aux, [f"{b}_{s}" for b in gammas for s in ("moving_mean", "moving_var")])
        # Branch order inside a block: 1x1, 3x3 reduce, 3x3, double reduce, double 0/1, proj.
        block = [n[len("conv_3a_"):-len("_weight")] for n in names
                 if n.startswith("conv_3a_") and n.endswith("_weight")]
        self.assertEqual(block, ["1x1", "3x3_reduce", "3x3", "double_3x3_reduce", "double_3x3_0",
                                 "double_3x3_1", "proj"])

    def test_shapes_follow_mxnet_floor_pooling(self):
        info = gm.infer(gm.inception_bn(), (2, 3, 224, 224))
        self.assertEqual(info["output"], (2, 1000))
        self.assertEqual(info["macs"], gm.param_list("inception_bn")[2])  # per image
        names = [n for n, _ in info["arguments"]]
        self.assertEqual((names[0], names[-1]), ("data", "softmax_label"))
        a224 = dict(gm.param_list("alexnet_lrn", 224)[0])
        self.assertEqual(a224["fc1_weight"], (4096, 6400))  # 256 x 5 x 5: 54 -> 26 -> 12 -> 5
        self.assertEqual(dict(gm.param_list("alexnet_lrn", 227)[0])["fc1_weight"], (4096, 9216))
        self.assertEqual(a224["conv1_weight"], (96, 3, 11, 11))
        self.assertEqual([n for n, _ in gm.param_list("alexnet_lrn")[0]],
                         [f"{l}_{k}" for l in ("conv1", "conv2", "conv3", "conv4", "conv5", "fc1",
                                               "fc2", "fc3") for k in ("weight", "bias")])

    def test_checked_in_files_are_current(self):
        for net, n_entries, params in (("inception_bn", 416, 11_295_240),
                                       ("alexnet_lrn", 16, 62_378_344)):
            path = os.path.join(DATA, f"{net}_mxnet_params.txt")
            with open(path) as f:
                text = f.read()
            self.assertEqual(text, gm.list_text(net)[0], f"{path} is stale: rerun the generator")
            self.assertEqual(len(read_state_dict_list(path)), n_entries)
            self.assertEqual(param_count_comment(path), params)

    def test_command_line(self):
        with tempfile.TemporaryDirectory() as d:
            with contextlib.redirect_stdout(io.StringIO()) as out:
                self.assertEqual(gm.main(["--out-dir", d]), 0)
            self.assertIn("11,295,240", out.getvalue())
            self.assertEqual(sorted(os.listdir(d)), ["alexnet_lrn_mxnet_params.txt",
                                                     "inception_bn_mxnet_params.txt"])


# --------------------------------------------------------------------------------------------
FIXTURE = os.path.join(DATA, "gb_zoo_fixture.json")
SEED_CSV = os.path.join(ROOT, "results", "reference", "mxnet_inference_seed.csv")


def table_rows(md):
    """The table's header and body lines (the |---| separator left out)."""
    return [line for line in md.splitlines() if line.startswith("| ")]


class SeedTableTest(TempFiles):
    """seed_table.py on tests/data/gb_zoo_fixture.json and the seed CSV."""

    def run_st(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = st.main(list(argv))
        return rc, out.getvalue(), err.getvalue()

    def test_parse_key_sizes(self):
        self.assertEqual(st.parse_key("alexnet_lrn/fp16/graph/batch:8/size:224/manual_time"),
                         ("alexnet_lrn", "fp16", "graph", 8, 224))
        self.assertEqual(st.parse_key("alexnet_lrn/fp16/graph/batch:8/manual_time"),
                         ("alexnet_lrn", "fp16", "graph", 8, 227))
        self.assertEqual(st.parse_key("inception_v3/fp32/graph/batch:2/manual_time_median"),
                         ("inception_v3", "fp32", "graph", 2, 299))
        self.assertEqual(st.parse_key("resnet50/fp16/graph/batch:1"),
                         ("resnet50", "fp16", "graph", 1, 224))
        self.assertIsNone(st.parse_key("BM_unrelated"))

    def test_cells(self):
        md = st.build_table([FIXTURE], SEED_CSV)
        rows = table_rows(md)
        # Header + 6 networks x 6 seed batches + resnet50 batch 64 (ours only).
        self.assertEqual(len(rows), 1 + 36 + 1)
        # Median aggregate 3,060 (not the repetitions' 3,050); best seed 184.49 (1080 Ti).
        self.assertIn("| resnet50 | 224 | 1 | 1,200 | 3,060 | 141 | 162 | 184 | 16.6x |", rows)
        self.assertIn("| resnet50 | 224 | 32 | — | error | 683 | 713 | 698 | — |", rows)
        self.assertIn("| resnet50 | 224 | 64 | — | 20,000 | — | — | — | — |", rows)
        # alexnet_lrn at 224 (the size:224 entry; the default-size 35,000 is left out).
        self.assertIn("| alexnet_lrn (seed: alexnet) | 224 | 8 | — | 40,000 | 2,557 | 2,901 | "
                      "2,543 | 13.8x |", rows)
        self.assertNotIn("35,000", md)
        # inception_v3 at its default 299; the size:224 fp16 entry is left out.
        self.assertIn("| inception_v3 | 299 | 2 | 900 | — | 119 | 143 | 151 | — |", rows)
        self.assertIn("| inception_v3 | 299 | 1 | — | — | 65.0 | 80.2 | 84.2 | — |", rows)
        self.assertNotIn("5,000", md)
        self.assertNotIn("2,500", md)  # eager entries are not shown
        self.assertNotIn("efficientnet", md)
        # Networks in the seed's order.
        order = []
        for r in rows[1:]:
            name = r.split("|")[1].strip()
            if name not in order:
                order.append(name)
        self.assertEqual(order, ["alexnet_lrn (seed: alexnet)", "vgg16", "inception_bn",
                                 "inception_v3", "resnet50", "resnet152"])
        self.assertIn("- error: resnet50 fp16 batch 32: out of memory", md)
        self.assertIn("gpu_name=NVIDIA H200", md)

    def test_header_names_units_and_sources(self):
        md = st.build_table([FIXTURE], SEED_CSV)
        self.assertTrue(md.startswith("**H200 (cnnbench) next to the seed's Tesla P100 and "
                                      "GTX 1080 Ti**"))
        header = [h.strip() for h in table_rows(md)[0].strip("|").split("|")]
        self.assertEqual(header, [
            "network", "input (px)", "batch",
            "H200 fp32 img/s (cnnbench, graph, median) ¹",
            "H200 fp16 img/s (cnnbench, graph, median) ¹",
            "Tesla P100 img/s (seed: LeaderGPU) ²",
            "Tesla P100 img/s (seed: MXNet official page, via LeaderGPU article) ²",
            "GTX 1080 Ti img/s (seed: LeaderGPU) ²",
            "H200 fp16 / best seed (x, speed-up) ³"])
        self.assertIn("Tesla P100 has more than one source: each is shown", md)
        self.assertIn("`results/reference/mxnet_inference_seed.csv`", md)

    def test_gpu_choice_and_batches(self):
        md = st.build_table([FIXTURE], SEED_CSV, gpus="GTX 1080", batches={1})
        rows = table_rows(md)
        self.assertEqual(len(rows), 1 + 6)
        self.assertIn("| resnet50 | 224 | 1 | 1,200 | 3,060 | 169 | 18.1x |", rows)
        rc, _, err = self.run_st("--cnnbench", FIXTURE, "--seed", SEED_CSV, "--gpus", "Tesla V100")
        self.assertEqual(rc, 2)
        self.assertIn("no GPU 'Tesla V100'", err)

    def test_later_files_win_but_errors_never_replace_results(self):
        second = self.gb([gb_entry("resnet50", "fp32", "graph", 1, 1300),
                          gb_entry("resnet50", "fp16", "graph", 1, None, error="late failure"),
                          gb_entry("resnet50", "fp16", "graph", 32, 14000)], name="second.json")
        rows = table_rows(st.build_table([FIXTURE, second], SEED_CSV))
        self.assertIn("| resnet50 | 224 | 1 | 1,300 | 3,060 | 141 | 162 | 184 | 16.6x |", rows)
        self.assertIn("| resnet50 | 224 | 32 | — | 14,000 | 683 | 713 | 698 | 19.6x |", rows)

    def test_out_and_stdout(self):
        out = os.path.join(self.dir, "table.md")
        rc, stdout, _ = self.run_st("--cnnbench", FIXTURE, "--seed", SEED_CSV, "--out", out)
        self.assertEqual(rc, 0)
        with open(out) as f:
            self.assertEqual(f.read(), stdout)
        self.assertEqual(stdout, st.build_table([FIXTURE], SEED_CSV))

    def test_readme_markers_replaced(self):
        readme = os.path.join(self.dir, "README.md")
        before = "# cnnbench\n\nIntro.\n\n" + st.BEGIN_MARKER + "\nold table\nold line\n"
        after = st.END_MARKER + "\n\n## Next\ntext\n"
        with open(readme, "w") as f:
            f.write(before + after)
        rc, stdout, _ = self.run_st("--cnnbench", FIXTURE, "--seed", SEED_CSV, "--readme", readme)
        self.assertEqual(rc, 0)
        with open(readme) as f:
            text = f.read()
        block = st.build_table([FIXTURE], SEED_CSV)
        self.assertEqual(text, "# cnnbench\n\nIntro.\n\n" + st.BEGIN_MARKER + "\n\n" + block +
                         "\n" + after)
        self.assertNotIn("old table", text)
        self.assertEqual(stdout, block)
        rc, _, _ = self.run_st("--cnnbench", FIXTURE, "--seed", SEED_CSV, "--readme", readme)
        with open(readme) as f:
            self.assertEqual(f.read(), text)  # a second run changes nothing

    def test_readme_without_markers_is_an_error(self):
        readme = os.path.join(self.dir, "README.md")
        for content in ("# cnnbench\nno markers here\n",
                        "# x\n" + st.BEGIN_MARKER + "\nno end\n",
                        st.END_MARKER + "\n" + st.BEGIN_MARKER + "\n",
                        st.BEGIN_MARKER + "\n" + st.END_MARKER + "\n" + st.BEGIN_MARKER + "\n"):
            with open(readme, "w") as f:
                f.write(content)
            rc, stdout, err = self.run_st("--cnnbench", FIXTURE, "--seed", SEED_CSV,
                                          "--readme", readme)
            self.assertEqual(rc, 2, content)
            self.assertIn(st.BEGIN_MARKER, err)
            self.assertIn(readme, err)
            self.assertEqual(stdout, "")
            with open(readme) as f:
                self.assertEqual(f.read(), content)  # untouched
        with self.assertRaises(st.InputError):
            st.replace_between_markers("nothing\n", "block\n")

    def test_unreadable_inputs(self):
        rc, _, err = self.run_st("--cnnbench", os.path.join(self.dir, "missing.json"),
                                 "--seed", SEED_CSV)
        self.assertEqual(rc, 2)
        self.assertIn("cannot read cnnbench results", err)
        rc, _, err = self.run_st("--cnnbench", FIXTURE, "--seed", FIXTURE)
        self.assertEqual(rc, 2)
        self.assertIn("not the seed CSV", err)

    def test_command_line_default_seed(self):
        """As a program, with the seed CSV copied into results/reference (the default)."""
        p = subprocess.run([sys.executable, os.path.join(TOOLS, "seed_table.py"),
                            "--cnnbench", FIXTURE], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("| resnet50 | 224 | 1 | 1,200 | 3,060 |", p.stdout)

    @unittest.skipUnless(os.path.exists(os.path.join(ROOT, "..", "shared", "reference",
                                                     "mxnet_inference_seed.csv")),
                         "shared reference file not present")
    def test_seed_copy_matches_shared_reference(self):
        with open(os.path.join(ROOT, "..", "shared", "reference", "mxnet_inference_seed.csv"),
                  "rb") as f, open(SEED_CSV, "rb") as g:
            self.assertEqual(f.read(), g.read())


# --------------------------------------------------------------------------------------------
@unittest.skipUnless(HAVE_TORCH, "torch/torchvision not installed")
class TorchToolsTest(unittest.TestCase):
    """The tools that need torch: on the CPU, no GPU or binary needed."""

    def test_state_dict_lists_match_torchvision(self):
        with tempfile.TemporaryDirectory() as d:
            nets = "alexnet,inception_v3,inception_v3_aux,efficientnet_b0,resnet50"
            p = subprocess.run([sys.executable, os.path.join(TOOLS, "gen_state_dict_list.py"),
                                "--out-dir", d, "--networks", nets],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            for net in nets.split(","):
                name = f"{net}_state_dict.txt"
                with open(os.path.join(d, name)) as f, open(os.path.join(DATA, name)) as g:
                    new, old = f.read().splitlines()[1:], g.read().splitlines()[1:]
                self.assertEqual(new, old, name)  # all but the versions line

    def test_crosscheck_dry_run(self):
        import crosscheck_torchvision as xc
        self.assertEqual(xc.input_size_for("inception_v3"), 299)
        self.assertEqual(xc.input_size_for("efficientnet_b4"), 380)
        self.assertEqual(xc.input_size_for("vgg16"), 224)
        self.assertEqual(xc.input_size_for("vgg16", 160), 160)
        with tempfile.TemporaryDirectory() as d:
            res = os.path.join(d, "res.json")
            with contextlib.redirect_stdout(io.StringIO()) as out:
                rc = xc.main(["--network", "inception_v3", "--batch", "2", "--dry-run",
                              "--workdir", d, "--out", res, "--input-size", "160",
                              "--binary", os.path.join(d, "no-such-binary")])
            self.assertEqual(rc, 0, out.getvalue())
            with open(res) as f:
                doc = json.load(f)
            self.assertTrue(doc["dry_run"] and doc["files_ok"])
            self.assertEqual(doc["trainable_parameters"], 23_834_568)  # no AuxLogits
            self.assertEqual(doc["command"][-2:], ["--input_size", "160"])
            header, _, _, _ = xc.read_safetensors_header(
                os.path.join(d, "input_b2_s160_seed0.safetensors"))
            self.assertEqual(header["input"]["shape"], [2, 3, 160, 160])
            self.assertEqual(header["input"]["dtype"], "F32")
            w, _, _, _ = xc.read_safetensors_header(os.path.join(d, "inception_v3_seed0.safetensors"))
            self.assertEqual(len(w), 566)
            self.assertEqual(w["Conv2d_1a_3x3.bn.num_batches_tracked"]["dtype"], "I64")
            self.assertFalse([k for k in w if k.startswith("AuxLogits.")])

    def test_crosscheck_randomizes_batchnorm_only_where_there_is_one(self):
        import torch
        import crosscheck_torchvision as xc
        m = xc.build_model("efficientnet_b0", 0)
        bn = m.features[0][1]
        self.assertFalse(torch.all(bn.running_var == 1))
        self.assertIsNotNone(xc.build_model("alexnet", 0))  # no BN: nothing to randomize

    def test_pytorch_baseline_input_sizes(self):
        import pytorch_baseline as pb
        sizes = [pb.input_size_for(f"efficientnet_b{i}") for i in range(8)]
        self.assertEqual(sizes, [224, 240, 260, 300, 380, 456, 528, 600])
        self.assertEqual(pb.input_size_for("inception_v3"), 299)
        self.assertEqual(pb.input_size_for("vgg19_bn"), 224)
        self.assertEqual(pb.input_size_for("efficientnet_b7", 224), 224)
        self.assertEqual(pb.MODEL_KWARGS["inception_v3"]["aux_logits"], False)


# --------------------------------------------------------------------------------------------
# tools/pytorch_train_baseline.py and tools/train_step_crosscheck.py: their torch-free parts
# --------------------------------------------------------------------------------------------
def quiet(fn, *a, **kw):
    """fn(*a, **kw) with stdout and stderr captured: (result or SystemExit code, stderr text)."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            return fn(*a, **kw), err.getvalue()
        except SystemExit as e:
            return e.code, err.getvalue()


class TrainBaselineTest(unittest.TestCase):
    def setUp(self):
        import pytorch_train_baseline as tb
        self.tb = tb

    def test_defaults_are_the_sgd_recipe(self):
        a = self.tb.parse_args([])
        self.assertEqual((a.optimizer, a.lr, a.momentum, a.weight_decay), ("sgd", 0.1, 0.9, 1e-4))
        self.assertEqual((a.precision, a.modes, a.models), ("fp16", ["eager", "graph"],
                                                             ["resnet50"]))
        self.assertEqual((a.num_classes, a.input_size, a.epoch_images), (1000, None, 1_281_167))
        self.assertTrue(a.inception_aux)
        self.assertEqual(a.batches, [32, 64, 128, 256])

    def test_adam_and_tiny_imagenet(self):
        a = self.tb.parse_args(["--optimizer", "adam"])
        self.assertEqual((a.lr, a.momentum, a.weight_decay), (0.001, None, 0.0))
        a = self.tb.parse_args(["--tiny-imagenet", "--models", "efficientnet_b0"])
        self.assertEqual((a.input_size, a.num_classes, a.optimizer, a.lr, a.epoch_images),
                         (64, 200, "adam", 0.001, 100_000))
        # Explicit options win over the preset; 200 classes without the preset: no epoch size.
        a = self.tb.parse_args(["--tiny-imagenet", "--lr", "0.01", "--input-size", "96"])
        self.assertEqual((a.lr, a.input_size), (0.01, 96))
        a = self.tb.parse_args(["--num-classes", "200", "--input-size", "64"])
        self.assertEqual((a.optimizer, a.epoch_images), ("sgd", None))
        a = self.tb.parse_args(["--lr", "0.2", "--momentum", "0", "--weight-decay", "0"])
        self.assertEqual((a.lr, a.momentum, a.weight_decay), (0.2, 0.0, 0.0))

    def test_bad_arguments_exit_2_naming_the_problem(self):
        for argv, what in ((["--precision", "fp8"], "--precision"),
                           (["--batches", "32,0"], "batch 0 is not positive"),
                           (["--batches", "-4"], "batch -4 is not positive"),
                           (["--batches", "a"], "--batches"),
                           (["--modes", "eager,jit"], "unknown mode 'jit'"),
                           (["--optimizer", "lamb"], "--optimizer"),
                           (["--optimizer", "adam", "--momentum", "0.9"], "--momentum is for sgd"),
                           (["--models", "inception_bn"], "torchvision does not have"),
                           (["--num-classes", "1"], "--num-classes"),
                           (["--lr", "0"], "--lr must be positive"),
                           (["--input-size", "0"], "--input-size"),
                           (["--models", "inception_v3", "--input-size", "224"],
                            "at least 299 px, not 224")):
            rc, err = quiet(self.tb.parse_args, argv)
            self.assertEqual(rc, 2, argv)
            self.assertIn(what, err, argv)

    def test_inception_v3_minimum_input(self):
        self.assertEqual(self.tb.inception_v3_sides(299), (17, 5, 8))
        self.assertEqual(self.tb.min_input_size("inception_v3"), 299)  # AuxLogits' 5x5 conv
        self.assertEqual(self.tb.min_input_size("inception_v3", inception_aux=False), 75)
        self.assertIsNone(self.tb.min_input_size("resnet50"))
        rc, err = quiet(self.tb.parse_args,
                        ["--models", "resnet50,inception_v3", "--tiny-imagenet"])
        self.assertEqual(rc, 2)
        self.assertIn("inception_v3 needs an input of at least 299 px, not 64", err)
        a = self.tb.parse_args(["--models", "inception_v3", "--no-inception-aux",
                                "--input-size", "75"])
        self.assertFalse(a.inception_aux)
        rc, err = quiet(self.tb.parse_args, ["--models", "inception_v3", "--no-inception-aux",
                                             "--input-size", "74"])
        self.assertIn("at least 75 px", err)
        self.assertEqual(self.tb.model_kwargs("inception_v3", 200),
                         {"num_classes": 200, "aux_logits": True, "init_weights": False})
        self.assertEqual(self.tb.input_size_for("inception_v3"), 299)
        self.assertEqual(self.tb.input_size_for("efficientnet_b3", 64), 64)
        self.assertEqual(self.tb.AUX_LOSS_WEIGHT, 0.4)

    def test_row_format(self):
        a = self.tb.parse_args(["--tiny-imagenet"])
        r = self.tb.make_row("efficientnet_b0", "graph", "fp16", 64, 64, a, reps=[10.0, 8.0, 12.0],
                             iters_per_rep=5, peak_allocated=3 * 2**20, peak_reserved=5 * 2**20,
                             loss=5.3, notes=["n"])
        self.assertEqual((r["model"], r["mode"], r["precision"], r["batch"], r["input_size"],
                          r["num_classes"], r["optimizer"]),
                         ("efficientnet_b0", "graph", "fp16", 64, 64, 200, "adam"))
        self.assertEqual((r["ms"], r["ms_min"], r["ms_max"]), (10.0, 8.0, 12.0))
        self.assertAlmostEqual(r["img_s"], 6400.0)
        self.assertAlmostEqual(r["epoch_s"], 100_000 / 6400.0)
        self.assertEqual((r["peak_allocated_mib"], r["peak_reserved_mib"], r["peak_mib"]),
                         (3.0, 5.0, 3.0))
        self.assertEqual((r["reps"], r["iters_per_rep"], r["loss"], r["notes"]),
                         ([10.0, 8.0, 12.0], 5, 5.3, ["n"]))
        self.assertNotIn("error", r)
        e = self.tb.make_row("resnet50", "eager", "fp16", 1024, 224, a, error="out of memory")
        self.assertEqual(e["error"], "out of memory")
        self.assertNotIn("ms", e)
        self.assertNotIn("img_s", e)
        json.dumps([r, e])  # plain JSON
        a = self.tb.parse_args(["--num-classes", "10"])  # no epoch size: no epoch_s
        self.assertNotIn("epoch_s", self.tb.make_row("resnet50", "eager", "fp32", 2, 224, a,
                                                     reps=[1.0], iters_per_rep=1,
                                                     peak_allocated=0, peak_reserved=0))

    def test_largest_batch_errors_and_notes(self):
        a = self.tb.parse_args([])
        rows = [self.tb.make_row("resnet50", "eager", "fp16", b, 224, a, reps=[1.0],
                                 iters_per_rep=1, peak_allocated=1, peak_reserved=1)
                for b in (32, 64)]
        rows.append(self.tb.make_row("resnet50", "eager", "fp16", 128, 224, a,
                                     error="out of memory"))
        rows.append(self.tb.make_row("resnet50", "graph", "fp16", 32, 224, a,
                                     error="out of memory"))
        self.assertEqual(self.tb.largest_batches(rows), {"resnet50/eager/fp16": 64})

        class OutOfMemoryError(RuntimeError):
            pass
        self.assertEqual(self.tb.error_text(OutOfMemoryError("CUDA out of memory. Tried...")),
                         "out of memory")
        self.assertEqual(self.tb.error_text(RuntimeError("cuDNN error: X\nmore")), "cuDNN error: X")
        n = self.tb.row_notes("graph", "fp16", "adam", 1024.0, "inception_v3", True)
        self.assertTrue(any("fixed loss scale 1024" in t for t in n), n)
        self.assertIn("Adam(capturable=True)", n)
        self.assertTrue(any("0.4 * aux" in t for t in n), n)
        n = self.tb.row_notes("eager", "fp16", "sgd", 1024.0, "resnet50", True)
        self.assertEqual(n, ["torch.amp.GradScaler, dynamic loss scale"])
        self.assertEqual(self.tb.row_notes("graph", "bf16", "sgd", 1024.0, "resnet50", True), [])
        s = self.tb.settings_of(a)
        self.assertEqual((s["precision"], s["optimizer"], s["cudnn_benchmark"]),
                         ("fp16", "sgd", True))

    @unittest.skipIf(HAVE_TORCH, "torch is installed")
    def test_without_torch_main_says_so(self):
        rc, err = quiet(self.tb.main, ["--batches", "1"])
        self.assertEqual(rc, 2)
        self.assertIn("needs torch", err)


class TrainStepCrosscheckTest(unittest.TestCase):
    def setUp(self):
        import train_step_crosscheck as tx
        self.tx = tx
        self.ref = {f"p{i}.weight": 1.0 + i for i in range(12)}

    def test_defaults_and_bad_arguments(self):
        a = self.tx.parse_args([])
        self.assertEqual((a.network, a.lr, a.momentum, a.weight_decay, a.binary),
                         ("resnet50", 0.1, 0.9, 1e-4, None))
        self.assertEqual((a.loss_tol, a.grad_tol, a.weight_tol, a.worst), (1e-4, 1e-3, 1e-4, 10))
        for argv, what in ((["--batch", "0"], "--batch must be positive"),
                           (["--network", "efficientnet_b0"], "--network"),
                           (["--input-size", "16"], "--input-size"),
                           (["--lr", "-1"], "--lr must be positive"),
                           (["--grad-tol", "0"], "--grad-tol must be positive")):
            rc, err = quiet(self.tx.parse_args, argv)
            self.assertEqual(rc, 2, argv)
            self.assertIn(what, err, argv)

    def test_binary_command_contract(self):
        a = self.tx.parse_args(["--binary", "/b/train_step", "--batch", "4", "--lr", "0.05",
                                "--extra=--engine=heuristic"])
        files = self.tx.file_names("/w", a)
        cmd = self.tx.binary_command(a, files)
        self.assertEqual(cmd[0], "/b/train_step")
        for flag in ("--network=resnet50", "--batch=4", "--input_size=224", "--num_classes=1000",
                     "--precision=fp32", "--optimizer=sgd", "--lr=0.05", "--momentum=0.9",
                     "--weight_decay=0.0001", f"--weights={files['weights']}",
                     f"--input={files['input']}", f"--labels={files['labels']}",
                     f"--output={files['ours']}", f"--report={files['ours_report']}"):
            self.assertIn(flag, cmd)
        self.assertEqual(cmd[-1], "--engine=heuristic")
        self.assertEqual(files["weights"], "/w/resnet50_seed0.safetensors")
        self.assertEqual(len(set(files.values())), len(files))

    def test_everything_passes(self):
        loss = self.tx.compare_loss(6.9081, 6.9080)  # 1.4e-5
        self.assertTrue(loss["ok"])
        ours = {k: v * (1 + 1e-5) for k, v in self.ref.items()}
        grads = self.tx.compare_norms(ours, self.ref)
        self.assertTrue(grads["ok"])
        self.assertEqual((grads["checked"], grads["failing"]), (12, 0))
        self.assertEqual(len(grads["worst"]), 10)
        weights = self.tx.judge_rel_errors({k: 1e-6 for k in self.ref}, list(self.ref), 1e-4)
        passed, lines = self.tx.verdict(loss, grads, weights)
        self.assertTrue(passed)
        self.assertEqual(lines[-1], "PASS")

    def test_loss_off(self):
        loss = self.tx.compare_loss(6.92, 6.90)
        self.assertFalse(loss["ok"])
        self.assertAlmostEqual(loss["rel_err"], 0.02 / 6.90)
        self.assertFalse(self.tx.compare_loss(1.0005, 1.0)["ok"])  # 5e-4: over 1e-4
        self.assertTrue(self.tx.compare_loss(1.00005, 1.0)["ok"])
        self.assertFalse(self.tx.compare_loss(float("nan"), 6.9)["ok"])
        self.assertFalse(self.tx.compare_loss(6.9, float("inf"))["ok"])
        grads = self.tx.compare_norms(dict(self.ref), self.ref)
        weights = self.tx.judge_rel_errors({k: 0.0 for k in self.ref}, list(self.ref), 1e-4)
        passed, lines = self.tx.verdict(loss, grads, weights)
        self.assertFalse(passed)
        self.assertIn("FAIL", lines[0])

    def test_one_gradient_norm_off_is_reported_worst_first(self):
        ours = dict(self.ref)
        ours["p3.weight"] *= 1.01  # 1e-2 relative
        ours["p7.weight"] *= 1 + 5e-4  # within 1e-3
        res = self.tx.compare_norms(ours, self.ref, tol=1e-3, worst=3)
        self.assertFalse(res["ok"])
        self.assertEqual(res["failing"], 1)
        self.assertEqual([w[0] for w in res["worst"]][:2], ["p3.weight", "p7.weight"])
        self.assertEqual(len(res["worst"]), 3)
        name, err, o, r = res["worst"][0]
        self.assertAlmostEqual(err, 0.01)
        self.assertEqual((o, r), (ours["p3.weight"], self.ref["p3.weight"]))
        self.assertAlmostEqual(res["max_rel"], 0.01)
        _, lines = self.tx.verdict(self.tx.compare_loss(1.0, 1.0), res,
                                   self.tx.judge_rel_errors({}, [], 1e-4))
        self.assertTrue(any("p3.weight" in t for t in lines))
        self.assertEqual(lines[-1], "FAIL")

    def test_missing_extra_and_non_finite(self):
        ours = dict(self.ref)
        del ours["p5.weight"]
        ours["fc.extra"] = 1.0
        res = self.tx.compare_norms(ours, self.ref)
        self.assertFalse(res["ok"])
        self.assertEqual((res["missing"], res["extra"]), (["p5.weight"], ["fc.extra"]))
        self.assertEqual(res["failing"], 0)  # the rest agree
        ours = dict(self.ref, **{"p2.weight": float("nan")})
        res = self.tx.compare_norms(ours, self.ref)
        self.assertFalse(res["ok"])
        self.assertEqual(res["worst"][0][0], "p2.weight")
        w = self.tx.judge_rel_errors({"a": 1e-6, "b": float("inf")}, ["a", "b", "c"], 1e-4)
        self.assertFalse(w["ok"])
        self.assertEqual((w["missing"], w["failing"], w["worst"][0][0]), (["c"], 1, "b"))
        w = self.tx.judge_rel_errors({"a": 1e-6, "b": 2e-4}, ["a", "b"], 1e-4, worst=1)
        self.assertEqual((w["ok"], w["worst"]), (False, [["b", 2e-4]]))

    def test_report_parsing_and_summary(self):
        loss, norms = self.tx.parse_report({"loss": 7, "grad_norms": {"conv1.weight": 0.5}})
        self.assertEqual((loss, norms), (7.0, {"conv1.weight": 0.5}))
        for bad, what in (([], "not a JSON object"), ({"grad_norms": {"a": 1}}, "\"loss\""),
                          ({"loss": 1.0}, "grad_norms"), ({"loss": True, "grad_norms": {"a": 1}},
                                                          "\"loss\""),
                          ({"loss": 1.0, "grad_norms": {"a": "x"}}, "grad_norms['a']")):
            with self.assertRaises(ValueError) as cm:
                self.tx.parse_report(bad, "r.json")
            self.assertIn(what, str(cm.exception))
        s = self.tx.change_summary({"a": 1e-3, "b": 3e-3, "c": 2e-3})
        self.assertEqual(s, {"min": 1e-3, "median": 2e-3, "max": 3e-3, "max_name": "b"})
        self.assertEqual(self.tx.rel_err(0.0, 0.0), 0.0)
        self.assertEqual(self.tx.rel_err(1e-9, 0.0), 1e-9)

    def test_dropout_networks_and_fp64_arguments(self):
        for net in ("vgg16", "vgg16_bn", "alexnet"):
            a = self.tx.parse_args(["--network", net, "--binary", "/b", "--extra=--engine=x"])
            cmd = self.tx.binary_command(a, self.tx.file_names("/w", a))
            self.assertEqual(cmd[-2:], ["--dropout=0", "--engine=x"], net)
            self.assertIn(f"--network={net}", cmd)
        for net in ("resnet50", "resnet152"):
            a = self.tx.parse_args(["--network", net, "--binary", "/b"])
            cmd = self.tx.binary_command(a, self.tx.file_names("/w", a))
            self.assertFalse([c for c in cmd if c.startswith("--dropout")], net)
            self.assertEqual(cmd[-1], f"--report={self.tx.file_names('/w', a)['ours_report']}")
        self.assertEqual(set(self.tx.DROPOUT_NETWORKS) - set(self.tx.NETWORKS), set())
        self.assertEqual(set(self.tx.MIN_INPUT_SIZE), set(self.tx.NETWORKS))
        self.assertEqual(self.tx.parse_args(["--network", "alexnet", "--input-size", "63"])
                         .input_size, 63)
        a = self.tx.parse_args(["--binary", "/b", "--fp64"])
        self.assertEqual((a.fp64, a.fp64_factor), (True, 2.0))
        self.assertFalse(self.tx.parse_args([]).fp64)
        for argv, what in ((["--network", "alexnet", "--input-size", "62"], "at least 63"),
                           (["--network", "vgg16", "--input-size", "31"], "at least 32"),
                           (["--fp64"], "--fp64 compares the binary's step"),
                           (["--binary", "/b", "--fp64", "--fp64-factor", "0"], "--fp64-factor")):
            rc, err = quiet(self.tx.parse_args, argv)
            self.assertEqual(rc, 2, argv)
            self.assertIn(what, err, argv)

    def fp64_case(self):
        """(loss, grads, tensors, tensor names) for compare_fp64: fp64 values, PyTorch fp32 and
        ours around them; every error above its floor (loss 1e-5, grads 1e-4, tensors 1e-5) so
        that the factor decides, ours 1.5x torch32's."""
        g64 = {f"p{i}.weight": 1.0 + i for i in range(12)}
        g32 = {k: v * (1 + (2e-4 if i % 2 else -2e-4)) for i, (k, v) in enumerate(g64.items())}
        ours = {k: v * (1 - 3e-4) for k, v in g64.items()}
        names = list(g64) + ["bn1.running_mean", "bn1.running_var"]
        t32 = {k: 2e-5 * (1 + i / 10) for i, k in enumerate(names)}
        t_ours = {k: 1.5 * v for k, v in t32.items()}
        t32["bn1.num_batches_tracked"] = 0.0  # integer tensors: not among the names
        return (7.0 + 3e-4, 7.0 - 2e-4, 7.0), (ours, g32, g64), (t_ours, t32), names

    def test_fp64_ours_within_factor_passes(self):
        loss, grads, tensors, names = self.fp64_case()
        res = self.tx.compare_fp64(loss, grads, tensors, names, worst=5)
        self.assertEqual(set(res), {"loss", "grad_norms", "updated_weights"})
        g, w = res["grad_norms"], res["updated_weights"]
        self.assertTrue(all(r["ok"] for r in res.values()))
        self.assertEqual((g["checked"], g["failing"], g["over"], g["floor"]), (12, 0, 0, 1e-4))
        self.assertEqual((w["checked"], w["failing"], w["floor"]), (14, 0, 1e-5))
        self.assertAlmostEqual(res["loss"]["worst"][0][1], 3e-4 / 7)
        self.assertAlmostEqual(res["loss"]["worst"][0][3], 1.5)
        self.assertEqual((res["loss"]["ours_value"], res["loss"]["fp64_value"]), (loss[0], 7.0))
        self.assertAlmostEqual(g["ours"]["max"], 3e-4)
        self.assertAlmostEqual(g["torch32"]["median"], 2e-4)
        self.assertEqual(len(w["worst"]), 5)  # the worst by ours' error: the last names
        self.assertEqual([r[0] for r in w["worst"][:2]], ["bn1.running_var", "bn1.running_mean"])
        self.assertAlmostEqual(w["ours"]["max"], 1.5 * 2e-5 * 2.3)
        self.assertAlmostEqual(w["torch32"]["median"], 2e-5 * 1.65)
        for name, eo, et, ratio in w["worst"]:
            self.assertAlmostEqual(ratio, 1.5)
        passed, lines = self.tx.fp64_verdict(res)
        self.assertTrue(passed)
        self.assertEqual(lines[-1], "fp64 PASS")
        self.assertFalse([t for t in lines if not t.startswith(("fp64 ", "    "))], lines)
        self.assertFalse([t for t in lines if "FAIL" in t], lines)
        json.dumps(res)

    def test_fp64_ours_ten_times_worse_on_one_tensor_fails(self):
        loss, grads, (t_ours, t32), names = self.fp64_case()
        t_ours["p4.weight"] = 10 * t32["p4.weight"]  # 2.8e-4: 10x torch32, over the floor
        res = self.tx.compare_fp64(loss, grads, (t_ours, t32), names)
        w = res["updated_weights"]
        self.assertTrue(res["loss"]["ok"] and res["grad_norms"]["ok"])
        self.assertFalse(w["ok"])
        self.assertEqual((w["failing"], w["over"], w["failing_names"]), (1, 1, ["p4.weight"]))
        self.assertEqual(w["worst"][0][0], "p4.weight")
        self.assertAlmostEqual(w["worst"][0][3], 10.0)
        passed, lines = self.tx.fp64_verdict(res)
        self.assertFalse(passed)
        self.assertEqual(lines[-1], "fp64 FAIL")
        rows = [t for t in lines if t.strip().startswith("p4.weight") and t.endswith("FAIL")]
        self.assertEqual(len(rows), 1, lines)  # the tensor's row; its gradient norm's is ok
        self.assertTrue(rows[0].endswith(" 10  FAIL"), rows)
        self.assertTrue([t for t in lines if t.startswith("fp64 updated weights")
                         and "1 over 2x torch32" in t and t.endswith("FAIL")], lines)
        # A looser factor lets it through; the same on a gradient norm fails there.
        self.assertTrue(self.tx.compare_fp64(loss, grads, (t_ours, t32), names,
                                             factor=20)["updated_weights"]["ok"])
        ours, g32, g64 = grads
        ours = dict(ours, **{"p7.weight": g64["p7.weight"] * (1 + 2e-3)})
        g = self.tx.compare_fp64(loss, (ours, g32, g64), self.fp64_case()[2], names)["grad_norms"]
        self.assertEqual((g["ok"], g["failing_names"]), (False, ["p7.weight"]))
        r = self.tx.compare_fp64((7.0 + 2e-3, 7.0 - 2e-4, 7.0), grads, self.fp64_case()[2], names)
        self.assertFalse(r["loss"]["ok"])  # 10x torch32's, over 1e-5
        self.assertIn("FAIL", self.tx.fp64_verdict(r)[1][1])

    def test_fp64_floor_lets_tiny_errors_pass(self):
        names = ["a.weight", "b.weight", "bn.running_var"]
        t32 = {"a.weight": 1e-8, "b.weight": 0.0, "bn.running_var": 5e-7}
        ours = {"a.weight": 1e-7, "b.weight": 3e-7, "bn.running_var": 9e-6}  # up to 10x, or /0
        res = self.tx.judge_fp64(ours, t32, names, floor=1e-5)
        self.assertTrue(res["ok"])
        self.assertEqual((res["over"], res["failing"]), (0, 0))
        self.assertEqual(dict((r[0], r[3]) for r in res["worst"])["b.weight"], float("inf"))
        self.assertAlmostEqual(dict((r[0], r[3]) for r in res["worst"])["bn.running_var"], 18)
        res = self.tx.judge_fp64(dict(ours, **{"bn.running_var": 1.1e-5}), t32, names, 1e-5)
        self.assertEqual((res["ok"], res["failing_names"]), (False, ["bn.running_var"]))
        # The floors are the fp32 tolerances / 10: both steps 10x apart, both under them.
        res = self.tx.compare_fp64((7.0 + 7e-6, 7.0 + 7e-7, 7.0),
                                   ({"w": 1 + 9e-5}, {"w": 1 + 9e-6}, {"w": 1.0}),
                                   ({"w": 9e-6}, {"w": 9e-7}), ["w"])
        self.assertTrue(all(r["ok"] for r in res.values()), res)
        self.assertEqual([res[k]["floor"] for k in ("loss", "grad_norms", "updated_weights")],
                         [1e-5, 1e-4, 1e-5])
        res = self.tx.compare_fp64((7.0, 7.0, 7.0), ({"w": 1.0}, {"w": 1.0}, {"w": 1.0}),
                                   ({"w": 0.0}, {"w": 0.0}), ["w"])  # all exact: ratio n/a
        self.assertTrue(self.tx.fp64_verdict(res)[0])
        self.assertIsNone(res["grad_norms"]["worst"][0][3])

    def test_fp64_missing_unknown_and_non_finite(self):
        loss, (ours, g32, g64), (t_ours, t32), names = self.fp64_case()
        del t_ours["bn1.running_var"]  # ours left a BN running statistic out
        t_ours["extra.weight"] = float("inf")  # not in fp64's state_dict
        res = self.tx.compare_fp64(loss, (ours, g32, g64), (t_ours, t32), names)
        w = res["updated_weights"]
        self.assertFalse(w["ok"])
        self.assertEqual((w["missing"], w["extra"], w["failing"], w["checked"]),
                         (["bn1.running_var"], ["extra.weight"], 0, 13))
        passed, lines = self.tx.fp64_verdict(res)
        self.assertFalse(passed)
        self.assertIn("  missing (1): bn1.running_var", lines)
        self.assertIn("  unknown (1): extra.weight", lines)
        # A gradient norm missing from ours, one fp64 does not know, one torch32 lacks.
        o = dict(ours, **{"fc.unknown": 1.0})
        del o["p0.weight"]
        g = self.tx.compare_fp64(loss, (o, {k: v for k, v in g32.items() if k != "p1.weight"},
                                        g64), self.fp64_case()[2], names)["grad_norms"]
        self.assertEqual((g["ok"], g["missing"], g["extra"], g["missing_torch32"], g["checked"]),
                         (False, ["p0.weight"], ["fc.unknown"], ["p1.weight"], 10))
        # Non-finite values: ours' NaN gradient norm, a NaN tensor, torch32's inf, a NaN loss.
        o = dict(ours, **{"p2.weight": float("nan")})
        t_ours, t32 = self.fp64_case()[2]
        t_ours["p3.weight"] = float("nan")
        t32 = dict(t32, **{"p5.weight": float("inf")})
        res = self.tx.compare_fp64((float("nan"), 7.0, 7.0), (o, g32, g64), (t_ours, t32), names)
        g, w = res["grad_norms"], res["updated_weights"]
        self.assertFalse(res["loss"]["ok"])
        self.assertEqual((g["ok"], g["non_finite"], g["worst"][0][0]), (False, ["p2.weight"],
                                                                         "p2.weight"))
        self.assertEqual(g["ours"]["max"], float("inf"))
        self.assertEqual((w["ok"], w["non_finite"]), (False, ["p3.weight", "p5.weight"]))
        self.assertEqual(w["worst"][0][:2], ["p3.weight", w["worst"][0][1]])
        self.assertIsNone(w["worst"][0][3])
        passed, lines = self.tx.fp64_verdict(res)
        self.assertFalse(passed)
        self.assertTrue(lines[1].startswith("fp64 loss") and lines[1].endswith("FAIL"), lines)

    def test_fp64_judges_the_spread_not_each_ratio(self):
        # Device call 18, ResNet-50: per tensor, ours/torch32 ran from 0.4 to 19.5 while the
        # maxima and medians agreed. A tensor 19.5x its own torch32 error but under 2x torch32's
        # largest passes; one over 2x the largest fails; a median over 2x torch32's fails.
        t32 = {"a": 6e-3, "b": 3e-4, "c": 2.7e-4, "d": 1.5e-4, "e": 2e-4}
        ours = {"a": 5e-3, "b": 3e-4, "c": 2e-4, "d": 2.9e-3, "e": 3e-4}  # d: 19.3x its own
        r = self.tx.judge_fp64(ours, t32, list(t32), floor=1e-4)
        self.assertTrue(r["ok"], r)
        self.assertTrue(r["median_ok"])
        self.assertAlmostEqual([w for w in r["worst"] if w[0] == "d"][0][3], 2.9e-3 / 1.5e-4)
        r = self.tx.judge_fp64(dict(ours, d=1.3e-2), t32, list(t32), floor=1e-4)
        self.assertEqual((r["ok"], r["failing_names"]), (False, ["d"]))
        shifted = {k: 4e-3 for k in t32}  # each under 2x the largest, the median 15x torch32's
        r = self.tx.judge_fp64(shifted, t32, list(t32), floor=1e-4)
        self.assertEqual((r["ok"], r["median_ok"], r["failing"]), (False, False, 0))
        passed, lines = self.tx.fp64_verdict(self.tx.compare_fp64(
            (7.0, 7.0, 7.0), ({k: 1 + v for k, v in shifted.items()},
                              {k: 1 + v for k, v in t32.items()}, {k: 1.0 for k in t32}),
            ({"w": 1e-7}, {"w": 1e-7}), ["w"]))
        self.assertFalse(passed)
        self.assertTrue([t for t in lines if t.startswith("fp64 grad norms")
                         and "(median over)" in t], lines)

    def test_fp64_rounding_noise_is_judged_apart(self):
        # vgg16_bn: a convolution's bias ahead of BatchNorm has gradient 0 in exact arithmetic;
        # fp64 gives ~1e-15, fp32 ~1e-6 of noise: torch32's relative error is ~1e9.
        g64 = {"features.0.weight": 42.0, "features.0.bias": 5e-15, "features.1.weight": 2.25}
        g32 = {"features.0.weight": 42.0 * (1 + 1e-7), "features.0.bias": 4e-6,
               "features.1.weight": 2.25 * (1 - 1e-6)}
        ours = dict(g32, **{"features.0.bias": 2e-5})  # 5x PyTorch's noise: passes
        names = ["features.0.weight"]
        tensors = ({"features.0.weight": 1e-7}, {"features.0.weight": 1e-7})
        res = self.tx.compare_fp64((7.0, 7.0, 7.0), (ours, g32, g64), tensors, names)
        g = res["grad_norms"]
        self.assertTrue(g["ok"])
        self.assertEqual((g["noise"], g["noise_over"], g["over"]), (["features.0.bias"], 0, 0))
        self.assertEqual([r[0] for r in g["worst"]], ["features.1.weight", "features.0.weight"])
        self.assertEqual(g["noise_worst"][0][0], "features.0.bias")
        self.assertAlmostEqual(g["noise_worst"][0][3], 5.0)
        self.assertAlmostEqual(g["ours"]["max"], 1e-6)  # noise left out of max and median
        passed, lines = self.tx.fp64_verdict(res)
        self.assertTrue(passed, lines)
        self.assertTrue([t for t in lines if "features.0.bias" in t and "(noise)" in t], lines)
        self.assertTrue([t for t in lines if t.startswith("fp64 grad norms") and "1 noise (0 over"
                         " 100x)" in t], lines)
        # 1000x the noise (a real error, e.g. BN's mean term left out of the backward) fails; so
        # does 5x with --fp64-noise-factor 2 (the plain rule).
        ours["features.0.bias"] = 4e-3
        g = self.tx.compare_fp64((7.0, 7.0, 7.0), (ours, g32, g64), tensors, names)["grad_norms"]
        self.assertEqual((g["ok"], g["noise_over"], g["failing_names"]),
                         (False, 1, ["features.0.bias"]))
        ours["features.0.bias"] = 2e-5
        g = self.tx.compare_fp64((7.0, 7.0, 7.0), (ours, g32, g64), tensors, names,
                                 noise_factor=2)["grad_norms"]
        self.assertFalse(g["ok"])
        ours["features.0.bias"] = 0.0  # exactly 0: error 1, far under the noise
        self.assertTrue(self.tx.compare_fp64((7.0, 7.0, 7.0), (ours, g32, g64), tensors,
                                             names)["grad_norms"]["ok"])
        a = self.tx.parse_args(["--binary", "/b", "--fp64"])
        self.assertEqual(a.fp64_noise_factor, 100.0)
        rc, err = quiet(self.tx.parse_args, ["--binary", "/b", "--fp64-noise-factor", "-1"])
        self.assertEqual(rc, 2)
        self.assertIn("--fp64-noise-factor must be positive", err)

    @unittest.skipIf(HAVE_TORCH, "torch is installed")
    def test_without_torch_main_says_so(self):
        rc, err = quiet(self.tx.main, [])
        self.assertEqual(rc, 2)
        self.assertIn("needs torch", err)


if __name__ == "__main__":
    unittest.main()


# --------------------------------------------------------------------------------------------
class CrosscheckTableTest(TempFiles):
    def run_table(self, *paths):
        import crosscheck_table as ct

        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = ct.main(list(paths))
        return rc, out.getvalue()

    def result(self, name, net, p, err, thr):
        return self.write(name, {"network": net, "precision": p, "batch": 2, "rel_l2": err,
                                 "threshold": thr, "finite": True})

    def test_rows_per_network_columns_per_precision(self):
        a = self.result("a.json", "vgg16", "fp32", 2.1e-6, 1e-4)
        b = self.result("b.json", "vgg16", "fp16", 9.6e-4, 2e-2)
        c = self.result("c.json", "alexnet", "fp32", 5.0e-7, 1e-4)
        rc, out = self.run_table(a, b, c)
        self.assertEqual(rc, 0)
        self.assertIn("| vgg16 | 2 | 2.10e-06 | 9.60e-04 |", out)
        self.assertIn("| alexnet | 2 | 5.00e-07 | – |", out)

    def test_an_error_over_its_threshold_fails(self):
        a = self.result("a.json", "resnet50", "fp32", 3e-4, 1e-4)
        rc, out = self.run_table(a)
        self.assertEqual(rc, 1)
        self.assertIn("3.00e-04 FAIL", out)

    def test_a_file_that_is_not_a_result_is_an_error(self):
        bad = self.write("bad.json", {"rows": []})
        rc, _ = self.run_table(bad)
        self.assertEqual(rc, 2)


# --------------------------------------------------------------------------------------------
class ZooTableTest(TempFiles):
    def run_table(self, *argv):
        import zoo_table as zt

        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = zt.main(list(argv))
        return rc, out.getvalue()

    def test_pairs_merge_per_network_and_each_ratio_is_checked(self):
        a = self.gb([gb_entry("vgg16", "fp16", "graph", 1, 4000.0),
                     gb_entry("vgg16", "fp16", "graph", 8, 9000.0)], "a.json")
        pa = self.pt([pt_row("fp16cl_graph", 1, 2000.0, model="vgg16"),
                      pt_row("fp16cl_graph", 8, 10000.0, model="vgg16"),
                      pt_row("fp16cl_graph", 32, 12000.0, model="vgg16")], "pa.json")
        b = self.gb([gb_entry("vgg16", "fp16", "graph", 32, 13000.0)], "b.json")
        pb = self.pt([pt_row("fp16cl_graph", 32, 12500.0, model="vgg16")], "pb.json")
        rc, out = self.run_table("--pair", a, pa, "--pair", b, pb)
        self.assertEqual(rc, 1)  # batch 8 is below PyTorch
        self.assertIn("| vgg16 | 1 | 4,000 | 2,000 | 2.00x | ok |", out)
        self.assertIn("| vgg16 | 8 | 9,000 | 10,000 | 0.90x | FAIL: below 1x |", out)
        # batch 32 comes from the second pair, beside that pair's PyTorch figure
        self.assertIn("| vgg16 | 32 | 13,000 | 12,500 | 1.04x | ok |", out)

    def test_a_later_pair_without_the_peer_keeps_the_full_row(self):
        a = self.gb([gb_entry("vgg16", "fp16", "graph", 32, 12000.0)], "a.json")
        pa = self.pt([pt_row("fp16cl_graph", 32, 8000.0, model="vgg16")], "pa.json")
        b = self.gb([gb_entry("vgg16", "fp16", "graph", 32, 12600.0),
                     gb_entry("vgg16", "fp16", "graph", 128, 13000.0)], "b.json")
        pb = self.pt([pt_row("fp16cl_graph", 1, 2000.0, model="vgg16")], "pb.json")
        rc, out = self.run_table("--pair", a, pa, "--pair", b, pb, "--batches", "32,128")
        self.assertEqual(rc, 1)
        self.assertIn("| vgg16 | 32 | 12,000 | 8,000 | 1.50x | ok |", out)
        self.assertIn("| vgg16 | 128 | 13,000 | – | – | FAIL: PyTorch not measured |", out)

    def test_batch1_needs_its_ratio_and_a_missing_or_failed_run_fails(self):
        a = self.gb([gb_entry("alexnet", "fp16", "graph", 1, 1200.0),
                     gb_entry("alexnet", "fp16", "graph", 8, 0, error="graph differs")], "a.json")
        pa = self.pt([pt_row("fp16cl_graph", 1, 1000.0, model="alexnet"),
                      pt_row("fp16cl_graph", 8, 5000.0, model="alexnet"),
                      pt_row("fp16cl_graph", 256, 9000.0, model="alexnet")], "pa.json")
        rc, out = self.run_table("--pair", a, pa)
        self.assertEqual(rc, 1)
        self.assertIn("| alexnet | 1 | 1,200 | 1,000 | 1.20x | FAIL: below 1.3x |", out)
        self.assertIn("| alexnet | 8 | error | 5,000 | – | FAIL: error |", out)
        self.assertIn("| alexnet | 256 | – | 9,000 | – | FAIL: not measured |", out)

    def test_every_expected_batch_has_a_row_and_only_mxnet_nets_go_without_a_peer(self):
        a = self.gb([gb_entry("inception_bn", "fp16", "graph", 1, 1800.0),
                     gb_entry("efficientnet_b7", "fp16", "graph", 1, 127.0)], "a.json")
        pa = self.pt([pt_row("fp16cl_graph", 8, 900.0, model="vgg16")], "pa.json")
        rc, out = self.run_table("--pair", a, pa, "--batches", "1,8")
        self.assertEqual(rc, 1)
        self.assertIn("| inception_bn | 1 | 1,800 | – | – | no PyTorch peer |", out)
        self.assertIn("| inception_bn | 8 | – | – | – | FAIL: not measured |", out)
        self.assertIn("| efficientnet_b7 | 1 | 127 | – | – | FAIL: PyTorch not measured |", out)
        self.assertIn("| efficientnet_b7 | 8 | – | – | – | FAIL: not measured (nor PyTorch) |",
                      out)

    def test_a_ratio_across_calls_names_both_folders(self):
        os.makedirs(os.path.join(self.dir, "call2", "e"))
        a = self.gb([gb_entry("vgg16", "fp16", "graph", 1, 4000.0)], "a.json")
        pa = self.pt([pt_row("fp16cl_graph", 1, 2000.0, model="vgg16")],
                     os.path.join("call2", "e", "pa.json"))
        rc, out = self.run_table("--pair", a, pa, "--batches", "1")
        self.assertEqual(rc, 0)
        here = "/".join(os.path.normpath(self.dir).split(os.sep)[-2:])
        self.assertIn(f"| vgg16 | 1 | 4,000 | 2,000 | 2.00x | ok | {here}; PyTorch call2/e |", out)

    def test_unreadable_input_is_exit_2(self):
        rc, _ = self.run_table("--pair", os.path.join(self.dir, "none.json"),
                               os.path.join(self.dir, "none2.json"))
        self.assertEqual(rc, 2)


# --------------------------------------------------------------------------------------------
class CompareTrainTest(TempFiles):
    def run_tool(self, *argv):
        import compare_train as ct

        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = ct.main(list(argv))
        return rc, out.getvalue()

    @staticmethod
    def train_row(model, mode, batch, img_s, reserved, error=None):
        if error:
            return {"model": model, "mode": mode, "precision": "fp16", "batch": batch,
                    "error": error}
        return {"model": model, "mode": mode, "precision": "fp16", "batch": batch,
                "img_s": img_s, "peak_reserved_mib": reserved, "peak_allocated_mib": reserved / 2}

    def test_faster_and_smaller_passes_and_each_shortfall_is_named(self):
        entries = []
        for batch, img_s, arena in ((32, 3000.0, 5000.0), (64, 2500.0, 9000.0),
                                    (256, 3500.0, 30000.0)):
            for e in gb_repeated("resnet50", "fp16", "train", batch, [img_s, img_s * 1.01]):
                e["arena_peak_mib"] = arena
                entries.append(e)
        entries += gb_repeated("resnet50", "fp32", "train", 32, [999.0])  # another precision
        cb = self.gb(entries)
        pt = self.pt([self.train_row("resnet50", "eager", 32, 2000.0, 6000.0),
                      self.train_row("resnet50", "graph", 32, 2800.0, 5500.0),
                      self.train_row("resnet50", "eager", 64, 2600.0, 12000.0),
                      self.train_row("resnet50", "graph", 64, 2400.0, 8000.0),
                      self.train_row("resnet50", "eager", 256, 0, 0, error="out of memory")],
                     "pt_train.json")
        rc, out = self.run_tool("--cnnbench", cb, "--pytorch", pt, "--check")
        self.assertEqual(rc, 1)
        # batch 32: ahead of the faster mode (graph), arena below its reserved pool
        self.assertRegex(out, r"\| resnet50 \| 32 \| 3,0\d\d \| 2,000 \| 2,800 \| 1\.0\dx \| 5,000 "
                              r"\| 200 \| 5,500 \| ok \|")
        # batch 64: the faster mode is eager (2,600), which it trails, in less memory than eager's
        self.assertRegex(out, r"\| resnet50 \| 64 \|.*\| 0\.9\dx \| 9,000 \| 200 \| 12,000 \| "
                              r"FAIL: slower \|")
        # batch 256: PyTorch ran out of memory in its only mode
        self.assertRegex(out, r"\| resnet50 \| 256 \|.*out of memory.*\| ok \(PyTorch out of memory\) \|")
        self.assertNotIn("| 32 | 999", out)

    def test_more_memory_fails_and_an_error_row_fails(self):
        entries = gb_repeated("efficientnet_b0", "fp16", "train", 32, [4000.0])
        for e in entries:
            e["arena_peak_mib"] = 7000.0
        entries.append(gb_entry("efficientnet_b0", "fp16", "train", 64, 0,
                                error="training: concat not supported yet"))
        cb = self.gb(entries)
        pt = self.pt([self.train_row("efficientnet_b0", "graph", 32, 3000.0, 6000.0),
                      self.train_row("efficientnet_b0", "graph", 64, 3000.0, 9000.0)],
                     "pt_train.json")
        rc, out = self.run_tool("--cnnbench", cb, "--pytorch", pt, "--check")
        self.assertEqual(rc, 1)
        self.assertRegex(out, r"\| efficientnet_b0 \| 32 \|.*\| 1\.33x \| 7,000 \|.*FAIL: more memory \|")
        self.assertIn("FAIL: training: concat not supported yet", out)
        rc, _ = self.run_tool("--cnnbench", cb, "--pytorch", pt)  # without --check: a table only
        self.assertEqual(rc, 0)

    def test_unreadable_input_is_exit_2(self):
        rc, _ = self.run_tool("--cnnbench", os.path.join(self.dir, "none.json"),
                              "--pytorch", os.path.join(self.dir, "none2.json"))
        self.assertEqual(rc, 2)


# --------------------------------------------------------------------------------------------
class MaxBatchTableTest(TempFiles):
    def run_tool(self, *argv):
        import max_batch_table as mt

        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = mt.main(list(argv))
        return rc, out.getvalue()

    def run_json(self, name, limit_label, limit_mib, rows):
        ctx = dict(CONTEXT, memory_limit=limit_label, memory_limit_mib=str(limit_mib))
        return self.write(name, {"context": ctx, "benchmarks": rows})

    @staticmethod
    def row(name, largest=0, capped=False, error=None):
        e = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
             "iterations": 1, "real_time": 10.0, "time_unit": "s"}
        if error:
            e.update(error_occurred=True, error_message=error)
        else:
            e.update(largest_batch=largest, first_failed=0 if capped else largest + 1,
                     capped=1 if capped else 0)
        return e

    def test_columns_by_limit_cells_and_the_article_row(self):
        net = "efficientnet_b0/fp16/train/max_batch/size:64/classes:200"
        a = self.run_json("m16.json", "16 GiB", 16384, [
            self.row(net, 71), self.row("resnet50/fp16/graph/max_batch", 900),
            # a throughput row is not a max-batch row
            gb_entry("resnet50", "fp16", "graph", 32, 9000.0)])
        b = self.run_json("m8.json", "8 GiB", 8192, [
            self.row(net, 33), self.row("resnet50/fp16/graph/max_batch", error="illegal address")])
        c = self.run_json("all.json", "none", 0, [self.row(net, 4096, capped=True)])
        rc, out = self.run_tool(a, c, b, "--article")
        self.assertEqual(rc, 0)
        self.assertIn("| network | mode | precision | input | 8 GiB | 16 GiB | whole device |", out)
        self.assertIn("| efficientnet_b0 | train | fp16 | 64 | 33 | 71 | >= 4096 |", out)
        self.assertIn("| article (EfficientNet, tiny-imagenet) | train | its framework's | 64 | 32 "
                      "| 64 | - |", out)
        self.assertIn("| resnet50 | graph | fp16 | default | error | 900 | - |", out)
        self.assertIn("- resnet50 graph fp16 at 8 GiB: illegal address", out)

    def test_a_search_cut_off_keeps_its_bracket_from_the_results_lines(self):
        net = "efficientnet_b0/fp16/train/max_batch/size:64/classes:200"
        ctx = dict(CONTEXT, memory_limit="24 GiB", memory_limit_mib="24576")

        def attempt(search, batch, fit):
            return {"max_batch_attempt": {"search": search, "batch": batch, "fit": fit,
                                          "peak_mib": 100.0, "seconds": 3.0, "message": ""}}
        lines = [{"context": ctx},
                 # a finished search: its row wins over its attempts
                 attempt("resnet50/fp16/graph/max_batch", 256, "fits"),
                 attempt("resnet50/fp16/graph/max_batch", 512, "out of memory"),
                 self.row("resnet50/fp16/graph/max_batch", 300),
                 attempt(net, 64, "fits"), attempt(net, 128, "fits"),
                 attempt(net, 9000, "out of memory"), attempt(net, 8688, "fits"),
                 attempt("vgg16/fp16/train/max_batch", 64, "fits")]
        path = os.path.join(self.dir, "m24.jsonl")
        with open(path, "w") as f:
            f.write("\n".join(json.dumps(x) for x in lines) + "\n")
            f.write('{"max_batch_attempt": {"search": "vgg16/fp16/tr')  # killed mid-line
        rc, out = self.run_tool(path)
        self.assertEqual(rc, 0, out)
        self.assertIn("| efficientnet_b0 | train | fp16 | 64 | >= 8688 (cut off, < 9000) |", out)
        self.assertIn("| resnet50 | graph | fp16 | default | 300 |", out)
        self.assertIn("| vgg16 | train | fp16 | default | >= 64 (cut off) |", out)

    def test_runs_at_one_limit_merge_into_one_column(self):
        """A search cut off in one run is finished by another at the same limit: a capped row
        there and a failure one above it here make an exact cell; a failure below a fit is
        flagged, not hidden."""
        ctx = dict(CONTEXT, memory_limit="none", memory_limit_mib="0")

        def attempt(search, batch, fit):
            return {"max_batch_attempt": {"search": search, "batch": batch, "fit": fit,
                                          "peak_mib": 1.0, "seconds": 1.0, "message": ""}}
        r50 = "resnet50/fp16/train/max_batch"
        b0 = "efficientnet_b0/fp16/graph/max_batch"
        first = [{"context": ctx}, attempt(r50, 1024, "fits"), attempt(r50, 3482, "fits"),
                 attempt(r50, 3484, "out of memory"),
                 attempt(b0, 100, "fits"), attempt(b0, 200, "out of memory")]
        second = [{"context": ctx}, attempt(r50, 3483, "fits"), self.row(r50, 3483, capped=True),
                  attempt(b0, 150, "out of memory"), attempt(b0, 160, "fits")]
        paths = []
        for name, lines in (("w1.jsonl", first), ("w2.jsonl", second)):
            paths.append(os.path.join(self.dir, name))
            with open(paths[-1], "w") as f:
                f.write("\n".join(json.dumps(x) for x in lines) + "\n")
        rc, out = self.run_tool(*paths)
        self.assertEqual(rc, 0, out)
        self.assertIn("| network | mode | precision | input | whole device |", out)
        self.assertIn("| resnet50 | train | fp16 | default | 3483 |", out)
        self.assertIn("| efficientnet_b0 | graph | fp16 | default | 160 ? |", out)
        self.assertIn("- efficientnet_b0 graph fp16 at the whole device: batch 150 ran out of "
                      "memory below 160, which fitted", out)
        # Either run alone: the cut-off bracket, and the cap.
        rc, out = self.run_tool(paths[0])
        self.assertIn("| resnet50 | train | fp16 | default | >= 3482 (cut off, < 3484) |", out)
        rc, out = self.run_tool(paths[1])
        self.assertIn("| resnet50 | train | fp16 | default | >= 3483 |", out)

    def test_unreadable_input_is_exit_2(self):
        rc, _ = self.run_tool(os.path.join(self.dir, "none.json"))
        self.assertEqual(rc, 2)


# --------------------------------------------------------------------------------------------
class TrainSeedTableTest(TempFiles):
    """seed_table.py --mode train on the repository's training seed (MXNet's train_imagenet)."""

    def test_train_rows_beside_the_training_seed_with_alexnets_batch_x8(self):
        entries = gb_repeated("resnet50", "fp16", "train", 32, [900.0])
        entries += gb_repeated("resnet50", "fp16", "graph", 32, [20000.0])  # inference: not shown
        for e in gb_repeated("alexnet_lrn", "fp32", "train", 64, [5000.0]):
            e["run_name"] = e["name"] = e["name"].replace("batch:64", "batch:64/size:224")
            entries.append(e)
        cb = self.gb(entries)
        md = st.build_table([cb], st.DEFAULT_TRAIN_SEED, "Tesla P100", None, "train")
        self.assertIn("training images/s", md)
        self.assertIn("(cnnbench, train step, median)", md)
        self.assertIn("train_imagenet.py", md)
        rows = [l for l in md.splitlines() if l.startswith("| resnet50 | 224 | 32 |")]
        self.assertEqual(len(rows), 1)
        self.assertIn("| 900 |", rows[0])
        self.assertNotIn("20,000", md)
        # The seed's AlexNet rows at batch column 8 are batch 64 here.
        alex = [l for l in md.splitlines() if l.startswith("| alexnet_lrn (seed: alexnet) | 224 | 64 |")]
        self.assertEqual(len(alex), 1)
        self.assertIn("| 5,000 |", alex[0])
        self.assertNotIn("| alexnet_lrn (seed: alexnet) | 224 | 1 |", md)

    def test_readme_markers_are_the_modes_own(self):
        readme = os.path.join(self.dir, "README.md")
        with open(readme, "w") as f:
            f.write("x\n<!-- train-seed-table:begin -->\nold\n<!-- train-seed-table:end -->\ny\n")
        cb = self.gb(gb_repeated("resnet50", "fp16", "train", 8, [300.0]))
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = st.main(["--cnnbench", cb, "--mode", "train", "--readme", readme])
        self.assertEqual(rc, 0)
        text = open(readme).read()
        self.assertNotIn("old", text)
        self.assertIn("| resnet50 | 224 | 8 |", text)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            rc = st.main(["--cnnbench", cb, "--readme", readme])  # inference markers: absent
        self.assertEqual(rc, 2)


class CheckSoakTest(TempFiles):
    """tools/check_soak.py on a synthetic --soak=3 run: one benchmark's repetitions per pass and a
    soak/pass:K checkpoint row after each."""

    def run_json(self, passes=3, device=(2000.0, 2000.4, 2000.6), rss=(300.0, 310.0, 320.0),
                 img_s=((1000, 1010, 990), (1003, 1008, 995), (998, 1001, 1004)), drop=None,
                 pass_s=(110.25, 104.5, None)):
        import check_soak  # noqa: F401
        entries = []
        for k in range(1, passes + 1):
            if drop != k:
                for e in gb_repeated("resnet50", "fp16", "graph", 32, list(img_s[k - 1])):
                    e["name"] = e["name"].replace("batch:32", f"batch:32/pass:{k}")
                    e["run_name"] = e["run_name"] + f"/pass:{k}"
                    entries.append(e)
            entries.append({"name": f"soak/pass:{k}/iterations:1/repeats:1/manual_time",
                            "run_name": f"soak/pass:{k}/iterations:1/repeats:1/manual_time",
                            "run_type": "iteration", "repetitions": 1, "iterations": 1,
                            "real_time": 0.001, "time_unit": "ns", "pass": k,
                            "device_used_mib": device[k - 1], "host_rss_mib": rss[k - 1]})
            if pass_s[k - 1] is not None:  # runs before pass_s was recorded lack it
                entries[-1]["pass_s"] = pass_s[k - 1]
        return self.gb(entries)

    def verdicts(self, path, **kw):
        import check_soak as cs
        _, checkpoints, runs = cs.load(path)
        return cs.judge(checkpoints, runs, **kw)

    def test_a_steady_run_passes(self):
        import check_soak as cs
        path = self.run_json()
        v = self.verdicts(path)
        self.assertTrue(all(ok for ok, _ in v), v)
        self.assertEqual(len(v), 2 + 1 + 2)  # device x2, host, throughput x2
        md = os.path.join(self.dir, "soak.md")
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(cs.main([path, "--out-md", md]), 0)
        text = open(md).read()
        self.assertIn("| 1 | 2000.0 | 300.0 | 110.2 |", text)
        self.assertIn("| 3 | 2000.6 | 320.0 | – |", text)
        self.assertIn("| resnet50/fp16/graph/batch:32 | 1,000 | 1,003 | 1,001 |", text)

    def test_device_memory_that_does_not_come_back_fails(self):
        v = self.verdicts(self.run_json(device=(2000.0, 2000.2, 2064.0)))
        bad = [line for ok, line in v if not ok]
        self.assertEqual(len(bad), 1)
        self.assertIn("after pass 3", bad[0])

    def test_host_memory_growth_fails(self):
        v = self.verdicts(self.run_json(rss=(300.0, 350.0, 400.0)), rss_growth_mib=64)
        self.assertEqual([line for ok, line in v if not ok][0][:20], "host resident memory")

    def test_a_slower_pass_fails_and_noise_does_not(self):
        slow = ((1000, 1010, 990), (1003, 1008, 995), (900, 905, 898))
        bad = [line for ok, line in self.verdicts(self.run_json(img_s=slow)) if not ok]
        self.assertEqual(len(bad), 1)
        self.assertIn("pass 3", bad[0])
        noisy = ((1000, 1100, 900), (1050, 1000, 950), (960, 1040, 1000))
        self.assertTrue(all(ok for ok, _ in self.verdicts(self.run_json(img_s=noisy))))

    def test_a_missing_pass_or_no_soak_rows_fail(self):
        bad = [line for ok, line in self.verdicts(self.run_json(drop=2)) if not ok]
        self.assertIn("pass 2 missing", bad[0])
        plain = self.gb(gb_repeated("resnet50", "fp16", "graph", 32, [1000, 1001, 999]))
        v = self.verdicts(plain)
        self.assertFalse(v[0][0])
        self.assertIn("--soak", v[0][1])
