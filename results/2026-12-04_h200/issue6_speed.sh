#!/usr/bin/env bash
# Rebuilds issue6_speed.md's tables from the recorded JSON (device calls 35, 37 and 39).
cd "$(dirname "$0")/../.."
R=results/2026-12-04_h200
cmp() { python3 tools/compare_pytorch.py --precision fp16 --batch1-ratio 1 --against eager --check "$@"; }
# StyleGAN3 is not among the issue's speed bars (YOLOR at 1280, StyleGAN2 at 1024): no --check.
show() { python3 tools/compare_pytorch.py --precision fp16 "$@"; }
cmp --cnnbench $R/call35/y/cnnbench.json --pytorch $R/call35/y/pytorch.json --network yolor_csp_x \
  --input-size 1280 --default-size 640
# StyleGAN: call 39 (after the fir1d rewrite and StyleGAN2's separable up-sampling; call 35's and
# 37's rows, before them, are in git history).
cmp --cnnbench $R/call39/s/sg2.jsonl --pytorch $R/call39/s/pt_sg2.json --network stylegan2_f \
  --pytorch-model stylegan2_f_1024 --input-size 1024 --default-size 1024
show --cnnbench $R/call39/s/sg3.jsonl --pytorch $R/call39/s/pt_sg3_1024.json \
  --network stylegan3_t --pytorch-model stylegan3_t_1024 --input-size 1024 --default-size 1024
show --cnnbench $R/call39/s/sg3.jsonl --pytorch $R/call39/s/pt_sg3_256.json \
  --network stylegan3_t --pytorch-model stylegan3_t_256 --input-size 256 --default-size 1024
# YOLOR's frames-to-boxes rows (mode detect: the network's replay, then decode + NMS; mode video:
# 1,000 frames at 1280 from pinned host memory, H2D, x/255, network, decode + NMS, boxes D2H).
python3 - "$R" <<'PY'
import json, sys
sys.path.insert(0, "tools")
import compare_pytorch as cp
R = sys.argv[1]
print("\n## yolor_csp_x fp16 at 1280: frames to final boxes\n")
print("| mode | batch | ms per iteration (median) | frames/s | time for 1,000 frames, s (detect: 1,000 / frames/s) | network ms | decode+NMS ms |")
print("|---|---:|---:|---:|---:|---:|---:|")
for path in (f"{R}/call35/y/cnnbench.json", f"{R}/call37/v/video.json"):
    for e in cp.read_benchmark_json(path)["benchmarks"]:
        if e.get("aggregate_name") != "median":
            continue
        name = e["run_name"]
        mode = name.split("/")[2]
        if mode not in ("detect", "video"):
            continue
        fps = e.get("frames_per_s") or e.get("img_per_s")
        ttc = e.get("time_to_completion_s")
        ttc = f"{ttc:.2f}" if isinstance(ttc, (int, float)) else f"{1000 / fps:.2f}"
        net, post = e.get("network_ms"), e.get("post_ms")
        f = lambda v: f"{v:.2f}" if isinstance(v, (int, float)) else "–"
        print(f"| {mode} | {cp.parse_name(name)[3]} | {e['real_time']:.1f} | {fps:.0f} | {ttc} | {f(net)} | {f(post)} |")
PY
# StyleGAN-XL (no PyTorch peer in the call): ours only, from the results lines.
python3 - "$R" <<'PY'
import sys
sys.path.insert(0, "tools")
import compare_pytorch as cp
doc = cp.read_benchmark_json(f"{sys.argv[1]}/call39/s/xl.jsonl")
print("\n## stylegan_xl fp16 (cnnbench only; call 39)\n")
print("| size | batch | ms per batch (median) | img/s |")
print("|---:|---:|---:|---:|")
for e in doc["benchmarks"]:
    if e.get("aggregate_name") == "median":
        name = e["run_name"]
        size = int(name.split("size:")[1].split("/")[0]) if "size:" in name else 1024
        print(f"| {size} | {cp.parse_name(name)[3]} | {e['real_time']:.1f} | {1000 * cp.parse_name(name)[3] / e['real_time']:.1f} |")
PY
