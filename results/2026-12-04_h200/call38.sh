#!/usr/bin/env bash
# Device call 38 (session of 2026-12-04, 19:25 UTC), the session's last. Issue 6, StyleGAN3-T
# with the rewritten fir1d kernel (32-bit indexing, a row's outputs across the threads):
# A: the kernel and generator tests again; cnnbench_infer against torch at 256 (fp32, fp16).
# S: generation speed at 1024 (batch 1, 8) and 256 (batch 8, 32) beside call 37's PyTorch rows;
#    the per-layer breakdown at 1024, batch 4.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/s
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
PYTHON=python3; [ -x /opt/torch/.venv/bin/python3 ] && PYTHON=/opt/torch/.venv/bin/python3
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
summ() { grep -E '^\[  (PASSED|FAILED) |FAILED  \]|^\[==========\]' "$1" | tail -14 | tr '\n' ' '; }
timeout 60 $B/tests/test_gpu --gtest_filter='GpuKernels.FilteredLrelu*:GpuNetwork.Stylegan3*' >$O/a/tests.log 2>&1
echo "A rc=$? $(date +%T) $(summ $O/a/tests.log)"; grep -E "stylegan3-t" $O/a/tests.log
d=$O/a/r256; mkdir -p $d
timeout 40 $PYTHON tools/stylegan3_reference.py write-case --dir $d/case --resolution 256 --batch 2 --seed 2 --skip-crosscheck >$d/write.log 2>&1
for p in fp32 fp16; do
  timeout 40 $B/cnnbench_infer --network=stylegan3_t --input_size=256 --batch=2 --precision=$p --weights=$d/case/weights.safetensors --input=$d/case/input.safetensors --output=$d/ours_$p.safetensors >$d/infer_$p.log 2>&1
  tol=1e-3; [ $p = fp16 ] && tol=2e-2
  echo "== $p"; $PYTHON tools/stylegan3_reference.py compare --reference $d/case/reference.safetensors --ours $d/ours_$p.safetensors --tolerance $tol 2>&1 | tail -2
done
rm -f $d/case/*.safetensors $d/*.safetensors
(cd $O && tar czf a.tgz --remove-files a)
timeout 110 $B/cnnbench --config=configs/stylegan3.yaml \
  --benchmark_filter='stylegan3_t/fp16/graph/(batch:(1|8)(/|$)|batch:(8|32)/size:256)' \
  --benchmark_out=$O/s/cnnbench.json >$O/s/cnnbench.log 2>&1
echo "S rc=$? $(date +%T)"; grep -E "_median|ERROR|error" $O/s/cnnbench.log | cut -c1-150 | head -8
timeout $((255 - SECONDS)) $B/cnnbench_infer --network=stylegan3_t --batch=4 --precision=fp16 \
  --output=/tmp/o.safetensors --breakdown=$O/s/breakdown.json >$O/s/breakdown.log 2>&1
echo "B rc=$? $(date +%T)"; grep -E "sum of layers" $O/s/breakdown.log
(cd $O && tar czf s.tgz --remove-files s)
