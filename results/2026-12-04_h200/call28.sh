#!/usr/bin/env bash
# Device call 28, the session's last (about 250 s of the 377 s left).
# A: GpuKernels.SyntheticInput... (the device-written input against the host's, bit for bit) and
#    GpuMemory: call 27 ran out of its 100 s in GpuNetwork before reaching them.
# P: PyTorch's own largest batch for the article's case (EfficientNet-B0 training at 64 px, 200
#    classes, Adam), fp16 (AMP) and fp32, under 8 GiB, cudnn.benchmark off, 45 s a search.
# T: PyTorch's device use (context included) in issue 4's narrowest memory row, ResNet-50 fp16
#    training at batch 32, eager and graph, beside cnnbench's device peak (2,229 MiB, call 22).
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/p
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
timeout 45 $B/tests/test_gpu --gtest_filter='GpuKernels.Synthetic*:GpuMemory.*' >$O/a/gpu.log 2>&1
echo "A rc=$? $(date +%T) $(grep -E '^\[  (PASSED|FAILED) |FAILED  \]' $O/a/gpu.log | head -6 | tr '\n' ' ')"
PYTHONUNBUFFERED=1 timeout 120 python3 tools/pytorch_max_batch.py --models efficientnet_b0 --tiny-imagenet \
  --precisions fp16,fp32 --memory-limit 8 --start 512 --time-limit-s 45 --out $O/p/pytorch_max_batch.json \
  >$O/p/pytorch_max_batch.log 2>&1
echo "P rc=$? $(date +%T)"
grep -E "pytorch max batch" $O/p/pytorch_max_batch.log | cut -c1-150 | tail -24
PYTHONUNBUFFERED=1 timeout 60 python3 tools/pytorch_train_baseline.py --models resnet50 --batches 32 \
  --modes eager,graph --precision fp16 --out $O/p/pytorch_train_r50_b32.json >$O/p/pytorch_train_r50_b32.log 2>&1
echo "T rc=$? $(date +%T)"
python3 -c "
import json; d=json.load(open('$O/p/pytorch_train_r50_b32.json'))
for r in d['rows']: print(r['mode'], r['batch'], round(r.get('img_s',0)), 'reserved', round(r.get('peak_reserved_mib',0)), 'device', round(r.get('device_used_mib') or 0))
"
(cd $O && tar czf a.tgz --remove-files a && tar czf p.tgz --remove-files p)
