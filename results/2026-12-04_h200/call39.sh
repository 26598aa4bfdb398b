#!/usr/bin/env bash
# Device call 39 (written 2026-12-04 evening, not yet run). Issue 6's speed after the fir1d
# rewrite and StyleGAN2's separable up-sampling, beside PyTorch in the same call:
# S3: StyleGAN3-T at 1024 (batch 1, 8) and 256 (8, 32); G2: StyleGAN2 config-f at 1024 (1, 8,
# 32); XL: StyleGAN-XL at 256 (1, 8) and 1024 (1), ours only (no PyTorch peer here).
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/s
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
PYTHON=python3; [ -x /opt/torch/.venv/bin/python3 ] && PYTHON=/opt/torch/.venv/bin/python3
B=build/release
date +%T
timeout 150 $B/cnnbench --config=configs/stylegan3.yaml \
  --benchmark_filter='stylegan3_t/fp16/graph/(batch:(1|8)(/|$)|batch:(8|32)/size:256)' \
  --benchmark_out=$O/s/sg3.json >$O/s/sg3.log 2>&1
echo "S3 rc=$? $(date +%T)"; grep -E "_median|ERROR" $O/s/sg3.log | cut -c1-150
timeout 60 $PYTHON tools/stylegan3_reference.py bench --resolution 1024 --batches 1,8 --precision fp16 \
  --modes eager,graph --out $O/s/pt_sg3_1024.json >$O/s/pt_sg3_1024.log 2>&1
timeout 60 $PYTHON tools/stylegan3_reference.py bench --resolution 256 --batches 8,32 --precision fp16 \
  --modes eager,graph --out $O/s/pt_sg3_256.json >$O/s/pt_sg3_256.log 2>&1
timeout 40 $PYTHON tools/stylegan3_reference.py bench --resolution 256 --batches 8,32 --precision fp16 \
  --modes graph --modconv fused --out $O/s/pt_sg3_256_fused.json >$O/s/pt_sg3_256_fused.log 2>&1
echo "S3 torch $(date +%T)"
timeout 100 $B/cnnbench --config=configs/stylegan2.yaml \
  --benchmark_filter='stylegan2_f/fp16/graph/batch:(1|8|32)(/|$)' \
  --benchmark_out=$O/s/sg2.json >$O/s/sg2.log 2>&1
echo "G2 rc=$? $(date +%T)"; grep -E "_median|ERROR" $O/s/sg2.log | cut -c1-150
timeout 60 $PYTHON tools/stylegan_reference.py bench --config f --resolution 1024 --batches 1,8,32 \
  --precision fp16 --modes eager,graph --out $O/s/pt_sg2.json >$O/s/pt_sg2.log 2>&1
echo "G2 torch $(date +%T)"
timeout $((590 - SECONDS)) $B/cnnbench --config=configs/stylegan_xl.yaml \
  --benchmark_filter='stylegan_xl/fp16/graph/(batch:1(/|$)|batch:(1|8)/size:256)' \
  --benchmark_out=$O/s/xl.json >$O/s/xl.log 2>&1
echo "XL rc=$? $(date +%T)"; grep -E "_median|ERROR" $O/s/xl.log | cut -c1-150
(cd $O && tar czf s.tgz --remove-files s)
