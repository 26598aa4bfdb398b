#!/usr/bin/env bash
# Device call 77: issue 10's racecheck and synccheck, the rest of the zoo. Call 76 ran racecheck
# over whole networks: over 300 s a run in fp32 and VGG, and every hazard it reported was inside
# cuBLAS's nvjet_sm90 GEMM kernels (AlexNet's classifier), none in cuDNN's or ours. So:
# R: racecheck on our kernels only (KERNELS=kns=cnnbench) over the zoo, fp16 and fp32, inference
#    and training, 6 at a time. Predicted: 0 hazards (our kernels' shared memory is barrier-guarded).
# S: synccheck over the networks call 76 did not reach (VGG-16-BN again, Inception-BN to
#    EfficientNet-B0), 5 at a time. Predicted: 0 errors (AlexNet, VGG fp16 were 0).
# T: racecheck on PyTorch's F.linear, AlexNet's classifier shapes at batch 2 fp16
#    (race_linear.py): whether cuBLAS's kernels trip racecheck without cnnbench. Predicted: the
#    same nvjet hazards, if PyTorch's cuBLAS picks a split-K nvjet kernel too.
set -u
O=${OUT:-/tmp/out}
mkdir -p $O/z
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib:$PWD/.carry/lib
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
$CS --version | tail -1; $CS --help 2>&1 | grep -E -- "--kernel-name|--filter" | head -3
(JOBS=6 TOOLS=racecheck KERNELS=kns=cnnbench BUDGET=${BUDGET:-270} RUN_TIMEOUT=200 \
  bash tools/sanitize_gpu.sh $O/z/r >$O/z/r.log 2>&1) &
(NETS="vgg16_bn inception_bn inception_v3 resnet50 resnet152 efficientnet_b0" JOBS=5 TOOLS=synccheck \
  BUDGET=${BUDGET:-270} RUN_TIMEOUT=200 bash tools/sanitize_gpu.sh $O/z/s >$O/z/s.log 2>&1) &
PY=/opt/torch/.venv/bin/python; [ -x $PY ] || PY=python3
LD_LIBRARY_PATH= timeout 200 $CS --tool racecheck --print-limit 20 $PY results/2026-12-05_h100/race_linear.py \
  >$O/z/torch_linear_racecheck.log 2>&1
echo "T torch racecheck rc=$? ${SECONDS}s"
grep -E "torch|checksum|SUMMARY|Race reported" $O/z/torch_linear_racecheck.log | sed -E 's/\+0x[0-9a-f]+//' | sort | uniq -c | head -12
wait
echo "R, S done ${SECONDS}s"
cat $O/z/r/summary.md $O/z/s/summary.md | grep -E "^\| [a-z]|^- " | grep -v "^| network"
(cd $O && tar czf z.tgz --remove-files z)
