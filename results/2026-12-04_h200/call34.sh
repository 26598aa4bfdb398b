#!/usr/bin/env bash
# Device call 34 (session of 2026-12-04, 18:15 UTC). Issue 6's correctness, none of it run before:
# A: StyleGAN2's kernels and ops, the frames' input kernel, YOLOR's decode + NMS after the network,
#    StyleGAN2's compiled generator against the host reference.
# Y: tools/yolor_check.sh at 640, batch 2, fp32 and fp16, against torch 2.11's heads.
# G: StyleGAN2 paper256 at 256 (batch 2) and config-f at 1024 (batch 1) against torch's image.
# Z: the zoo test (finite, deterministic, graph equals eager) for yolor_csp_x and stylegan2_*.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/y $O/g $O/z
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
PYTHON=python3; [ -x /opt/torch/.venv/bin/python3 ] && PYTHON=/opt/torch/.venv/bin/python3; export PYTHON
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
summ() { grep -E '^\[  (PASSED|FAILED) |FAILED  \]|^\[==========\]' "$1" | tail -14 | tr '\n' ' '; }
pack() { (cd $O && tar czf $1.tgz --remove-files $1); }
timeout 150 $B/tests/test_gpu --gtest_filter='GpuKernels.FramesToInput*:GpuKernels.Upfirdn2d*:GpuKernels.StyleganBiasAct*:GpuOps.StyleganModulatedConv*:GpuNetwork.YolorDetectPost*:GpuNetwork.Stylegan2Generator*' >$O/a/tests.log 2>&1
echo "A rc=$? $(date +%T) $(summ $O/a/tests.log)"
pack a
timeout 120 env PRECISIONS="fp32 fp16" bash tools/yolor_check.sh $O/y/yc >$O/y/check.log 2>&1
echo "Y rc=$? $(date +%T)"; tail -12 $O/y/check.log
rm -f $O/y/yc/case/*.safetensors; pack y
sg() { # config res batch precisions
  local d=$O/g/$1_$2; mkdir -p $d
  timeout 60 $PYTHON tools/stylegan_reference.py write-case --dir $d/case --config $1 --resolution $2 --batch $3 --seed 1 >$d/write.log 2>&1 || { echo "G write $1 $2 failed"; tail -5 $d/write.log; return; }
  local net=stylegan2_$1; [ $1 = f ] && net=stylegan2_f
  for p in $4; do
    timeout 60 $B/cnnbench_infer --network=$net --input_size=$2 --batch=$3 --precision=$p --weights=$d/case/weights.safetensors --input=$d/case/input.safetensors --output=$d/ours_$p.safetensors >$d/infer_$p.log 2>&1 || { echo "G infer $1 $2 $p failed"; tail -5 $d/infer_$p.log; continue; }
    tol=1e-3; [ $p = fp16 ] && tol=2e-2
    echo "== G $1 $2 $p"; $PYTHON tools/stylegan_reference.py compare --reference $d/case/reference.safetensors --ours $d/ours_$p.safetensors --tolerance $tol 2>&1 | tail -4
  done
  rm -f $d/case/*.safetensors $d/*.safetensors
}
sg paper256 256 2 "fp32 fp16"
sg f 1024 1 "fp32 fp16"
echo "G $(date +%T)"; pack g
timeout 150 $B/tests/test_gpu --gtest_filter='*GpuZoo*yolor*:*GpuZoo*stylegan*' >$O/z/zoo.log 2>&1
echo "Z rc=$? $(date +%T) $(summ $O/z/zoo.log)"
pack z
