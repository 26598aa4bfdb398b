#!/usr/bin/env bash
# Device call 76 (run inline, recorded here as it ran): issue 10's racecheck and synccheck over the
# zoo, 8 runs at a time, then the four tools on the networks outside sanitize_gpu.sh's default list
# (YOLOR-CSP-X and the StyleGAN generators; inference only: cnnbench_train_step trains the
# classifiers). Carry .carry; pack everything.
tar xJf .carry/bins.txz && export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib:$PWD/.carry/lib && mkdir -p $OUT/z && JOBS=8 TOOLS="racecheck synccheck" BUDGET=330 RUN_TIMEOUT=300 bash tools/sanitize_gpu.sh $OUT/z/b >$OUT/z/b.log 2>&1; echo "b rc=$? ${SECONDS}s"; NETS="yolor_csp_x stylegan2_f stylegan3_t stylegan_xl" MODES=infer JOBS=8 BUDGET=$((570 - SECONDS)) RUN_TIMEOUT=240 bash tools/sanitize_gpu.sh $OUT/z/c >$OUT/z/c.log 2>&1; echo "c rc=$? ${SECONDS}s"; cat $OUT/z/b/summary.md $OUT/z/c/summary.md | grep -E "^\| [a-z]" | grep -v "^| network"; (cd $OUT && tar czf z.tgz --remove-files z)
