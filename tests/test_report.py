"""Tests of tools/report.py (issue 7), stdlib unittest; the plot tests need matplotlib (Debian's
python3-matplotlib, for /usr/bin/python3) and skip, saying so, without it.

    python3 -m unittest tests/test_report.py

The fixture tests/data/report_fixture_h200.json holds entries of a recorded H200 run of the
suite (tests/data/report_fixture_h200.cmd says how it was cut); the max-batch rows are synthetic,
in the shape cnnbench --max_batch writes them.
"""
import contextlib
import copy
import importlib.util
import io
import json
import os
import struct
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
sys.path.insert(0, os.path.join(ROOT, "tools"))

import report  # noqa: E402

FIXTURE = os.path.join(DATA, "report_fixture_h200.json")
HAVE_MPL = importlib.util.find_spec("matplotlib") is not None
HAVE_COST_SEED = os.path.exists(report.DEFAULT_COST_SEED)
PRICES = {"NVIDIA H200": {"provider": "test", "currency": "USD", "per_hour": 4.0, "source": "test"}}


def png_size(path):
    """(width, height) of a PNG, checking its signature and IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(33)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    return struct.unpack(">II", head[16:24])


def write_json(dirname, name, doc):
    path = os.path.join(dirname, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def max_batch_entry(net, mode, largest, tail="", at_cap=False):
    """A max-batch row as cnnbench writes it (its cap is in the run's context, not the row)."""
    name = f"{net}/fp16/{mode}/max_batch{tail}/iterations:1/repeats:1/manual_time"
    return {"name": name, "run_name": name, "run_type": "iteration", "largest_batch": largest,
            "first_failed": 0 if at_cap else largest + 1, "capped": int(at_cap), "limit_mib": 0}


def capped(doc, gib):
    """doc's context as a `--memory_limit=gib` run writes it (None: the whole device)."""
    doc["context"] = dict(doc["context"], memory_limit=f"{gib} GiB" if gib else "none",
                          memory_limit_mib=str(int(gib * 1024) if gib else 0))
    return doc


VIDEO_FIXTURE = os.path.join(DATA, "video_fixture_h200.json")


def stylegan_train_doc(rows):
    """A file in the shape cnnbench_stylegan_train --json writes (harness/stylegan_train_main.cpp's
    run_bench: context, settings, rows); no run of it has finished on a GPU yet, so the figures are
    made up here."""
    with open(FIXTURE) as f:
        context = json.load(f)["context"]
    return {"context": context,
            "settings": {"network": "stylegan3_t", "discriminator": "stylegan2 resnet",
                         "resolution": 256, "precision": "tf32", "r1_interval": 16},
            "rows": rows}


class TimeToSolution(unittest.TestCase):
    def test_yolor_video_task_from_the_recorded_run(self):
        run = report.load_run(VIDEO_FIXTURE)
        with open(VIDEO_FIXTURE) as f:
            entries = json.load(f)["benchmarks"]
        for batch in (8, 32):
            reps = sorted(e["time_to_completion_s"] for e in entries
                          if e.get("run_type") == "iteration"
                          and f"/batch:{batch}/" in e["name"])
            self.assertEqual(len(reps), 2)
            row = run["rows"][("yolor_csp_x", "fp16", "video", batch)]
            self.assertAlmostEqual(row["time_to_completion_s"], (reps[0] + reps[1]) / 2, places=9)
            self.assertEqual(row["frames"], 1000)
            self.assertEqual(row["size"], 1280)
        data = report.build([run], {}, [], PRICES)
        tasks = {t["task"]: t for t in data["tasks"]}
        t8 = tasks["1,000 frames of yolor_csp_x at 1280 px to final boxes, fp16, batch 8"]
        self.assertAlmostEqual(t8["seconds"], run["rows"][("yolor_csp_x", "fp16", "video", 8)]
                               ["time_to_completion_s"])
        self.assertAlmostEqual(t8["cost"], t8["seconds"] / 3600 * 4.0)
        self.assertFalse(any("YOLOR's video task" in n for n in data["notes"]))
        self.assertTrue(any("5 kimg" in n for n in data["notes"]), data["notes"])

    def test_stylegan_5_kimg_from_a_training_file(self):
        doc = stylegan_train_doc([
            {"batch": 8, "fits": True, "ms": 400.0, "img_s": 20.0, "s_per_5kimg": 250.0},
            {"batch": 4096, "fits": False, "error": "out of memory"}])
        with tempfile.TemporaryDirectory() as d:
            path = write_json(d, "sg.json", doc)
            self.assertTrue(report.is_stylegan_train(path))
            self.assertFalse(report.is_stylegan_train(FIXTURE))
            sg = report.load_stylegan_train(path)
            data = report.build([report.load_run(FIXTURE)], {}, [], PRICES, sg_runs=[sg])
            sg_tasks = [t for t in data["tasks"] if "5 kimg" in t["task"]]
            self.assertEqual(len(sg_tasks), 1)  # the row that did not fit has no time
            self.assertEqual(sg_tasks[0]["task"],
                             "5 kimg of stylegan3_t training at 256 px, tf32, batch 8")
            self.assertAlmostEqual(sg_tasks[0]["cost"], 250.0 / 3600 * 4.0)
            self.assertTrue(any("YOLOR's video task" in n for n in data["notes"]))
            # Through main(): the file is told apart from Google Benchmark's and listed.
            out = os.path.join(d, "out")
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(report.main([FIXTURE, path, VIDEO_FIXTURE, "--out-dir", out,
                                              "--prices", report.DEFAULT_PRICES, "--seed", "",
                                              "--cost-seed", "", "--no-plots"]), 0)
            with open(os.path.join(out, "report.md")) as f:
                md = f.read()
            self.assertIn("5 kimg of stylegan3_t training at 256 px, tf32, batch 8", md)
            self.assertIn("frames of yolor_csp_x at 1280 px", md)
            self.assertIn("`sg.json`", md)

    def test_a_bad_training_file_is_named(self):
        with tempfile.TemporaryDirectory() as d:
            path = write_json(d, "sg.json", stylegan_train_doc([{"batch": 8, "fits": True}]))
            with self.assertRaises(report.InputError) as e:
                report.load_stylegan_train(path)
            self.assertIn("sg.json: row 1 lacks batch or s_per_5kimg", str(e.exception))


SCALING_FIXTURE = os.path.join(DATA, "scaling_fixture_h200.json")


class Scaling(unittest.TestCase):
    def test_resnet50_sweep_saturates(self):
        run = report.load_run(SCALING_FIXTURE)
        data = report.build([run], {}, [], PRICES)
        (sc,) = data["scaling"]
        pts = sorted((b, row["img_s"]) for (n, p, m, b), row in run["rows"].items()
                     if (n, p, m) == ("resnet50", "fp16", "graph"))
        self.assertEqual(sc["batches"], [b for b, _ in pts])
        self.assertEqual(len(pts), 9)
        top = max(v for _, v in pts)
        self.assertEqual(sc["plateau_img_s"], top)
        first = min(b for b, v in pts if v >= 0.9 * top)
        self.assertEqual(sc["batch_90"], first)
        below = [b for b, v in pts if b < first]
        self.assertTrue(all(dict(pts)[b] < 0.9 * top for b in below))
        for b, v, ms in zip(sc["batches"], sc["img_s"], sc["ms_per_batch"]):
            self.assertAlmostEqual(ms, 1000.0 * b / v)
        self.assertIsNone(sc["largest_batch"])

    def test_still_rising_single_batch_and_fits(self):
        t = {("a", 1): 100.0, ("a", 8): 700.0, ("a", 64): 1000.0,  # +43% at the last: rising
             ("b", 1): 50.0, ("b", 8): 90.0, ("b", 64): 95.0, ("b", 256): 94.0,  # flat
             ("c", 32): 10.0}  # one batch: left out
        mb = [{"gpu": "G", "network": "b", "mode": "graph", "largest": 4000,
               "memory_limit_gib": None},
              {"gpu": "G", "network": "b", "mode": "graph", "largest": 900,
               "memory_limit_gib": 8},
              {"gpu": "G", "network": "b", "mode": "train", "largest": 300,
               "memory_limit_gib": None}]
        out = {s["network"]: s for s in report.saturation([("G", "ours"), ("S", "seed")],
                                                          {"G": t, "S": t}, mb, "graph")}
        self.assertEqual(sorted(out), ["a", "b"])  # the seed's GPU is not ours
        self.assertTrue(out["a"]["still_rising"])
        self.assertEqual(out["a"]["batch_90"], 64)
        self.assertFalse(out["b"]["still_rising"])
        self.assertEqual((out["b"]["plateau_batch"], out["b"]["batch_90"]), (64, 8))
        self.assertEqual(out["b"]["largest_batch"], 4000)  # whole device, this mode only
        self.assertIsNone(out["a"]["largest_batch"])

    def test_table_and_json(self):
        with tempfile.TemporaryDirectory() as d:
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(report.main([SCALING_FIXTURE, "--out-dir", d, "--prices",
                                              report.DEFAULT_PRICES, "--seed", "",
                                              "--cost-seed", "", "--no-plots"]), 0)
            with open(os.path.join(d, "report.md")) as f:
                md = f.read()
            with open(os.path.join(d, "report.json")) as f:
                doc = json.load(f)
        (sc,) = doc["scaling"]
        self.assertIn("## How throughput grows with batch", md)
        self.assertIn(f"| resnet50 | NVIDIA H200 | 1-256 (9) | {sc['img_s'][0]:,.0f} |", md)
        self.assertIn(f"| {sc['batch_90']} | – |", md)
        self.assertEqual(doc["precision"], "fp16")
        self.assertTrue(any(r["metric"].startswith("fastest") for r in doc["recommendations"]))


class DataParallelRows(unittest.TestCase):
    def test_dp_files_get_their_section(self):
        with open(FIXTURE) as f:
            context = dict(json.load(f)["context"], nccl_loaded="2.28.9", world_size="2")
        dp = {"context": context, "results": [
            {"network": "resnet50", "precision": "fp16", "batch_per_gpu": 256, "world_size": 2,
             "global_img_per_s": 12000.0, "per_gpu_img_per_s": 6000.0,
             "one_gpu_img_per_s": 6400.0, "scaling_efficiency": 0.9375,
             "exposed_comm_ms": 2.5}]}
        with tempfile.TemporaryDirectory() as d:
            path = write_json(d, "dp_g2.json", dp)
            self.assertTrue(report.is_data_parallel(path))
            self.assertFalse(report.is_data_parallel(FIXTURE))
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(report.main([FIXTURE, path, "--out-dir", d, "--prices",
                                              report.DEFAULT_PRICES, "--seed", "",
                                              "--cost-seed", "", "--no-plots"]), 0)
            with open(os.path.join(d, "report.md")) as f:
                md = f.read()
        self.assertIn("## Training on several GPUs", md)
        self.assertIn("| resnet50 | fp16 | NVIDIA H200 | 256 | 2 | 12,000 | 6,000 | 6,400 | 0.938 "
                      "| 2.50 |", md)
        self.assertIn("| resnet50 | GTX 1080 | 4 | 32 | 8 |", md)  # the seed's rows beside

    def test_a_bad_dp_file_is_named(self):
        with open(FIXTURE) as f:
            context = dict(json.load(f)["context"], nccl_loaded="2.28.9")
        with tempfile.TemporaryDirectory() as d:
            path = write_json(d, "dp_bad.json", {"context": context,
                                                "results": [{"network": "resnet50"}]})
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(report.main([path, "--out-dir", d, "--seed", "",
                                              "--cost-seed", "", "--no-plots"]), 2)
            self.assertIn("dp_bad.json: a result lacks", err.getvalue())


class CostArithmetic(unittest.TestCase):
    @unittest.skipUnless(HAVE_COST_SEED, "the seed's cost CSV (../shared/reference) is not here")
    def test_every_seed_row(self):
        # The GTX 1080 AlexNet row: 303 s at 0.06 EUR per minute = 0.303 EUR; and every other.
        rows = report.load_cost_seed(report.DEFAULT_COST_SEED)
        self.assertGreater(len(rows), 10)
        for r in rows:
            got = report.run_cost(r["time_s"], r["per_min"] * 60)
            self.assertAlmostEqual(got, r["total"], delta=1e-4 * max(1, r["total"]),
                                   msg=f"{r['gpu']} {r['network']}")
        first = [r for r in rows if r["gpu"] == "GTX 1080" and r["network"] == "alexnet"][0]
        self.assertAlmostEqual(report.run_cost(first["time_s"], 3.6), 0.303, places=6)

    def test_million_images(self):
        seconds, cost = report.million_images(5000.0, 3.6)
        self.assertAlmostEqual(seconds, 200.0)
        self.assertAlmostEqual(cost, 0.2)
        self.assertIsNone(report.million_images(5000.0, None)[1])


class Recommendations(unittest.TestCase):
    def test_best_and_ties(self):
        self.assertEqual(report.recommend({"A": 10, "B": 10.0, "C": 5}, "x"), [("A", 10), ("B", 10.0)])
        self.assertEqual(report.recommend({"A": 10, "B": 3, "C": 3}, "x", "min"), [("B", 3), ("C", 3)])
        self.assertEqual(report.recommend({"A": None, "B": 2}, "x"), [("B", 2)])
        self.assertEqual(report.recommend({}, "x"), [])

    def test_fleet(self):
        run = report.load_run(FIXTURE)
        other = copy.deepcopy(run)
        other["gpu"] = "Other GPU"
        for row in other["rows"].values():  # twice as fast: faster, but dearer per hour
            if "img_s" in row:
                row["img_s"] *= 2
        run["max_batch"] = {("vgg16", "fp16", "graph"): {"largest": 512, "first_failed": 513,
                                                       "memory_limit_gib": None}}
        other["max_batch"] = {("vgg16", "fp16", "graph"): {"largest": 512, "first_failed": 513,
                                                         "memory_limit_gib": None}}
        prices = dict(PRICES, **{"Other GPU": {"provider": "t", "currency": "USD",
                                               "per_hour": 10.0, "source": "t"}})
        data = report.build([run, other], {}, [], prices)
        recs = {m: picks for m, picks, _, _ in data["recommendations"]}
        self.assertEqual([g for g, _ in recs["fastest, vgg16 at batch 32"]], ["Other GPU"])
        # 2x the speed at 2.5x the price: the H200 costs less per million.
        self.assertEqual([g for g, _ in recs["best cost per million images, vgg16 (USD)"]],
                         ["NVIDIA H200"])
        self.assertEqual([g for g, _ in recs["cheapest per hour (USD)"]], ["NVIDIA H200"])
        # The same largest batch on both: a tie, both listed.
        self.assertEqual([g for g, _ in recs["largest batch, vgg16"]],
                         ["NVIDIA H200 graph", "Other GPU graph"])
        self.assertEqual([g for g, _ in recs["best largest batch per USD/h, vgg16"]],
                         ["NVIDIA H200 graph"])


class Inputs(unittest.TestCase):
    def test_fixture_rows(self):
        run = report.load_run(FIXTURE)
        self.assertEqual(run["gpu"], "NVIDIA H200")
        row = run["rows"][("vgg16", "fp16", "graph", 32)]
        self.assertGreater(row["img_s"], 1000)
        self.assertGreater(row["peak_mib"], 0)

    def test_missing_price_is_a_note(self):
        data = report.build([report.load_run(FIXTURE)], {}, [], {})
        self.assertTrue(any("no price for NVIDIA H200" in n for n in data["notes"]), data["notes"])
        self.assertTrue(all(c["cost"] is None for c in data["cost"]))
        md = report.render_markdown(data, [report.load_run(FIXTURE)], {}, [])
        self.assertIn("no price for NVIDIA H200", md)

    def test_schema_versions(self):
        with open(FIXTURE) as f:
            doc = json.load(f)
        with tempfile.TemporaryDirectory() as d:
            newer = copy.deepcopy(doc)
            newer["context"]["cnnbench_version"] = "1.0.0"
            with self.assertRaisesRegex(report.InputError, "written by cnnbench 1.0.0"):
                report.load_run(write_json(d, "newer.json", newer))
            none = copy.deepcopy(doc)
            del none["context"]["cnnbench_version"]
            with self.assertRaisesRegex(report.InputError, "not a cnnbench results file"):
                report.load_run(write_json(d, "old.json", none))
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                rc = report.main([os.path.join(d, "newer.json"), "--out-dir", d, "--seed", "",
                                  "--cost-seed", ""])
            self.assertEqual(rc, 2)
            self.assertIn("newer.json", err.getvalue())
            self.assertEqual(err.getvalue().count("\n"), 1)  # one message

    def test_bad_reference_rows_name_the_line(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "seed.csv")
            with open(p, "w") as f:
                f.write("source,gpu,gpus,network,batch,images_per_sec,note\n"
                        "x,GTX 1080,1,alexnet,1,484.21,\n"
                        "x,GTX 1080,1,alexnet,two,300,\n")
            with self.assertRaisesRegex(report.InputError, "seed.csv, line 3: a bad row"):
                report.load_seed(p)
            c = os.path.join(d, "cost.csv")
            with open(c, "w") as f:
                f.write("gpu,network,batch,images,time_s,price_eur_per_min,total_cost_eur\n"
                        "GTX 1080,alexnet,32,1000000,fast,0.06,0.303\n")
            with self.assertRaisesRegex(report.InputError, "cost.csv, line 2: a bad row"):
                report.load_cost_seed(c)

    def test_bad_prices(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "prices.yaml")
            with open(p, "w") as f:
                f.write("prices:\n  - {gpu: X, currency: EUR}\n")
            with self.assertRaisesRegex(report.InputError, "lacks per_hour"):
                report.load_prices(p)

    def test_shipped_prices(self):
        prices = report.load_prices(report.DEFAULT_PRICES)
        self.assertAlmostEqual(prices["GTX 1080"]["per_hour"], 0.06 * 60)
        self.assertIn("example", prices["NVIDIA H200"]["source"])


class Efficiency(unittest.TestCase):
    def test_against_the_gemm_ceiling(self):
        # A ceiling row as `cnnbench --gemm_ceiling` names it (synthetic figure), beside the
        # fixture's: vgg16's TFLOP/s over it.
        with open(FIXTURE) as f:
            doc = json.load(f)
        doc["benchmarks"].append({"name": "gemm/fp16/ceiling/m:8192/manual_time",
                                  "run_name": "gemm/fp16/ceiling/m:8192/manual_time",
                                  "run_type": "iteration", "tflops": 800.0})
        with tempfile.TemporaryDirectory() as d:
            run = report.load_run(write_json(d, "with_gemm.json", doc))
        self.assertEqual(run["ceiling"], {"fp16": 800.0})
        data = report.build([run], {}, [], PRICES)
        vgg = [c for c in data["cost"] if c["network"] == "vgg16"][0]
        self.assertAlmostEqual(vgg["efficiency"], vgg["tflops"] / 800.0)
        md = report.render_markdown(data, [run], PRICES, [])
        self.assertIn("GEMM ceiling", md)
        self.assertIn(f"{100 * vgg['efficiency']:.1f}%", md)
        # Without a ceiling the column is blank and a note says why.
        data = report.build([report.load_run(FIXTURE)], {}, [], PRICES)
        self.assertTrue(all(c["efficiency"] is None for c in data["cost"]))
        self.assertTrue(any("GEMM ceiling" in n for n in data["notes"]))


class MaxBatchRows(unittest.TestCase):
    def test_rows_table_and_plot(self):
        # Max-batch rows as `cnnbench --max_batch --memory_limit=N` writes them (synthetic
        # figures), one file per card size, merged as one GPU's.
        with open(FIXTURE) as f:
            doc = json.load(f)
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for gib, largest in ((8, 300), (16, 700), (24, 1100), (None, 5000)):
                sized = capped(copy.deepcopy(doc), gib)
                sized["benchmarks"] = [
                    max_batch_entry("vgg16", "train", largest),
                    max_batch_entry("efficientnet_b0", "train", min(9 * largest, 8192),
                                    "/size:64/classes:200", at_cap=9 * largest >= 8192)]
                paths.append(write_json(d, f"mb_{gib}.json", sized))
            runs = [report.load_run(p) for p in paths]
            data = report.build(runs, {}, [], PRICES)
            vgg = [m for m in data["max_batch"] if m["network"] == "vgg16"]
            self.assertEqual([m["largest"] for m in vgg], [300, 700, 1100, 5000])
            self.assertEqual([m["memory_limit_gib"] for m in vgg], [8, 16, 24, None])
            # The plot's x: the cap, or the whole device's memory from the run's context.
            whole = float(doc["context"]["gpu_memory_mib"]) / 1024
            self.assertGreater(whole, 24)
            self.assertEqual([m["card_gib"] for m in vgg], [8, 16, 24, whole])
            # The price per item is the whole GPU's only: a capped run stands for another card.
            self.assertIsNone(vgg[0]["per_item_per_hour"])
            self.assertAlmostEqual(vgg[3]["per_item_per_hour"], 4.0 / 5000)
            md = report.render_markdown(data, runs, PRICES, [])
            self.assertIn("| vgg16 | NVIDIA H200 | train | 24 GiB | 1,100 | – |", md)
            self.assertIn("| vgg16 | NVIDIA H200 | train | whole GPU | 5,000 |", md)
            # The article's case keeps its input size and classes apart from ImageNet's.
            self.assertIn("| efficientnet_b0 | NVIDIA H200 | train size:64 classes:200 | 8 GiB "
                          "| 2,700 |", md)
            # A search whose cap fitted: at least the cap.
            self.assertIn("| efficientnet_b0 | NVIDIA H200 | train size:64 classes:200 | 24 GiB "
                          "| >= 8,192 |", md)
            # Which GPU fits most: the whole-device run only (a capped run predicts a smaller
            # card).
            recs = {m: picks for m, picks, _, _ in data["recommendations"]}
            self.assertEqual(recs["largest batch, vgg16"], [("NVIDIA H200 train", 5000)])
            if HAVE_MPL:
                plots = report.make_plots(data, d)
                self.assertIn(("max_batch.png", "largest batch against card memory"), plots)
                self.assertEqual(png_size(os.path.join(d, "max_batch.png")), (600, 400))


class MaxBatchMerge(unittest.TestCase):
    def test_runs_at_one_cap_merge_and_rows_sort_by_cap(self):
        """A search capped in one run whose next batch ran out of memory in another run at the
        same cap is exact; files given in any order come out ordered by card size."""
        with open(FIXTURE) as f:
            doc = json.load(f)
        with tempfile.TemporaryDirectory() as d:
            whole_a = capped(copy.deepcopy(doc), None)
            whole_a["benchmarks"] = [max_batch_entry("resnet50", "train", 3483, at_cap=True)]
            whole_b = capped(copy.deepcopy(doc), None)  # cut off: attempts, no row
            whole_b["benchmarks"] = []
            whole_b["max_batch_attempts"] = [
                {"search": "resnet50/fp16/train/max_batch", "batch": b, "fit": fit}
                for b, fit in ((3482, "fits"), (3484, "out of memory"))]
            small = capped(copy.deepcopy(doc), 8)
            small["benchmarks"] = [max_batch_entry("resnet50", "train", 172, at_cap=True)]
            paths = [write_json(d, n, x) for n, x in
                     (("a.json", whole_a), ("b.json", whole_b), ("s.json", small))]
            runs = [report.load_run(p) for p in paths]
            data = report.build(runs, {}, [], PRICES)
            r50 = [(m["memory_limit_gib"], m["largest"], m["capped"]) for m in data["max_batch"]]
            self.assertEqual(r50, [(8, 172, True), (None, 3483, False)])
            # Without the run that saw 3,484 fail, the whole device is "at least" 3,483.
            data = report.build([runs[0], runs[2]], {}, [], PRICES)
            self.assertEqual([m["capped"] for m in data["max_batch"]], [True, True])


class Outputs(unittest.TestCase):
    def run_report(self, d, plots):
        args = [FIXTURE, "--out-dir", d, "--prices", report.DEFAULT_PRICES, "--seed", "",
                "--cost-seed", ""]
        if not plots:
            args.append("--no-plots")
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(report.main(args), 0)
        with open(os.path.join(d, "report.md")) as f:
            md = f.read()
        with open(os.path.join(d, "report.html")) as f:
            page = f.read()
        return md, page

    def test_headline_and_readme_block(self):
        data = report.build([report.load_run(FIXTURE)], {}, [], PRICES)
        data["prices"] = PRICES
        block = report.headline(data, "vgg16")
        self.assertIn("| NVIDIA H200 |", block)
        self.assertIn("fastest, vgg16 at batch 32: NVIDIA H200", block)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "README.md")
            with open(path, "w") as f:
                f.write(f"a\n{report.README_BEGIN}\nold\n{report.README_END}\nb\n")
            report.update_readme(path, block)
            with open(path) as f:
                text = f.read()
            self.assertNotIn("old", text)
            self.assertIn("| NVIDIA H200 |", text)
            with open(path, "w") as f:
                f.write("no markers\n")
            with self.assertRaises(report.InputError):
                report.update_readme(path, block)

    def test_markdown_and_html(self):
        with tempfile.TemporaryDirectory() as d:
            md, page = self.run_report(d, plots=False)
        self.assertIn("| vgg16 | NVIDIA H200 |", md)
        self.assertIn("is an example, not a quote", md)
        self.assertIn("<table>", page)
        self.assertIn("NVIDIA H200", page)

    @unittest.skipUnless(HAVE_MPL, "matplotlib is not installed (Debian: python3-matplotlib): "
                         "the plots are not tested here")
    def test_plots_are_pngs_of_their_size(self):
        with tempfile.TemporaryDirectory() as d:
            md, page = self.run_report(d, plots=True)
            # Three networks: one row of three panels, 4.2 x 3.2 in each plus the legend's 0.8 in,
            # at 100 dpi; the memory plot 6 x 4 in.
            self.assertEqual(png_size(os.path.join(d, "throughput.png")), (1260, 400))
            self.assertEqual(png_size(os.path.join(d, "memory.png")), (600, 400))
            self.assertEqual(png_size(os.path.join(d, "cost.png")), (700, 400))  # USD only
        self.assertIn("![images/s against batch](throughput.png)", md)
        self.assertEqual(page.count("data:image/png;base64,"), 3)


if __name__ == "__main__":
    unittest.main()
