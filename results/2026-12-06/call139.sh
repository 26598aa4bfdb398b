#!/usr/bin/env bash
# Device call 139 (written 2026-12-06 12:45 UTC, not yet run; about 120 s): issue 9's INT8
# question before any network path (NOTES.md, "INT8 as a network precision"): does cuDNN 9.19 on
# sm_90 build a conv whose epilogue stores INT8 at the next layer's scale
# (int8_to_int8_per_channel: int8 x and w, int32 sums, descale per channel, bias, ReLU, * scale_y,
# y INT8 rounded to nearest even and saturated), and how fast against fp16 and against the int8 ->
# fp16 form (call 103: 1.19x to 2.04x from layer2 on, 0.82x to 0.92x in layer1). Carry .carry.
# Predicted: it builds through the same runtime-fusion engine as int8 -> fp16 (eng4 +rtc), within
# 10% of its time (half the output bytes), and its codes agree with the emulation to one step.
# Then the GPU test that covers every variant (GpuFp8.*) and the probe at batch 32.
set -u
O=${OUT:-/tmp/out}
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
mkdir -p $O/q
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 60 $B/tests/test_gpu --gtest_filter='GpuFp8.*' >$O/q/test.log 2>&1
echo "GpuFp8 rc=$?"; grep -E "GpuFp8:|OK \]|FAILED|Failure" $O/q/test.log | head -12
for b in 256 32; do
  timeout 150 $B/cnnbench_fp8_probe --batch=$b --max_engines=3 \
    --variants=fp16,int8_to_fp16_per_channel,int8_to_int8_per_channel \
    --json=$O/q/int8_probe_$b.json >$O/q/int8_probe_$b.txt 2>$O/q/int8_probe_$b.err
  echo "probe batch $b rc=$? ${SECONDS}s"; cut -c1-170 $O/q/int8_probe_$b.txt
done
(cd $O && tar czf call139.tgz --remove-files q)
