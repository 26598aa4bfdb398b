#!/usr/bin/env bash
# Fuzzes the two parsers of user files (issue 10) with libFuzzer: the YAML config parser and the
# .safetensors reader, FUZZ_SECONDS each (default 30), from seed corpora of the repository's own
# configs and a few small tensor files. Builds with clang++ -fsanitize=fuzzer,address,undefined
# into build/fuzz. Exit 0 when neither target finds anything; a finding's input is left in
# build/fuzz/ as crash-*.
#   bash tools/fuzz.sh            (ctest runs it as fuzz_parsers, label cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-30}
CXX=${FUZZ_CXX:-clang++}
command -v "$CXX" >/dev/null || { echo "fuzz: no $CXX (apt-get install -y clang)" >&2; exit 2; }
out=build/fuzz
mkdir -p "$out/corpus_config" "$out/corpus_safetensors"
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. )
"$CXX" "${flags[@]}" tests/fuzz/fuzz_config.cpp harness/config.cpp -lyaml-cpp -o "$out/fuzz_config"
"$CXX" "${flags[@]}" tests/fuzz/fuzz_safetensors.cpp harness/safetensors.cpp kernels/tensor.cpp \
  -o "$out/fuzz_safetensors"
cp configs/*.yaml "$out/corpus_config/"
find tests/data -name '*.safetensors' -exec cp {} "$out/corpus_safetensors/" \; 2>/dev/null || true
# A tiny valid file: 8-byte header length, the header, 4 bytes of data.
python3 - "$out/corpus_safetensors/seed.safetensors" <<'PY'
import json, struct, sys
h = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<f", 1.0))
PY
status=0
for t in config safetensors; do
  echo "fuzz: $t for ${SECONDS_EACH} s"
  (cd "$out" && ASAN_OPTIONS=detect_leaks=1 "./fuzz_$t" -max_total_time="$SECONDS_EACH" \
     -max_len=4096 -print_final_stats=1 "corpus_$t" >"fuzz_$t.log" 2>&1) || status=1
  grep -E "stat::number_of_executed_units|ERROR|SUMMARY" "$out/fuzz_$t.log" | head -5
done
[ $status -eq 0 ] && echo "fuzz: no findings" || echo "fuzz: a target failed: see $out/fuzz_*.log"
exit $status
