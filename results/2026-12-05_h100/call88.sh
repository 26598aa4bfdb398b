#!/usr/bin/env bash
# Device call 88 (written 2026-12-06 00:30 UTC, not yet run): what call 85 left of issue 10's
# sanitizer matrix, at most 6 tool processes at once (call 85's 9 ran the card out of memory for
# cudaStreamCreate, as call 77's 12 had). Binaries of 298e469 or later; carry .carry.
# S: synccheck with blocking launches, inference, the runs call 85 could not start (Inception-v3,
#    ResNet-50, ResNet-152, EfficientNet-B0, fp16 and fp32) and Inception-BN fp32 again (152
#    launches unchecked there). Predicted: 0 errors, 0 unchecked launches (call 84: 8 training runs
#    alone, 0 and 0).
# R: racecheck, one test_gpu process per test, for the tests whose processes died with status 9
#    in calls 82 and 85 (GpuOps after FusedConvMatchesReference; GpuTrainBackward after
#    ConvBackwardFilterMatchesReference), so that a death names its test; host_mem.log says
#    whether the host ran short. Predicted: 0 hazards in our kernels; cuDNN's strided dgrad
#    kernels' hazards again in GpuTrainBackward.
# M: StyleGAN-XL (fp16, fp32) and StyleGAN3-T fp32 under memcheck, initcheck and synccheck
#    (call 85: StyleGAN3-T fp16 0/0/0; fp32 memcheck and initcheck over 200 s at 9 at once).
# D: racecheck on PyTorch's own strided conv backward (race_dgrad.py), 1 process more: whether
#    call 85's hazards in cuDNN's sm90_xmma_dgrad_*_strided kernels come without cnnbench.
# Y: YOLOR-CSP-X at --input_size=640 (its training size): initcheck fp32 and fp16, synccheck fp32
#    (call 85 at 1280: memcheck fp32 0 in 477 s; initcheck over 510 s; synccheck left 612 of
#    cuDNN's fp32 launches unchecked).
set -u
O=${OUT:-/tmp/out}
BUDGET=${BUDGET:-560}
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib:$PWD/.carry/lib
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader
mkdir -p $O/s $O/r $O/m $O/y
T=$((BUDGET - 20))
# S first, 2 at a time, alongside R's 1 and M's 2 (5 processes); Y after S.
(NETS="inception_v3 resnet50 resnet152 efficientnet_b0" MODES=infer TOOLS=synccheck JOBS=2 BLOCKING=1 \
  RUN_TIMEOUT=150 BUDGET=$T bash tools/sanitize_gpu.sh $O/s/infer >$O/s/infer.log 2>&1
 NETS=inception_bn PRECISIONS=fp32 MODES=infer TOOLS=synccheck BLOCKING=1 RUN_TIMEOUT=150 \
  BUDGET=$((T - SECONDS)) bash tools/sanitize_gpu.sh $O/s/ibn >$O/s/ibn.log 2>&1
 NETS=yolor_csp_x PRECISIONS="fp32 fp16" MODES=infer TOOLS=initcheck EXTRA_ARGS=--input_size=640 JOBS=2 \
  RUN_TIMEOUT=$((T - SECONDS - 5)) BUDGET=$((T - SECONDS)) bash tools/sanitize_gpu.sh $O/y/init >$O/y/init.log 2>&1) &
(for t in GpuOps.AutotuneGraphRoundRetimesSmallConvsAsReplayed GpuOps.PoolingMatchesReference \
  GpuOps.LinearWithBiasMatchesReference GpuOps.StandaloneEpilogueMatchesReference \
  GpuOps.DepthwiseOpMatchesConvOp GpuOps.StyleganModulatedConvEqualsThePerSampleConv \
  GpuOps.StemKernelMatchesItsHostCode GpuTrainBackward.ConvBackwardFilterPadsAnRgbInput \
  GpuTrainBackward.ConvBackwardAccumulates GpuTrainBackward.ConvBackwardPairReplaysFromGraph \
  GpuTrainBackward.Linear*; do
  ((SECONDS > T - 30)) && break
  NETS= TOOLS=racecheck TESTS="$t" RUN_TIMEOUT=$((T - SECONDS - 5)) BUDGET=$((T - SECONDS)) \
    bash tools/sanitize_gpu.sh "$O/r/$(echo "$t" | tr -d '*')" >>$O/r/race.log 2>&1
done) &
(NETS="stylegan_xl" MODES=infer TOOLS="memcheck initcheck synccheck" BLOCKING=1 JOBS=2 \
  RUN_TIMEOUT=300 BUDGET=$T bash tools/sanitize_gpu.sh $O/m/sgxl >$O/m/sgxl.log 2>&1
 NETS=stylegan3_t PRECISIONS=fp32 MODES=infer TOOLS="memcheck initcheck synccheck" BLOCKING=1 JOBS=2 \
  RUN_TIMEOUT=$((T - SECONDS - 5)) BUDGET=$((T - SECONDS)) bash tools/sanitize_gpu.sh $O/m/sg3 >$O/m/sg3.log 2>&1) &
# cuDNN's strided dgrad hazards (call 85) outside cnnbench: PyTorch's own conv backward under
# racecheck (race_dgrad.py). Predicted: the same kernels, the same kind of hazard.
PYTHON=python3; [ -x /opt/torch/.venv/bin/python3 ] && PYTHON=/opt/torch/.venv/bin/python3
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(timeout 240 $CS --tool racecheck --print-limit 20 $PYTHON results/2026-12-05_h100/race_dgrad.py \
  >$O/r/race_dgrad_torch.log 2>&1; echo "race_dgrad rc=$?" >>$O/r/race_dgrad_torch.log) &
wait
echo "all done ${SECONDS}s"
grep -E "RACECHECK SUMMARY|race_dgrad rc|checksum" $O/r/race_dgrad_torch.log | head -16
grep -h "Race reported" $O/r/race_dgrad_torch.log | sed -E 's/\+0x[0-9a-f]+//' | sort | uniq -c | head -6
for f in $(find $O -name summary.md | sort); do
  echo "## ${f#$O/}"
  grep -E "^\| [a-z]|^- host memory" $f | grep -v "^| network"
done
grep -h "Race reported" $O/r/*/*.log 2>/dev/null | sed -E 's/\+0x[0-9a-f]+//' | sort | uniq -c | head -8
for f in $(find $O -name "*.log"); do  # the tools' repeated reports: keep the head and the tail
  [ "$(wc -l <$f)" -gt 120 ] && { head -60 $f; echo ...; tail -40 $f; } >$f.cut && mv $f.cut $f
done
(cd $O && tar czf call88.tgz --remove-files s r m y)
