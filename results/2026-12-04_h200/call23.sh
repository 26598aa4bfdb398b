#!/usr/bin/env bash
# Device call 23 (about 520 s): what issue 4 still lacks after call 22.
# A: EfficientNet-B0 fp16 training at batch 256 (cut off in call 22's sweep), then PyTorch's
#    eager and graph step at the same batch, and the comparison.
# B: the article's tiny-imagenet case (configs/train_tiny_imagenet.yaml: EfficientNet-B0 at 64 px,
#    200 classes, Adam lr 0.001, batch 64 and 256) with its epoch time.
# C: MXNet train_imagenet.py's seed cases (configs/mxnet_train_imagenet.yaml), one repetition,
#    for as long as the call allows (the JSON lines keep what finished).
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/b $O/c
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
timeout 150 $B/cnnbench --config=configs/train.yaml --benchmark_filter='efficientnet_b0/fp16/train/batch:256' \
  --benchmark_repetitions=3 --benchmark_out=$O/a/train.json >$O/a/train.log 2>&1
echo "A cnnbench rc=$? $(date +%T)"
PYTHONUNBUFFERED=1 timeout 90 python3 tools/pytorch_train_baseline.py --models efficientnet_b0 \
  --batches 256 --modes eager,graph --precision fp16 --out $O/a/pytorch_train.json \
  >$O/a/pytorch_train.log 2>&1
echo "A peer rc=$? $(date +%T)"
python3 tools/compare_train.py --cnnbench $O/a/train.json --pytorch $O/a/pytorch_train.json \
  --out-md $O/a/compare_train_fp16.md --check | head -12
(cd $O && tar czf a.tgz --remove-files a)
timeout 100 $B/cnnbench --config=configs/train_tiny_imagenet.yaml --benchmark_out=$O/b/tiny.json \
  >$O/b/tiny.log 2>&1
echo "B rc=$? $(date +%T)"
grep -E "ERROR OCCURRED|_median" $O/b/tiny.log | cut -c1-260 | sort -u | head -8
(cd $O && tar czf b.tgz --remove-files b)
L=$((515 - SECONDS)); ((L < 30)) && L=30
timeout $L $B/cnnbench --config=configs/mxnet_train_imagenet.yaml --benchmark_repetitions=1 \
  --benchmark_out=$O/c/mxnet_train.json >$O/c/mxnet_train.log 2>&1
echo "C rc=$? $(date +%T) rows=$(grep -c manual_time $O/c/mxnet_train.log)"
grep -E "ERROR OCCURRED" $O/c/mxnet_train.log | cut -c1-200 | head -4
(cd $O && tar czf c.tgz --remove-files c)
