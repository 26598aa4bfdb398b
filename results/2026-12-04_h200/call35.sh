#!/usr/bin/env bash
# Device call 35 (session of 2026-12-04, 18:25 UTC). Issue 6's speed, beside PyTorch 2.11 in the
# same call (eager and CUDA graph, channels_last, cudnn.benchmark):
# Y: YOLOR-CSP-X at 1280, fp16, batch 1, 8, 32: cnnbench graph (network alone) and detect (frames
#    to boxes), tools/yolor_reference.py bench.
# S: StyleGAN2 config-f at 1024, fp16, batch 1, 8, 32: cnnbench graph, tools/stylegan_reference.py
#    bench.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/y $O/s
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
PYTHON=python3; [ -x /opt/torch/.venv/bin/python3 ] && PYTHON=/opt/torch/.venv/bin/python3
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
timeout 130 $PYTHON tools/yolor_reference.py bench --size 1280 --batches 1,8,32 --precision fp16 \
  --modes eager,graph --out $O/y/pytorch.json >$O/y/pytorch.log 2>&1
echo "Y pytorch rc=$? $(date +%T)"; grep -E "img/s" $O/y/pytorch.log
timeout 190 $B/cnnbench --config=configs/yolor.yaml \
  --benchmark_filter='fp16/(graph|detect)/batch:(1|8|32)/size:1280' \
  --benchmark_out=$O/y/cnnbench.json >$O/y/cnnbench.log 2>&1
echo "Y cnnbench rc=$? $(date +%T)"; grep -E "_median|ERROR|error" $O/y/cnnbench.log | cut -c1-200 | head -12
timeout 100 $PYTHON tools/stylegan_reference.py bench --config f --resolution 1024 --batches 1,8,32 \
  --precision fp16 --modes eager,graph --out $O/s/pytorch.json >$O/s/pytorch.log 2>&1
echo "S pytorch rc=$? $(date +%T)"; grep -E "img/s" $O/s/pytorch.log
timeout $((590 - SECONDS)) $B/cnnbench --config=configs/stylegan2.yaml \
  --benchmark_filter='stylegan2_f/fp16/graph/batch:(1|8|32)(/|$)' \
  --benchmark_out=$O/s/cnnbench.json >$O/s/cnnbench.log 2>&1
echo "S cnnbench rc=$? $(date +%T)"; grep -E "_median|ERROR|error" $O/s/cnnbench.log | cut -c1-200 | head -12
(cd $O && tar czf y.tgz --remove-files y && tar czf s.tgz --remove-files s)
