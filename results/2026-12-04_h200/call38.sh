#!/usr/bin/env bash
# Device call 38 (written 2026-12-04 evening, not yet run: the session's device time was spent).
# Correctness of what was written after call 37, none of it run on a GPU:
# A: the rewritten fir1d kernel (32-bit indexing; StyleGAN3's filtered_lrelu passes and now
#    StyleGAN2's separable FIR up-sampling), AroundConvOp (the three StyleGAN ops around a conv),
#    the generator tests of StyleGAN2, StyleGAN3-T and StyleGAN-XL (ClassEmbed's kernel).
# Z: the zoo test of every StyleGAN (stylegan3_t with the new prior, stylegan_xl at 1024).
# T: cnnbench_infer against torch: StyleGAN3-T at 256, StyleGAN2 config-f at 1024, StyleGAN-XL
#    (the registry's configuration) at 64 (fp32, fp16).
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/z $O/t
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
PYTHON=python3; [ -x /opt/torch/.venv/bin/python3 ] && PYTHON=/opt/torch/.venv/bin/python3
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
summ() { grep -E '^\[  (PASSED|FAILED) |FAILED  \]|^\[==========\]' "$1" | tail -14 | tr '\n' ' '; }
pack() { (cd $O && tar czf $1.tgz --remove-files $1); }
timeout 150 $B/tests/test_gpu --gtest_filter='GpuKernels.FilteredLrelu*:GpuKernels.FourierFeatures*:GpuKernels.Upfirdn2d*:GpuOps.StyleganModulatedConv*:GpuNetwork.Stylegan*' >$O/a/tests.log 2>&1
echo "A rc=$? $(date +%T) $(summ $O/a/tests.log)"; grep -E "stylegan|Failure" $O/a/tests.log | head -20
pack a
timeout 200 $B/tests/test_gpu --gtest_filter='*GpuZoo*stylegan*' >$O/z/zoo.log 2>&1
echo "Z rc=$? $(date +%T) $(summ $O/z/zoo.log)"; grep -E "batch 2|Failure" $O/z/zoo.log | head -20
pack z
check() { # tool net res batch
  local d=$O/t/$2_$3; mkdir -p $d
  local extra=""; [ $1 = stylegan_reference ] && extra="--config f"
  timeout 60 $PYTHON tools/$1.py write-case --dir $d/case $extra --resolution $3 --batch $4 --seed 2 --skip-crosscheck >$d/write.log 2>&1 || { echo "T write $2 failed"; tail -3 $d/write.log; return; }
  for p in fp32 fp16; do
    timeout 60 $B/cnnbench_infer --network=$2 --input_size=$3 --batch=$4 --precision=$p --weights=$d/case/weights.safetensors --input=$d/case/input.safetensors --output=$d/ours_$p.safetensors >$d/infer_$p.log 2>&1 || { echo "T infer $2 $p failed"; tail -3 $d/infer_$p.log; continue; }
    tol=1e-3; [ $p = fp16 ] && tol=2e-2
    echo "== T $2 $3 $p"; $PYTHON tools/$1.py compare --reference $d/case/reference.safetensors --ours $d/ours_$p.safetensors --tolerance $tol 2>&1 | tail -2
  done
  rm -f $d/case/*.safetensors $d/*.safetensors
}
check stylegan3_reference stylegan3_t 256 2
check stylegan_reference stylegan2_f 1024 1
check stylegan_xl_reference stylegan_xl 64 2
pack t
