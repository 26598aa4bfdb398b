#!/usr/bin/env bash
# Device call 110 (2026-12-06 07:16 UTC, run as one command line on the warm H100 after call 108;
# saved here as it ran). call107.sh's A lost r50_new (the first run, cold, passed its 100 s limit)
# and r50_wgrad_stem (budget): those again with 170 s each, our stem forward alone (r50_stem), and
# call107.sh's E (EfficientNet-B0, finalize default against CNNBENCH_FIN_CHANNELS=32).
# "X=1" is a placeholder for "no switch". Breakdowns use the heuristic engines, not autotune.
tar xJf .carry/bins.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
mkdir -p $OUT/b
for cfg in "r50_new resnet50 X=1" "r50_wgrad_stem resnet50 CNNBENCH_STEM_WGRAD=1 --stem=cnnbench" \
  "r50_stem resnet50 X=1 --stem=cnnbench" "effb0_new efficientnet_b0 X=1" \
  "effb0_fin32 efficientnet_b0 CNNBENCH_FIN_CHANNELS=32"; do
  set -- $cfg
  n=$1 net=$2 e=$3
  shift 3
  S=$SECONDS
  env $e timeout 170 $B/cnnbench_train_step --network=$net --precision=fp16 --batch=256 "$@" \
    --breakdown=$OUT/b/$n.json >$OUT/b/$n.txt 2>&1
  echo "$n rc=$? $((SECONDS - S))s"
  head -1 $OUT/b/$n.txt
  grep -E "^  (backward|forward) maxpool" $OUT/b/$n.txt
  python3 -c "import json,sys; [print('   ', l['label'], round(l['us'], 1)) for l in json.load(open(sys.argv[1]))['launches'] if l['label'].endswith((' conv1',))]" $OUT/b/$n.json 2>/dev/null
done
cd $OUT && tar czf b.tgz --remove-files b
