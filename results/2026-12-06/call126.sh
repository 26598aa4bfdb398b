#!/usr/bin/env bash
# Device call 126 (written 2026-12-06 09:30 UTC, not yet run): issue 10's racecheck leftovers
# (results/sanitizer_matrix.md: 23 racecheck cells incomplete). Carry .carry. STEPS picks.
#   STEPS=F (fp16, about 540 s): every kernel checked (no filter: with one, fp16 runs end in
#     "Internal Sanitizer Error: ... failed to handle a hardware exception", and PyTorch alone does
#     the same, call 118), lean runs (inference one eager forward, no replay checks at build;
#     calls 76 and 109 ran the graph path and timed out). Call 76's alexnet rows finished that
#     way with races in cuBLAS's nvjet kernels alone (VENDOR in the matrix; PyTorch alone reports
#     races in the same family, call 118). Predicted: VENDOR or CLEAN for the classifiers that
#     finish; vgg16_bn's training may still time out.
#   PRINT_LIMIT=1000: the matrix calls a cell VENDOR only where its log shows every race.
#   STEPS=G (fp32 and the generators, about 540 s): the vendors' kernels excluded (fp32 is not
#     affected by the filter failure: calls 118, 121 to 124), inception_bn, inception_v3 and
#     resnet152 training (call 77 ended them with exit 9 under the include filter; call 124 timed
#     inception_bn out at 28 s of budget), then the four generators fp32; their fp16 rows
#     unfiltered.
set -u
O=${OUT:-/tmp/out}
END=$((SECONDS + ${BUDGET:-560}))
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/.carry/lib
X="kns=nvjet kns=xmma kns=cudnn kns=cutlass"
race() {  # out_dir nets precisions modes jobs run_cap [extra env...]
  local d=$1 nets=$2 p=$3 modes=$4 jobs=$5 cap=$6 left
  shift 6
  ((END - SECONDS < 40)) && { echo "skip $d (budget)"; return; }
  mkdir -p $O/$(dirname $d)
  left=$((END - SECONDS - 10)); ((left < cap)) && cap=$left
  env PRINT_LIMIT=1000 "$@" NETS="$nets" PRECISIONS="$p" MODES="$modes" TOOLS=racecheck JOBS=$jobs \
    RUN_TIMEOUT=$cap BUDGET=$((END - SECONDS)) \
    bash tools/sanitize_gpu.sh $O/$d >$O/$d.log 2>&1
  echo "$d rc=$? ${SECONDS}s"; grep -E "^\| [a-z]" $O/$d/summary.md | grep -v "^| network"
}
for s in ${STEPS:-F}; do
  case $s in
    F)
      race f/infer "alexnet alexnet_lrn vgg16_bn inception_bn inception_v3 resnet50 resnet152 efficientnet_b0" \
        fp16 infer 4 150
      race f/train "inception_bn resnet50 efficientnet_b0 inception_v3 resnet152 vgg16_bn" fp16 train 3 240
      ;;
    G)
      race g/train "inception_bn inception_v3 resnet152" fp32 train 3 150 EXCLUDE_KERNELS="$X"
      race g/gen32 "stylegan3_t yolor_csp_x stylegan2_f stylegan_xl" fp32 infer 4 200 EXCLUDE_KERNELS="$X"
      race g/gen16 "stylegan3_t yolor_csp_x stylegan2_f stylegan_xl" fp16 infer 4 150
      ;;
  esac
done
(cd $O && tar czf call126.tgz --remove-files $(ls -d f g 2>/dev/null))
echo "call126 end ${SECONDS}s"
