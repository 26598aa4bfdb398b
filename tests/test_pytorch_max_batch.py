"""Tests of tools/pytorch_max_batch.py (issue 5's PyTorch peer) without torch or a GPU.

    python3 -m unittest -v tests/test_pytorch_max_batch.py

The search against a fake device with a known limit (the exact boundary from any start, no batch
tried twice, the cap, batch 1 failing, an error or the time limit stopping it), the arguments,
and the whole tool (main) on a fake torch whose caching allocator honours
set_per_process_memory_fraction: the cap counting the CUDA context, the attempts' records, the
JSON rewritten after every attempt, out-of-memory and other failures told apart, a limit below
the device's use refused.
"""
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import types
import unittest
from unittest import mock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")
sys.path.insert(0, TOOLS)

import pytorch_max_batch as pmb  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_tools import quiet  # noqa: E402  (the function only: no test class comes along)

ptb = pmb.ptb
MIB, GIB = 2**20, 2**30
HAVE_TORCH = importlib.util.find_spec("torch") is not None




class FakeDevice:
    """A batch b needs base + b * per bytes; more than `limit` is out of memory."""

    def __init__(self, limit, base=100, per=37):
        self.limit, self.base, self.per = limit, base, per
        self.tried = []

    def want(self):
        return (self.limit - self.base) // self.per

    def __call__(self, b):
        self.tried.append(b)
        need = self.base + b * self.per
        if need > self.limit:
            return {"fit": pmb.OOM, "message": "CUDA out of memory. Tried to allocate 2.00 MiB"}
        return {"fit": pmb.FITS, "message": "", "peak_reserved_mib": need / MIB}


# --------------------------------------------------------------------------------------------
class SearchTest(unittest.TestCase):
    def check_exact(self, dev, start, cap=32768):
        r = pmb.search_max_batch(dev, start, cap)
        want = dev.want()
        where = f"limit {dev.limit} start {start}"
        self.assertEqual((r["largest"], r["first_failed"]), (want, want + 1), where)
        self.assertFalse(r["capped"], where)
        self.assertFalse(r["cut_off"], where)
        self.assertIsNone(r["error"], where)
        self.assertEqual(len(dev.tried), len(set(dev.tried)), f"{where}: a batch tried twice")
        self.assertEqual([a["batch"] for a in r["attempts"]], dev.tried, where)
        self.assertLessEqual(len(r["attempts"]), 2 * math.log2(cap) + 4, where)
        return r

    def test_exact_boundary_from_every_start(self):
        for limit in (1000, 12345, 999999):
            for start in (1, 7, 64, 5000):
                self.check_exact(FakeDevice(limit), start)

    def test_the_batches_tried_double_then_bisect_as_cnnbench(self):
        dev = FakeDevice(100 + 100 * 37)  # batch 100 is the largest
        r = self.check_exact(dev, 64)
        self.assertEqual(dev.tried, [64, 128, 96, 112, 104, 100, 102, 101])
        self.assertEqual([a["fit"] for a in r["attempts"]],
                         ["fits", "out of memory", "fits", "out of memory", "out of memory",
                          "fits", "out of memory", "out of memory"])
        dev = FakeDevice(100 + 100 * 37)
        self.check_exact(dev, 5000)  # halving from above
        self.assertEqual(dev.tried[:7], [5000, 2500, 1250, 625, 312, 156, 78])

    def test_attempt_records_keep_try_batch_fields_with_the_batch_first(self):
        r = pmb.search_max_batch(FakeDevice(1000), 8, 64)
        a = r["attempts"][0]
        self.assertEqual(list(a)[0], "batch")
        self.assertEqual((a["batch"], a["fit"], a["message"]), (8, "fits", ""))
        self.assertIn("peak_reserved_mib", a)

    def test_the_cap_fitting_is_capped(self):
        dev = FakeDevice(10**12)
        r = pmb.search_max_batch(dev, 1, 256)
        self.assertEqual((r["largest"], r["first_failed"], r["capped"]), (256, 0, True))
        self.assertEqual(dev.tried, [1, 2, 4, 8, 16, 32, 64, 128, 256])
        # A start above the cap is clamped to it; a cap that is no power of two is reached too.
        dev = FakeDevice(10**12)
        r = pmb.search_max_batch(dev, 5000, 300)
        self.assertEqual((r["largest"], r["capped"], dev.tried), (300, True, [300]))
        dev = FakeDevice(10**12)
        r = pmb.search_max_batch(dev, 64, 300)
        self.assertEqual((r["largest"], r["capped"], dev.tried), (300, True, [64, 128, 256, 300]))
        # The cap failing: the search goes on below it.
        r = pmb.search_max_batch(FakeDevice(100 + 250 * 37), 64, 300)
        self.assertEqual((r["largest"], r["first_failed"], r["capped"]), (250, 251, False))

    def test_batch_1_failing(self):
        dev = FakeDevice(50)  # the base alone is more than the device
        r = pmb.search_max_batch(dev, 16, 256)
        self.assertEqual((r["largest"], r["first_failed"], r["capped"]), (0, 1, False))
        self.assertEqual(dev.tried, [16, 8, 4, 2, 1])
        self.assertIsNone(r["error"])

    def test_an_error_stops_the_search(self):
        dev = FakeDevice(100000)

        def try_batch(b):
            if b == 32:
                return {"fit": pmb.ERROR, "message": "cudaErrorIllegalAddress"}
            return dev(b)
        r = pmb.search_max_batch(try_batch, 1, 4096)
        self.assertEqual(r["error"], "batch 32: cudaErrorIllegalAddress")
        self.assertEqual(r["attempts"][-1]["batch"], 32)
        self.assertEqual((r["largest"], r["first_failed"]), (16, 0))
        self.assertEqual(dev.tried, [1, 2, 4, 8, 16])

    def test_stop_cuts_the_search_off_and_progress_sees_every_attempt(self):
        dev = FakeDevice(100 + 1000 * 37)
        seen = []
        r = pmb.search_max_batch(dev, 64, 32768, stop=lambda: len(dev.tried) >= 6,
                                 progress=lambda res: seen.append(len(res["attempts"])))
        self.assertTrue(r["cut_off"])
        self.assertEqual(dev.tried, [64, 128, 256, 512, 1024, 768])
        self.assertEqual((r["largest"], r["first_failed"]), (768, 1024))  # bounds so far
        self.assertEqual(seen, [1, 2, 3, 4, 5, 6])
        r = pmb.search_max_batch(FakeDevice(1000), 64, 32768, stop=lambda: False)
        self.assertFalse(r["cut_off"])


# --------------------------------------------------------------------------------------------
class ArgumentsTest(unittest.TestCase):
    def test_defaults(self):
        a = pmb.parse_args([])
        self.assertEqual((a.models, a.precisions, a.memory_limits, a.start, a.cap, a.mode),
                         (["efficientnet_b0"], ["fp16", "fp32"], [None], 64, 32768, "eager"))
        self.assertIsNone(a.time_limit_s)
        self.assertEqual((a.optimizer, a.lr, a.num_classes), ("sgd", 0.1, 1000))

    def test_memory_limits_lists_and_repeats(self):
        a = pmb.parse_args(["--memory-limit", "8,16", "--memory-limit", "24", "--memory-limit",
                            " 47.5 "])
        self.assertEqual(a.memory_limits, [8.0, 16.0, 24.0, 47.5])
        self.assertEqual(pmb.parse_args(["--memory-limit", "8,16,24,48"]).memory_limits,
                         [8.0, 16.0, 24.0, 48.0])

    def test_tiny_imagenet_is_the_baselines(self):
        a = pmb.parse_args(["--tiny-imagenet", "--precisions", "fp16,bf16,tf32,fp32"])
        self.assertEqual((a.input_size, a.num_classes, a.optimizer, a.lr, a.weight_decay),
                         (64, 200, "adam", 0.001, 0.0))
        self.assertEqual(a.precisions, ["fp16", "bf16", "tf32", "fp32"])
        s = pmb.settings_of(a)
        self.assertEqual((s["optimizer"], s["input_size"], s["mode"], s["steps"]),
                         ("adam", 64, "eager", 2))

    def test_bad_arguments_exit_2_naming_the_problem(self):
        for argv, what in ((["--memory-limit", "0"], "must be a positive number of GiB, not '0'"),
                           (["--memory-limit", "8,-4"], "not '-4'"),
                           (["--memory-limit", "8GB"], "'8GB' is not a number of GiB"),
                           (["--memory-limit", "nan"], "not 'nan'"),
                           (["--memory-limit", "inf"], "not 'inf'"),
                           (["--precisions", "fp16,fp8"], "unknown precision 'fp8'"),
                           (["--precisions", ","], "--precisions is empty"),
                           (["--start", "0"], "--start must be at least 1"),
                           (["--cap", "0"], "--cap must be at least 1"),
                           (["--time-limit-s", "0"], "--time-limit-s must be positive"),
                           (["--mode", "graph"], "--mode"),
                           (["--models", ""], "--models is empty"),
                           (["--optimizer", "adam", "--momentum", "0.9"], "--momentum is for sgd"),
                           (["--models", "inception_v3", "--tiny-imagenet"],
                            "at least 299 px, not 64"),
                           (["--batches", "32"], "unrecognized arguments")):
            rc, err = quiet(pmb.parse_args, argv)
            self.assertEqual(rc, 2, argv)
            self.assertIn(what, err, argv)

    def test_the_module_imports_without_torch(self):
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import pytorch_max_batch; "
                "print('torch' in sys.modules)")
        out = subprocess.run([sys.executable, "-c", code, TOOLS], capture_output=True, text=True,
                             check=True).stdout
        self.assertEqual(out.strip(), "False")

    @unittest.skipIf(HAVE_TORCH, "torch is installed")
    def test_without_torch_main_says_so(self):
        rc, err = quiet(pmb.main, ["--memory-limit", "8"])
        self.assertEqual(rc, 2)
        self.assertIn("needs torch", err)


# --------------------------------------------------------------------------------------------
# The whole tool on a fake torch
# --------------------------------------------------------------------------------------------
class OutOfMemoryError(RuntimeError):  # torch.cuda.OutOfMemoryError's name
    pass


class FakeCuda:
    """One device of `total` bytes, `outside` of them the CUDA context's and the libraries'; a
    caching allocator that honours set_per_process_memory_fraction as PyTorch's does (reserved +
    request > fraction * total: out of memory)."""

    def __init__(self, total, outside):
        self.total, self.outside = total, outside
        self.reserved = self.peak = 0
        self.fraction = 1.0
        self.fractions = []

    def is_available(self):
        return True

    def get_device_name(self, device=None):
        return "Fake GPU"

    def mem_get_info(self, device=None):
        return self.total - self.outside - self.reserved, self.total

    def memory_reserved(self, device=None):
        return self.reserved

    def max_memory_reserved(self, device=None):
        return self.peak

    def current_device(self):
        return 0

    def set_per_process_memory_fraction(self, fraction, device=None):
        assert 0.0 <= fraction <= 1.0, fraction
        # As torch 2.11: a device without an index is refused ("Expected a torch.device with a
        # specified index or an integer").
        if device is not None and not isinstance(device, int) and \
                getattr(device, "index", None) is None:
            raise ValueError("Expected a torch.device with a specified index or an integer")
        self.fraction = fraction
        self.fractions.append(fraction)

    def reserve(self, n):
        if self.reserved + n > self.fraction * self.total:
            raise OutOfMemoryError(f"CUDA out of memory. Tried to allocate {n / MIB:.2f} MiB")
        self.reserved += n
        self.peak = max(self.peak, self.reserved)

    def empty_cache(self):
        self.reserved = 0  # the attempt deleted everything before this

    def reset_peak_memory_stats(self, device=None):
        self.peak = self.reserved

    def synchronize(self):
        pass


def fake_torch(cuda):
    return types.SimpleNamespace(
        __version__="2.11.0+fake", version=types.SimpleNamespace(cuda="13.0"), cuda=cuda,
        device=lambda kind, index=None: types.SimpleNamespace(type=kind, index=index),
        backends=types.SimpleNamespace(
            cudnn=types.SimpleNamespace(benchmark=False, allow_tf32=None, version=lambda: 91900),
            cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=None))))


class FakeModel:
    def parameters(self):
        return []


class FakeOptimizer:
    def __init__(self):
        self.hooks = []

    def register_step_post_hook(self, hook):
        self.hooks.append(hook)

    def step(self):
        for h in self.hooks:
            h(self, (), {})


class ToolOnFakeTorchTest(unittest.TestCase):
    TOTAL = 140 * GIB
    OUTSIDE = 700 * MIB  # the CUDA context and the libraries
    BASE = 300 * MIB     # weights, gradients, optimizer state, workspaces
    PER = 6.5 * MIB      # activations per image

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self._tmp.name, "sub", "pmb.json")
        self.cuda = FakeCuda(self.TOTAL, self.OUTSIDE)
        self.failures = {}  # batch -> exception the step raises
        self.writes = []    # attempts in the document at every write

    def tearDown(self):
        self._tmp.cleanup()

    def want(self, limit_gib):
        return int((limit_gib * GIB - self.OUTSIDE - self.BASE) // self.PER)

    def run_main(self, *argv):
        cuda, failures = self.cuda, self.failures

        def make_step(torch, model, opt, x, y, mode, precision, args):
            batch, state = x, {"steps": 0}
            self.assertEqual(mode, "eager")

            def step():
                if batch in failures:
                    raise failures[batch]
                if state["steps"] == 0:
                    cuda.reserve(int(self.BASE + batch * self.PER))
                state["steps"] += 1
                if not (precision == "fp16" and state["steps"] == 1):  # GradScaler skips one
                    opt.step()
            return step, {}

        real_write = ptb.write_json

        def write_json(path, doc):
            self.writes.append(sum(len(s["attempts"]) for s in doc["searches"]))
            real_write(path, doc)

        tv = types.SimpleNamespace(__version__="0.26.0+fake",
                                   models=types.SimpleNamespace(efficientnet_b0=lambda **kw: None))
        with mock.patch.object(ptb, "import_torch", lambda: (fake_torch(cuda), tv)), \
                mock.patch.object(ptb, "build_model", lambda *a: FakeModel()), \
                mock.patch.object(ptb, "build_optimizer", lambda *a: FakeOptimizer()), \
                mock.patch.object(ptb, "random_batch", lambda t, b, s, n, d: (b, None)), \
                mock.patch.object(ptb, "make_step", make_step), \
                mock.patch.object(ptb, "write_json", write_json):
            return quiet(pmb.main, list(argv))

    def test_the_cap_counts_the_context_and_the_answer_is_exact(self):
        self.assertEqual(self.want(8), 1106)
        rc, err = self.run_main("--tiny-imagenet", "--memory-limit", "8,16", "--out", self.out)
        self.assertEqual(rc, 0, err)
        with open(self.out) as f:
            doc = json.load(f)
        self.assertEqual(doc["gpu"], "Fake GPU")
        self.assertEqual(doc["device_total_mib"], 140 * 1024)
        for k in ("torch", "torchvision", "cudnn", "cuda", "date", "settings"):
            self.assertIn(k, doc)
        searches = doc["searches"]
        self.assertEqual([(s["precision"], s["memory_limit_gib"]) for s in searches],
                         [("fp16", 8.0), ("fp16", 16.0), ("fp32", 8.0), ("fp32", 16.0)])
        for s in searches:
            limit = s["memory_limit_gib"]
            self.assertEqual(set(s), {
                "model", "precision", "input_size", "num_classes", "optimizer",
                "memory_limit_gib", "device_used_at_start_mib", "outside_allocator_mib",
                "memory_fraction", "allowed_mib", "largest", "first_failed", "capped", "cut_off",
                "error", "attempts"})
            self.assertEqual((s["model"], s["input_size"], s["num_classes"], s["optimizer"]),
                             ("efficientnet_b0", 64, 200, "adam"))
            self.assertEqual(s["device_used_at_start_mib"], 700)
            self.assertEqual(s["outside_allocator_mib"], 700)
            self.assertEqual(s["allowed_mib"], limit * 1024 - 700)
            self.assertAlmostEqual(s["memory_fraction"], (limit * 1024 - 700) / (140 * 1024))
            self.assertEqual((s["largest"], s["first_failed"]),
                             (self.want(limit), self.want(limit) + 1))
            self.assertEqual((s["capped"], s["cut_off"], s["error"]), (False, False, None))
            batches = [a["batch"] for a in s["attempts"]]
            self.assertEqual(len(batches), len(set(batches)))
            for a in s["attempts"]:
                self.assertEqual(set(a), {"batch", "fit", "peak_reserved_mib", "device_used_mib",
                                          "allowed_mib", "steps", "seconds", "message"})
                self.assertEqual(a["allowed_mib"], limit * 1024 - 700)
                if a["fit"] == "fits":
                    need = 300 + a["batch"] * 6.5
                    self.assertAlmostEqual(a["peak_reserved_mib"], need, places=3)
                    self.assertAlmostEqual(a["device_used_mib"], 700 + need, places=3)
                    self.assertLessEqual(a["device_used_mib"], limit * 1024)
                    # fp16: GradScaler skipped one step, so 3 ran for 2 optimizer steps
                    self.assertEqual(a["steps"], 3 if s["precision"] == "fp16" else 2)
                    self.assertEqual(a["message"], "")
                else:
                    self.assertEqual(a["fit"], "out of memory")
                    self.assertIn("CUDA out of memory", a["message"])
        # Rewritten after every attempt (and when a search starts and ends).
        total = sum(len(s["attempts"]) for s in searches)
        self.assertEqual(sorted(set(self.writes)), list(range(total + 1)))
        self.assertIn("pytorch max batch efficientnet_b0/fp16 limit 8 GiB: batch 64 fits (", err)
        self.assertIn(f"limit 16 GiB: batch {self.want(16) + 1} out of memory (", err)
        self.assertEqual(self.cuda.fractions[-1], 1.0)  # the cap lifted at the end

    def test_whole_device_and_a_limit_above_it(self):
        rc, err = self.run_main("--precisions", "fp32", "--memory-limit", "200", "--cap", "4096")
        self.assertEqual(rc, 0, err)
        rc, err = self.run_main("--precisions", "fp32", "--cap", "4096", "--out", self.out)
        self.assertEqual(rc, 0, err)
        with open(self.out) as f:
            s = json.load(f)["searches"][0]
        self.assertEqual((s["memory_limit_gib"], s["memory_fraction"]), (None, 1.0))
        self.assertEqual((s["largest"], s["first_failed"], s["capped"]), (4096, 0, True))
        self.assertIn("limit whole device: batch 4096 fits", err)

    def test_out_of_memory_kinds_and_an_error_that_stops_one_search(self):
        self.failures = {128: RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
                                           "`cublasCreate(handle)`"),
                         64: ValueError("Expected more than 1 value per channel when training")}
        rc, err = self.run_main("--precisions", "fp32", "--memory-limit", "8", "--start", "32",
                                "--out", self.out)
        self.assertEqual(rc, 0, err)
        with open(self.out) as f:
            s = json.load(f)["searches"][0]
        self.assertEqual(s["error"], "batch 64: Expected more than 1 value per channel when "
                                     "training")
        self.assertEqual([(a["batch"], a["fit"]) for a in s["attempts"]],
                         [(32, "fits"), (64, "error")])
        self.assertIsNone(s["attempts"][1]["peak_reserved_mib"])
        self.assertIn("batch 64 error (", err)
        self.assertIn(": Expected more than 1 value", err)

        self.failures = {128: RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
                                           "`cublasCreate(handle)`")}
        self.writes = []
        rc, err = self.run_main("--precisions", "fp32", "--memory-limit", "8", "--out", self.out)
        with open(self.out) as f:
            s = json.load(f)["searches"][0]
        self.assertEqual(s["attempts"][1]["batch"], 128)
        self.assertEqual(s["attempts"][1]["fit"], "out of memory")  # a cuBLAS allocation failure
        self.assertIn("CUBLAS_STATUS_ALLOC_FAILED", s["attempts"][1]["message"])
        self.assertEqual((s["largest"], s["first_failed"]), (127, 128))

    def test_the_time_limit_cuts_a_search_off(self):
        clock = iter(range(0, 10000, 5))  # every look at the clock: 5 s later
        with mock.patch.object(pmb.time, "monotonic", lambda: next(clock)):
            rc, err = self.run_main("--precisions", "fp32", "--memory-limit", "8,16",
                                    "--time-limit-s", "12", "--out", self.out)
        self.assertEqual(rc, 0, err)
        with open(self.out) as f:
            searches = json.load(f)["searches"]
        # Each search has a limit of its own: started at 0 s, it looks before each batch (at 5,
        # 10 and 15 s) and stops at 15 s, after 2 attempts.
        self.assertEqual(len(searches), 2)
        for s in searches:
            self.assertTrue(s["cut_off"])
            self.assertEqual([a["batch"] for a in s["attempts"]], [64, 128])
            self.assertEqual((s["largest"], s["first_failed"], s["capped"]), (128, 0, False))

    def test_a_limit_below_the_devices_use_is_exit_2(self):
        self.cuda = FakeCuda(self.TOTAL, 10 * GIB)
        rc, err = self.run_main("--memory-limit", "16,8", "--out", self.out)
        self.assertEqual(rc, 2)
        self.assertIn("--memory-limit of 8 GiB is not above what the device already uses", err)
        self.assertIn("10240 MiB", err)
        self.assertNotIn("pytorch max batch", err)  # checked before any search

    def test_allocator_budget(self):
        torch = fake_torch(self.cuda)
        self.cuda.reserved = 20 * MIB  # the allocator's (a cuBLAS workspace kept, say)
        b = pmb.allocator_budget(torch, "cuda", 8)
        self.assertEqual((b["used"], b["outside"], b["allowed"]),
                         (720 * MIB, 700 * MIB, 8 * GIB - 700 * MIB))
        self.assertAlmostEqual(b["fraction"], (8 * GIB - 700 * MIB) / self.TOTAL)
        self.assertEqual(pmb.allocator_budget(torch, "cuda", None)["fraction"], 1.0)
        self.assertEqual(pmb.allocator_budget(torch, "cuda", 140)["fraction"], 1.0)
        b = pmb.allocator_budget(torch, "cuda", 0.5)  # below the context: nothing allowed
        self.assertLess(b["allowed"], 0)
        self.assertEqual(b["fraction"], 0.0)


if __name__ == "__main__":
    unittest.main()
