"""Tests of the Python tools that run without torch or a GPU (stdlib unittest).

Run from anywhere:  python3 -m unittest tests/test_tools.py   (or: python3 tests/test_tools.py)
Covers tools/compare_pytorch.py (Google Benchmark JSON parsing, median choice, ratios, --check
exit codes, error cells) on synthetic files, and the checked-in tests/data state_dict lists.
"""
import contextlib
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


if __name__ == "__main__":
    unittest.main()
