#!/usr/bin/env bash
# Device call 107 (written 2026-12-06 06:10 UTC, not yet run): the first call of the next session,
# about 570 s. Carry .carry (bins.txz packed at 2e2ba25, 06:47 UTC; repack if the code changes).
# G: the GPU tests of the four changes written after call 101, none yet run on a GPU:
#    - d0df94a, the stem pool keeping its places: GpuTrain.MaxPoolPlacesGiveTheBackwardFromXBitForBit
#      (y bit for bit launch_maxpool's, the places the host threads', dx bit for bit the backward
#      from x) and GpuTrainStep (the training step uses the places by default);
#    - 0c8eb2b, the finalize kernels at 8 channels a block where 32 gives fewer than 132 blocks:
#      GpuTrain.* under the default and again under CNNBENCH_FIN_CHANNELS=32 and =8 (both forms
#      of every finalize the tests reach);
#    - df0d734, launch_pad_channels a thread a row: GpuKernels.PadChannelsWidensRowsWithZeros and
#      the stem tests (GpuOps.Stem*);
#    - af279ec, the stem's weight gradient by our kernel (CNNBENCH_STEM_WGRAD=1, off by default):
#      GpuTrain.StemWgradMatchesItsHostCodeAndTheReference, and the padded-stem training steps
#      with it on.
# A: ResNet-50 fp16 training at 256, cnnbench_train_step --breakdown, the new defaults against the
#    old forms (CNNBENCH_MAXPOOL_PLACES=0 CNNBENCH_FIN_CHANNELS=32) in one call, then the new
#    again (the noise). Predicted (call 100 on another H100: 40,777.7 us):
#    - "backward maxpool" 915 -> 180 to 250 us (dy 103 MB, places 51 MB, dx 411 MB streamed at
#      2.3 to 3 TB/s, against 942 MB at 985 GB/s); "forward maxpool" 197 -> 205 to 225 us (its
#      51 MB of places more);
#    - the finalize launches 1.1 ms -> about 0.6 ms (the 10 to 13 us ones of few channels to 5 or 6,
#      the 5 to 8 us ones unchanged), inside the BatchNorm rows;
#    - the stem's channel pad (the first "forward conv conv1" launch; df0d734, a thread a row, one
#      word a row) 259 -> 95 to 120 us (282 MB at 2.3 to 3 TB/s).
#    - the step about 1.2 ms shorter: 39.4 to 39.7 ms (the old forms' run keeps the new pad).
#    - r50_wgrad (CNNBENCH_STEM_WGRAD=1): "backward.filter conv conv1" 884 -> 250 to 350 us (dy
#      411 MB read once, the image's rows 3.5 times through L2, 16 warps an SM of mma.sync), the
#      step 0.5 to 0.6 ms under r50_new. If so, make it the default. r50_wgrad_stem adds
#      --stem=cnnbench (our forward too): the image's pad (first "forward conv conv1" launch)
#      is then gone, and the forward conv 1,221 (cuDNN, padded) -> about 960 us (ours, call 56).
# E: EfficientNet-B0 fp16 training at 256, default against CNNBENCH_FIN_CHANNELS=32: its
#    squeeze-excitation scale backward's finalize has 256 segments (32 channels a block either
#    way, so the same), its BatchNorms of 16 to 1,280 channels take 8 where C / 32 < 132.
#    Predicted: 0.1 to 0.3 ms shorter (call 96: 7,815 img/s).
# On an H200: GpuTrain and GpuTrainStep, then call80.sh's P (the two training targets beside
#    PyTorch's eager AMP step; the ResNet-50 target, 8,000 img/s, is the H200's), with the places
#    and the finalize's new width switched off if those tests fail.
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-570}))
lim() { local t=$1 r=$((END - SECONDS - 10)); ((r < t)) && t=$r; ((t < 5)) && t=5; echo $t; }
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
B=build/release
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
mkdir -p $O/g $O/a $O/e
(cd $O && timeout $(lim 150) ctest --test-dir $OLDPWD/$B -R '^gpu_(GpuTrain|GpuTrainStep)(_[0-9])?$' \
  -j3 --output-on-failure >g/ctest.log 2>&1)
GRC=$?
echo "G rc=$GRC ${SECONDS}s"; grep -E "tests passed|FAILED|Failure" $O/g/ctest.log | head
if [[ $NAME == *H200* ]]; then
  # The H200's call is for the targets: the tests above, then P. Should they fail, P runs with
  # the two new forms that have switches turned off (the pad has none), and says so.
  (cd $O && tar czf g.tgz --remove-files g)
  if ((GRC != 0)); then
    echo "G failed: P with CNNBENCH_MAXPOOL_PLACES=0 CNNBENCH_FIN_CHANNELS=32"
    export CNNBENCH_MAXPOOL_PLACES=0 CNNBENCH_FIN_CHANNELS=32
  fi
  STEPS=P BUDGET=$((END - SECONDS)) bash results/2026-12-05_h100/call80.sh
  echo "call107 end ${SECONDS}s"
  exit 0
fi
timeout $(lim 60) $B/tests/test_gpu --gtest_filter='GpuKernels.PadChannels*:GpuOps.Stem*' \
  --gtest_brief=1 >$O/g/pad.log 2>&1
echo "G pad rc=$? ${SECONDS}s"; tail -2 $O/g/pad.log
CNNBENCH_STEM_WGRAD=1 timeout $(lim 120) $B/tests/test_gpu \
  --gtest_filter='GpuTrain.StemWgrad*:GpuTrainStep.PaddedStem*:GpuTrainStep.StemKernel*:GpuTrainStep.OneStep*' \
  --gtest_brief=1 >$O/g/stem_wgrad.log 2>&1
echo "G stem_wgrad rc=$? ${SECONDS}s"; tail -2 $O/g/stem_wgrad.log
for fc in 32 8; do
  CNNBENCH_FIN_CHANNELS=$fc timeout $(lim 60) $B/tests/test_gpu --gtest_filter='GpuTrain.*' \
    --gtest_brief=1 >$O/g/gputrain_fin$fc.log 2>&1
  echo "G fin$fc rc=$? ${SECONDS}s"; tail -2 $O/g/gputrain_fin$fc.log
done
(cd $O && tar czf g.tgz --remove-files g)
run() {  # name network env...
  local name=$1 net=$2
  shift 2
  ((END - SECONDS < 45)) && return
  env "$@" timeout $(lim 100) $B/cnnbench_train_step --network=$net --precision=fp16 --batch=256 ${EXTRA:-} \
    --breakdown=$O/$D/$name.json >$O/$D/$name.txt 2>&1
  echo "$D $name rc=$? ${SECONDS}s"; head -n 1 $O/$D/$name.txt
  grep -E "^  (backward|forward) (batchnorm|maxpool)" $O/$D/$name.txt | head -8
  python3 -c "import json,sys; [print('   ', l['label'], round(l['us'], 1)) for l in json.load(open(sys.argv[1]))['launches'] if l['label'].endswith((' conv1', ' maxpool'))]" $O/$D/$name.json 2>/dev/null
}
D=a
run r50_new resnet50 CNNBENCH_MAXPOOL_PLACES=1
run r50_old resnet50 CNNBENCH_MAXPOOL_PLACES=0 CNNBENCH_FIN_CHANNELS=32
run r50_wgrad resnet50 CNNBENCH_STEM_WGRAD=1
EXTRA="--stem=cnnbench" run r50_wgrad_stem resnet50 CNNBENCH_STEM_WGRAD=1
run r50_new2 resnet50 CNNBENCH_MAXPOOL_PLACES=1
ls $O/a/r50_*.json >/dev/null 2>&1 && python3 tools/compare_breakdowns.py \
  $(ls $O/a/r50_old.json $O/a/r50_new.json $O/a/r50_wgrad.json $O/a/r50_wgrad_stem.json \
    $O/a/r50_new2.json 2>/dev/null) --by-stage --out-md $O/a/compare.md >/dev/null 2>&1 &&
  head -30 $O/a/compare.md
(cd $O && tar czf a.tgz --remove-files a)
D=e
run effb0_new efficientnet_b0 CNNBENCH_FIN_CHANNELS=0
run effb0_fin32 efficientnet_b0 CNNBENCH_FIN_CHANNELS=32
(cd $O && tar czf e.tgz --remove-files e)
echo "call107 end ${SECONDS}s"
