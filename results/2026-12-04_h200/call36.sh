#!/usr/bin/env bash
# Device call 36 (session of 2026-12-04, 18:55 UTC). StyleGAN3-T's first GPU run (issue 6):
# A: the kernels (filtered_lrelu's separable passes, the Fourier features) and the compiled
#    generator against the host references.
# T: cnnbench_infer against tools/stylegan3_reference.py (torch 2.11, fp32, TF32 off) at 256
#    (batch 2) and 1024 (batch 1), fp32 and fp16.
# Z: the zoo test for stylegan3_t (1024, batch 1 and 2, four precisions).
# B: per-layer breakdown of stylegan3_t and stylegan2_f at 1024, batch 8, fp16 (autotune).
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/t $O/z $O/b
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
PYTHON=python3; [ -x /opt/torch/.venv/bin/python3 ] && PYTHON=/opt/torch/.venv/bin/python3
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
summ() { grep -E '^\[  (PASSED|FAILED) |FAILED  \]|^\[==========\]' "$1" | tail -14 | tr '\n' ' '; }
pack() { (cd $O && tar czf $1.tgz --remove-files $1); }
timeout 120 $B/tests/test_gpu --gtest_filter='GpuKernels.FilteredLrelu*:GpuKernels.FourierFeatures*:GpuNetwork.Stylegan3*' >$O/a/tests.log 2>&1
echo "A rc=$? $(date +%T) $(summ $O/a/tests.log)"; grep -E "stylegan3|Failure|rel|Expected|Which" $O/a/tests.log | head -20
pack a
sg3() { # res batch precisions
  local d=$O/t/r$1; mkdir -p $d
  timeout 90 $PYTHON tools/stylegan3_reference.py write-case --dir $d/case --resolution $1 --batch $2 --seed 1 --skip-crosscheck >$d/write.log 2>&1 || { echo "T write $1 failed"; tail -5 $d/write.log; return; }
  for p in $3; do
    timeout 90 $B/cnnbench_infer --network=stylegan3_t --input_size=$1 --batch=$2 --precision=$p --weights=$d/case/weights.safetensors --input=$d/case/input.safetensors --output=$d/ours_$p.safetensors >$d/infer_$p.log 2>&1 || { echo "T infer $1 $p failed"; tail -5 $d/infer_$p.log; continue; }
    tol=1e-3; [ $p = fp16 ] && tol=2e-2
    echo "== T $1 $p"; $PYTHON tools/stylegan3_reference.py compare --reference $d/case/reference.safetensors --ours $d/ours_$p.safetensors --tolerance $tol 2>&1 | tail -4
  done
  rm -f $d/case/*.safetensors $d/*.safetensors
}
sg3 256 2 "fp32 fp16"
sg3 1024 1 "fp32 fp16"
echo "T $(date +%T)"; pack t
timeout 120 $B/tests/test_gpu --gtest_filter='*GpuZoo*stylegan3*' >$O/z/zoo.log 2>&1
echo "Z rc=$? $(date +%T) $(summ $O/z/zoo.log)"; grep -E "stylegan3_t|Failure" $O/z/zoo.log | head -10
pack z
for net in stylegan3_t stylegan2_f; do
  timeout 100 $B/cnnbench_infer --network=$net --batch=8 --precision=fp16 --engine=autotune --output=/tmp/o_$net.safetensors --breakdown=$O/b/$net.json >$O/b/$net.log 2>&1
  echo "B $net rc=$? $(date +%T)"; grep -iE "sum of layers|whole graph|total" $O/b/$net.log | head -4
done
pack b
