# tests/data/video_fixture_h200.json: a recorded H200 run of the suite, whole (device call 37 of
# 2026-12-04; results/2026-12-04_h200/call37/v/video.json):
build/release/cnnbench --config=configs/yolor.yaml --benchmark_filter='fp16/video/batch:(8|32)/size:1280' \
  --benchmark_repetitions=2 --benchmark_out=video.json
