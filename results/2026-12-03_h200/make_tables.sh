#!/usr/bin/env bash
# Rebuilds this folder's tables from the JSON files the device calls wrote.
set -u
cd "$(dirname "$0")/../.."
R=results/2026-12-03_h200
pair() { echo --pair "$R/$1/zoo_$2.json" "$R/$1/${3:-zoo_pytorch}.json"; }
# Calls in order: a later call's measurement of a (network, batch) replaces an earlier one's, and
# each ratio is taken against PyTorch from the same call as the cnnbench figure.
v=call5/v e=call6/e
S16=$(for n in alexnet alexnet_lrn vgg16 vgg16_bn vgg19 vgg19_bn inception_bn inception_v3 resnet50 resnet152; do
  pair call16/z $n; done)
S17=$(for n in 0 1 2 3 4 5; do pair call17/z efficientnet_b$n ../../call18/p/zoo_pytorch; done)
python3 tools/zoo_table.py $(pair call1 alexnet) $(pair $v alexnet_lrn) $(pair call1 vgg16) \
  $(pair $v vgg16_bn) $(pair $v vgg19) $(pair $v vgg19_bn) $(pair call2 inception_bn) \
  $(pair call2 inception_v3) $(pair call2 resnet50 pytorch) \
  --pair $R/call3/s/cnnbench.json $R/call3/s/pytorch.json $(pair call4/r resnet50 ../peer/zoo_pytorch) \
  --pair $R/call7/s/cnnbench.json $R/call7/s/pytorch.json \
  $(pair call2 resnet152) $(pair call4/r resnet152 ../peer/zoo_pytorch) \
  $(pair call2 efficientnet_b0) $(pair call4/e efficientnet_b0 ../peer/zoo_pytorch) \
  $(pair call4/u efficientnet_b0 ../peer/zoo_pytorch) $(pair $e efficientnet_b1) \
  $(pair $e efficientnet_b2) $(pair $e efficientnet_b3) $(pair call2 efficientnet_b4) \
  $(pair call4/e efficientnet_b4 ../peer/zoo_pytorch) $(pair call4/u efficientnet_b4 ../peer/zoo_pytorch) \
  $(pair $e efficientnet_b5) $(pair $e efficientnet_b6 ../../call9/pp/zoo_pytorch) \
  $(pair $e efficientnet_b7 ../../call9/pp/zoo_pytorch) \
  $(pair call8/e efficientnet_b2 ../../call6/e/zoo_pytorch) $(pair call8/e efficientnet_b5 ../../call6/e/zoo_pytorch) \
  $(pair call8/e efficientnet_b6 ../../call9/pp/zoo_pytorch) $(pair call8/f efficientnet_b7 ../../call9/pp/zoo_pytorch) \
  $(pair call9/f efficientnet_b7 ../pp/zoo_pytorch) \
  $(for n in 0 1 2 3 4 5 6 7; do pair call10/e efficientnet_b$n ../pe/zoo_pytorch; done) \
  $(pair call11/l efficientnet_b0 ../../call4/peer/zoo_pytorch) $(pair call11/l efficientnet_b4 ../../call4/peer/zoo_pytorch) \
  $(pair call11/l efficientnet_b7 ../../call9/pp/zoo_pytorch) \
  $(for n in 0 1 2 3 4 5 6 7; do pair call15/e efficientnet_b$n; done) \
  $S16 $S17 \
  $(pair call18/z efficientnet_b4 ../../call4/peer/zoo_pytorch) $(pair call18/z efficientnet_b5 ../../call6/e/zoo_pytorch) \
  $(for n in 6 7; do pair call18/y efficientnet_b$n ../../call10/pe/zoo_pytorch; pair call18/y efficientnet_b$n ../../call9/pp/zoo_pytorch; done) \
  --pair results/2026-12-04_h200/call19/b/zoo_efficientnet_b5.json results/2026-12-04_h200/call19/b/zoo_pytorch.json \
  --out-md $R/zoo_fp16_vs_pytorch_graph.md
# This session's binaries alone (calls 16 to 18, the same inference code): each network beside
# PyTorch in the same call (16) or on the next lease 30 minutes later (17 with 18's PyTorch).
python3 tools/zoo_table.py $S16 $S17 --out-md $R/zoo_fp16_vs_pytorch_graph_calls16_18.md >/dev/null
python3 tools/crosscheck_table.py $R/call5/c/crosscheck_*.json --out-md $R/crosscheck_fp32_fp16.md
for c in call1 call2; do
  python3 tools/compare_pytorch.py --cnnbench $R/$c/zoo_resnet50.json --pytorch $R/$c/pytorch.json \
    --out-md $R/compare_resnet50_fp16_$c.md >/dev/null
done
# Issue 2's table: the default sweep (ResNet-50, fp16 of it) beside PyTorch eager and graph, as
# call 3 measured it (five layers repaired by engine bans) and call 7 (the hoisted schedule, none).
for c in call3 call7; do
  python3 tools/compare_pytorch.py --cnnbench $R/$c/s/cnnbench.json --pytorch $R/$c/s/pytorch.json \
    --out-md $R/compare_resnet50_fp16_$c.md --check
done
S=results/2026-12-03_h200
python3 tools/seed_table.py --cnnbench $S/call1/zoo_alexnet.json --cnnbench $S/call1/zoo_vgg16.json \
  --cnnbench $S/call2/zoo_inception_bn.json --cnnbench $S/call2/zoo_inception_v3.json \
  --cnnbench $S/call2/zoo_resnet50.json --cnnbench $S/call3/s/cnnbench.json \
  --cnnbench $S/call7/s/cnnbench.json \
  --cnnbench $S/call2/zoo_resnet152.json --cnnbench $S/call4/r/zoo_resnet152.json \
  --cnnbench $S/call5/v/zoo_alexnet_lrn.json --cnnbench $S/call9/m/cnnbench.json --cnnbench $S/call11/m/cnnbench.json --batches 1,2,4,8,16,32 --readme README.md
# Issue 7's report: the H200 runs beside the seed's GPUs, costs from configs/prices.yaml (the
# H200's price there is an example). Plots need Debian's python3-matplotlib (/usr/bin/python3).
PY=python3; /usr/bin/python3 -c 'import matplotlib' 2>/dev/null && PY=/usr/bin/python3
# With YOLOR's video task (call 37 of 2026-12-04) and the max-batch searches of
# results/2026-12-04_h200/max_batch_table.md (calls 29 to 33, every card size), which replace
# call 15's search of 2026-12-03 (stopped by an error that those calls no longer meet).
T=results/2026-12-04_h200
MB="$(ls $T/call29/s/max_batch_*.jsonl $T/call30/s/max_batch_*.jsonl $T/call31/s/max_batch_*.jsonl \
  $T/call32/s8/max_batch_8.jsonl $T/call32/s/max_batch_*.jsonl $T/call32/b/max_batch_48.jsonl \
  $T/call33/w/max_batch_whole.jsonl)"
$PY tools/report.py $S/call1/zoo_alexnet.json $S/call1/zoo_vgg16.json $S/call2/zoo_inception_bn.json \
  $S/call2/zoo_inception_v3.json $S/call2/zoo_resnet50.json $S/call7/s/cnnbench.json \
  $S/call2/zoo_resnet152.json $S/call4/r/zoo_resnet152.json $S/call5/v/zoo_alexnet_lrn.json \
  $S/call9/m/cnnbench.json $S/call11/m/cnnbench.json $S/call18/x/gemm.json \
  $T/call37/v/video.json $MB --out-dir $S/report --readme README.md
# Issue 8's compare tool on two recorded default sweeps of ResNet-50 (the same cuDNN 9.19; the
# suite's revision and the residual schedule changed between call 3 and call 7).
python3 tools/compare_runs.py $S/call3/s/cnnbench.json $S/call7/s/cnnbench.json \
  --out-md $S/compare_call3_call7.md >/dev/null
