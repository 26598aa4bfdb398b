#!/usr/bin/env bash
# Rebuilds this folder's tables from the JSON files the two device calls wrote.
set -u
cd "$(dirname "$0")/../.."
R=results/2026-12-03_h200
pair() { echo --pair "$R/$1/zoo_$2.json" "$R/$1/${3:-zoo_pytorch}.json"; }
python3 tools/zoo_table.py $(pair call1 alexnet) $(pair call1 vgg16) $(pair call2 inception_bn) \
  $(pair call2 inception_v3) $(pair call2 resnet50 pytorch) $(pair call2 resnet152) \
  $(pair call2 efficientnet_b0) $(pair call2 efficientnet_b4) --out-md $R/zoo_fp16_vs_pytorch_graph.md
python3 tools/crosscheck_table.py $R/call1/crosscheck_*.json --out-md $R/crosscheck_fp32_fp16.md
for c in call1 call2; do
  python3 tools/compare_pytorch.py --cnnbench $R/$c/zoo_resnet50.json --pytorch $R/$c/pytorch.json \
    --out-md $R/compare_resnet50_fp16_$c.md >/dev/null
done
python3 tools/seed_table.py --cnnbench results/2026-12-03_h200/call1/zoo_alexnet.json --cnnbench results/2026-12-03_h200/call1/zoo_vgg16.json --cnnbench results/2026-12-03_h200/call2/zoo_inception_bn.json --cnnbench results/2026-12-03_h200/call2/zoo_inception_v3.json --cnnbench results/2026-12-03_h200/call2/zoo_resnet50.json --cnnbench results/2026-12-03_h200/call2/zoo_resnet152.json --batches 1,2,4,8,16,32 --readme README.md
