#!/usr/bin/env bash
# Device call 26 (about 540 s).
# P: PyTorch's own largest batch for the article's case (EfficientNet-B0 training at 64 px, 200
#    classes, Adam), fp16 (AMP) and fp32, under 8 GiB, 30 s a search (tools/pytorch_max_batch.py).
# M: issue 5's card table, first part: configs/max_batch.yaml (ResNet-50 training and inference,
#    EfficientNet-B0 inference, EfficientNet-B0 tiny-imagenet training; fp16; cap 8192) under 8,
#    16 and 24 GiB, each size stopped after 135 s at most.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/p $O/m
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
PYTHONUNBUFFERED=1 timeout 90 python3 tools/pytorch_max_batch.py --models efficientnet_b0 --tiny-imagenet \
  --precisions fp16,fp32 --memory-limit 8 --start 512 --time-limit-s 30 --out $O/p/pytorch_max_batch.json \
  >$O/p/pytorch_max_batch.log 2>&1
echo "P rc=$? $(date +%T)"
grep -E "pytorch max batch" $O/p/pytorch_max_batch.log | cut -c1-150 | tail -24
(cd $O && tar czf p.tgz --remove-files p)
SIZES="8 16 24" LIMIT_S=135 bash tools/max_batch_sweep.sh configs/max_batch.yaml $O/m 2>&1 | tail -6
date +%T
cat $O/m/max_batch.md
rm -f $O/m/*.layers.json
(cd $O && tar czf m.tgz --remove-files m)
