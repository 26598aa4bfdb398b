#!/usr/bin/env bash
# Device call 46 (written 2026-12-05, not yet run). Issue 9's FP8 lever, one layer at a time
# (cnnbench_fp8_probe): which FP8 graphs cuDNN builds on the H200, how fast against fp16, and what
# accuracy they cost, before any network runs in FP8. Predictions (NOTES.md, "FP8, the probe"):
# the emulation's accuracy (cnnbench_fp8_probe --emulate_only: 3.5e-2 to 3.8e-2 relative L2 per
# layer into fp16, 4.3e-2 to 4.7e-2 into E4M3), and 1.3x to 1.8x over fp16 where a layer builds.
# Carry: build/release/cnnbench_fp8_probe, build/release/tests/test_gpu, .carry
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/r
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
timeout 120 $B/tests/test_gpu --gtest_filter='GpuFp8.*' >$O/r/gpu_fp8.txt 2>&1
echo "GpuFp8 rc=$? $(date +%T)"; grep -E "GpuFp8:|OK|FAILED" $O/r/gpu_fp8.txt | head -12
for b in 256 32 1; do
  timeout 240 $B/cnnbench_fp8_probe --batch=$b --max_engines=3 --json=$O/r/fp8_probe_$b.json \
    >$O/r/fp8_probe_$b.txt 2>$O/r/fp8_probe_$b.err
  echo "probe $b rc=$? $(date +%T)"; cat $O/r/fp8_probe_$b.txt; head -c 1500 $O/r/fp8_probe_$b.err
done
(cd $O && tar czf r.tgz --remove-files r)
