#!/usr/bin/env bash
# Device call 37 (session of 2026-12-04, 19:10 UTC). Issue 6:
# S: StyleGAN3-T generation speed, cnnbench beside tools/stylegan3_reference.py bench (torch 2.11,
#    channels_last, cudnn.benchmark, eager and CUDA graph) at 1024 (batch 1, 8) and 256 (1, 8, 32).
# V: YOLOR-CSP-X's video task at 1280 (1,000 frames to final boxes) at batch 8 and 32.
# B: stylegan3_t's per-layer breakdown at 1024, batch 4, fp16 (heuristic engines: a quick build).
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/s $O/v $O/b
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
PYTHON=python3; [ -x /opt/torch/.venv/bin/python3 ] && PYTHON=/opt/torch/.venv/bin/python3
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
timeout 120 $B/cnnbench --config=configs/stylegan3.yaml \
  --benchmark_filter='stylegan3_t/fp16/graph/(batch:(1|8)(/|$)|batch:(1|8|32)/size:256)' \
  --benchmark_out=$O/s/cnnbench.json >$O/s/cnnbench.log 2>&1
echo "S cnnbench rc=$? $(date +%T)"; grep -E "_median|ERROR|error" $O/s/cnnbench.log | cut -c1-150 | head -8
timeout 60 $PYTHON tools/stylegan3_reference.py bench --resolution 1024 --batches 1,8 --precision fp16 \
  --modes eager,graph --out $O/s/pytorch_1024.json >$O/s/pytorch_1024.log 2>&1
echo "S pytorch 1024 rc=$? $(date +%T)"; grep -E "img/s" $O/s/pytorch_1024.log
timeout 60 $PYTHON tools/stylegan3_reference.py bench --resolution 256 --batches 1,8,32 --precision fp16 \
  --modes eager,graph --out $O/s/pytorch_256.json >$O/s/pytorch_256.log 2>&1
echo "S pytorch 256 rc=$? $(date +%T)"; grep -E "img/s" $O/s/pytorch_256.log
(cd $O && tar czf s.tgz --remove-files s)
timeout 100 $B/cnnbench --config=configs/yolor.yaml --benchmark_filter='fp16/video/batch:(8|32)/size:1280' \
  --benchmark_repetitions=2 --benchmark_out=$O/v/video.json >$O/v/video.log 2>&1
echo "V rc=$? $(date +%T)"; grep -E "_median|ERROR|error" $O/v/video.log | cut -c1-200 | head -6
(cd $O && tar czf v.tgz --remove-files v)
timeout $((585 - SECONDS)) $B/cnnbench_infer --network=stylegan3_t --batch=4 --precision=fp16 \
  --output=/tmp/o.safetensors --breakdown=$O/b/stylegan3_t.json >$O/b/stylegan3_t.log 2>&1
echo "B rc=$? $(date +%T)"; grep -E "sum of layers" $O/b/stylegan3_t.log
(cd $O && tar czf b.tgz --remove-files b)
