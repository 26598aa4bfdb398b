#!/usr/bin/env bash
# Device call 24, the session's last (about 540 s of the 903 s left).
# A: the AlexNet-LRN rows of MXNet's training seed (configs/mxnet_train_imagenet.yaml) at lr 5e-4,
#    one repetition as call 23's other rows.
# B: issue 5's check against the article: the largest batch of EfficientNet-B0 training at 64 px,
#    200 classes, fp16, Adam (configs/max_batch_article.yaml) under 8, 16, 24 and 48 GiB caps,
#    searched up to 32768, then the table beside the article's figures.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/a $O/m
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,memory.used --format=csv,noheader
date +%T
timeout 70 $B/cnnbench --config=configs/mxnet_train_imagenet.yaml --benchmark_filter='alexnet_lrn/' \
  --benchmark_repetitions=1 --benchmark_out=$O/a/mxnet_train_alexnet.json >$O/a/mxnet_train_alexnet.log 2>&1
echo "A rc=$? $(date +%T) rows=$(grep -c manual_time $O/a/mxnet_train_alexnet.log)"
grep -E "ERROR OCCURRED" $O/a/mxnet_train_alexnet.log | cut -c1-200 | head -4
(cd $O && tar czf a.tgz --remove-files a)
for st in "8 95" "16 110" "24 120" "48 150"; do
  set -- $st
  L=$((560 - SECONDS)); ((L > $2)) && L=$2; ((L < 10)) && break
  timeout $L $B/cnnbench --config=configs/max_batch_article.yaml --max_batch --memory_limit=$1 \
    --max_batch_cap=32768 --benchmark_filter=/max_batch --benchmark_out=$O/m/max_batch_$1.json \
    >$O/m/max_batch_$1.log 2>&1
  echo "B $1 GiB rc=$? $(date +%T): $(grep -E 'fits|out of memory|error' $O/m/max_batch_$1.log | tail -2 | cut -c1-160 | tr '\n' '|')"
done
python3 tools/max_batch_table.py $O/m/max_batch_*.json --article --out-md $O/m/max_batch.md 2>&1 | tail -3
cat $O/m/max_batch.md | head -20
rm -f $O/m/*.layers.json
(cd $O && tar czf m.tgz --remove-files m)
