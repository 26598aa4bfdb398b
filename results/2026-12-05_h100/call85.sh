#!/usr/bin/env bash
# Device call 85 (written 2026-12-05 23:40 UTC): issue 10's last sanitizer runs, all at once (the
# tools are host-bound and the runs are at batch 2; 9 processes, below call 77's 12 that crowded the
# card). Binaries of 8cdbead (packed with tools/carry_pack.sh, the list in NOTES.md), carry .carry.
# R: racecheck over the GPU unit tests call 82 did not reach (it was cut inside GpuOps at 150 s):
#    two processes, GpuOps + GpuMbstd + GpuFourierBackward, and GpuTrainBackward. Predicted: 0
#    hazards (our kernels' shared-memory reductions passed in call 82; cuBLAS's nvjet hazards only
#    if a test runs an fp16 split-K GEMM).
# S: synccheck with blocking launches, 2 at a time: the eight classifiers' inference in fp16 and
#    fp32, and the training steps of the four networks call 84 did not run (AlexNet, AlexNet-LRN,
#    VGG-16-BN, Inception-v3). Predicted: 0 errors and 0 unchecked launches (call 84: 8 of 8).
# M: memcheck, initcheck and synccheck (blocking) on what call 76 left: YOLOR-CSP-X fp32 (and its
#    fp16 initcheck), StyleGAN3-T and StyleGAN-XL, fp16 and fp32, inference; 3 at a time.
#    Predicted: 0 errors; YOLOR fp32 memcheck the slowest (over 238 s at 8 at once in call 76).
set -u
O=${OUT:-/tmp/out}
BUDGET=${BUDGET:-560}
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib:$PWD/.carry/lib
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
mkdir -p $O/r $O/s $O/m
T=$((BUDGET - 20))
(NETS= TOOLS=racecheck RUN_TIMEOUT=$T BUDGET=$T TESTS='GpuOps.*:GpuMbstd.*:GpuFourierBackward.*' \
  bash tools/sanitize_gpu.sh $O/r/race_ops >$O/r/race_ops.log 2>&1) &
(NETS= TOOLS=racecheck RUN_TIMEOUT=$T BUDGET=$T TESTS='GpuTrainBackward.*' \
  bash tools/sanitize_gpu.sh $O/r/race_trainbwd >$O/r/race_trainbwd.log 2>&1) &
(NETS="alexnet alexnet_lrn vgg16_bn inception_bn inception_v3 resnet50 resnet152 efficientnet_b0" \
  MODES=infer TOOLS=synccheck JOBS=2 BLOCKING=1 RUN_TIMEOUT=200 BUDGET=$T \
  bash tools/sanitize_gpu.sh $O/s/infer >$O/s/infer.log 2>&1
 NETS="alexnet alexnet_lrn vgg16_bn inception_v3" MODES=train TOOLS=synccheck JOBS=2 BLOCKING=1 \
  RUN_TIMEOUT=200 BUDGET=$((T - SECONDS)) bash tools/sanitize_gpu.sh $O/s/train >$O/s/train.log 2>&1) &
(NETS=yolor_csp_x PRECISIONS=fp32 MODES=infer TOOLS="memcheck initcheck synccheck" BLOCKING=1 JOBS=3 \
  RUN_TIMEOUT=$T BUDGET=$T bash tools/sanitize_gpu.sh $O/m/yolor >$O/m/yolor.log 2>&1
 NETS=yolor_csp_x PRECISIONS=fp16 MODES=infer TOOLS=initcheck RUN_TIMEOUT=$T BUDGET=$((T - SECONDS)) \
  bash tools/sanitize_gpu.sh $O/m/yolor16 >$O/m/yolor16.log 2>&1) &
# The StyleGANs after YOLOR's three have had a head start: their runs are shorter.
(NETS="stylegan3_t stylegan_xl" MODES=infer TOOLS="memcheck initcheck synccheck" BLOCKING=1 JOBS=2 \
  RUN_TIMEOUT=300 BUDGET=$T bash tools/sanitize_gpu.sh $O/m/sg >$O/m/sg.log 2>&1) &
wait
echo "all done ${SECONDS}s"
for f in $O/r/race_*/summary.md $O/s/*/summary.md $O/m/*/summary.md; do
  grep -E "^\| [a-z]" $f | grep -v "^| network"
done
grep -h "Race reported" $O/r/race*/*.log 2>/dev/null | sed -E 's/\+0x[0-9a-f]+//' | sort | uniq -c | head -8
for f in $(find $O -name "*.log"); do  # the tools' repeated reports: keep the head and the tail
  [ "$(wc -l <$f)" -gt 120 ] && { head -60 $f; echo ...; tail -40 $f; } >$f.cut && mv $f.cut $f
done
(cd $O && tar czf call85.tgz --remove-files r s m)
