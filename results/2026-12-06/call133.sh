#!/usr/bin/env bash
# Device call 133 (written 2026-12-06 11:50 UTC, not yet run): issue 10's last incomplete cells
# (results/sanitizer_matrix.md: 17 racecheck cells, StyleGAN-XL fp32 initcheck). Carry .carry.
# Calls 128 and 129 ran racecheck 3 or 4 processes at once at batch 2; most training and generator
# runs died with status 9 as the host's available memory fell to 2 to 6 GiB of 128 (one process
# held 125 GB): the OOM killer. Here one process at a time (JOBS=1) at batch 1 (BATCH=1), lean.
# Predicted: batch 1 about halves what each holds, and alone each fits; the classifiers' rows end
# VENDOR (races in cuBLAS's nvjet kernels alone, as in call 128) or CLEAN. STEPS picks:
#   K (fp16 training, no kernel filter, about 550 s): resnet50, efficientnet_b0, inception_bn,
#     inception_v3, resnet152.
#   L (fp32 with the vendors' kernels excluded, about 550 s): inception_v3 and resnet152 training,
#     then stylegan3_t, stylegan2_f and stylegan_xl inference.
#   M (fp16 inference, no filter, about 550 s): stylegan3_t, stylegan2_f, stylegan_xl, yolor_csp_x
#     (these died with 9 or timed out at 150 s), then resnet50, resnet152, efficientnet_b0 (timed
#     out at 150 s with 4 at once in call 128).
#   I (about 580 s): StyleGAN-XL fp32 initcheck alone (its memcheck took 477 s alone, call 130).
#   U (about 400 s): racecheck over GpuTrainBackward.* but the RGB-padding test (which timed out
#     at 250 s alone, call 105), every race printed: call 85's run over them ended with status 9
#     after 12 races, 8 of them shown, all in cuDNN's sm90_xmma_dgrad kernels (the matrix's one
#     FINDINGS row, among the unit tests, because 4 were not shown).
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-570}))
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
X="kns=nvjet kns=xmma kns=cudnn kns=cutlass"
# The tool's own options (racecheck's, for what might hold less host memory), kept with the rows.
mkdir -p $O/k
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
"$CS" --help >$O/k/compute_sanitizer_help.txt 2>&1
grep -iE "racecheck" $O/k/compute_sanitizer_help.txt | head -12
san() {  # out_dir nets precisions modes tools run_cap [extra env...]
  local d=$1 nets=$2 p=$3 modes=$4 tools=$5 cap=$6 left
  shift 6
  ((END - SECONDS < 40)) && { echo "skip $d (budget)"; return; }
  mkdir -p $O/$(dirname $d)
  left=$((END - SECONDS - 10)); ((left < cap)) && cap=$left
  env PRINT_LIMIT=1000 BATCH=1 JOBS=1 "$@" NETS="$nets" PRECISIONS="$p" MODES="$modes" \
    TOOLS="$tools" RUN_TIMEOUT=$cap BUDGET=$((END - SECONDS)) \
    bash tools/sanitize_gpu.sh $O/$d >$O/$d.log 2>&1
  echo "$d rc=$? ${SECONDS}s"; grep -E "^\| [a-z]" $O/$d/summary.md | grep -v "^| network"
  grep "^- host memory" $O/$d/summary.md
}
for s in ${STEPS:-K}; do
  case $s in
    K) san k/train "resnet50 efficientnet_b0 inception_bn inception_v3 resnet152" fp16 train racecheck 150 ;;
    L)
      san l/train "inception_v3 resnet152" fp32 train racecheck 150 EXCLUDE_KERNELS="$X"
      san l/gen32 "stylegan3_t stylegan2_f stylegan_xl" fp32 infer racecheck 150 EXCLUDE_KERNELS="$X"
      ;;
    M)
      san m/gen16 "stylegan3_t stylegan2_f stylegan_xl yolor_csp_x" fp16 infer racecheck 120
      san m/infer "resnet50 resnet152 efficientnet_b0" fp16 infer racecheck 200
      ;;
    I) san i/sgxl stylegan_xl fp32 infer initcheck 575 BATCH=2 ;;
    U) san u/trainbwd "" all tests racecheck 380 BATCH=2 TESTS='GpuTrainBackward.*-GpuTrainBackward.ConvBackwardFilterPadsAnRgbInput' ;;
  esac
done
(cd $O && tar czf call133.tgz --remove-files $(ls -d k l m i u 2>/dev/null))
echo "call133 end ${SECONDS}s"
