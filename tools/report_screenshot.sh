#!/usr/bin/env bash
# The report's documented look check (issue 7): renders report.html in headless Chromium (Debian's
# `chromium`) to a PNG, to be looked at, page by page of 2400 px.
#   bash tools/report_screenshot.sh results/<run>/report [HEIGHT]
set -euo pipefail
dir=${1:?usage: report_screenshot.sh REPORT_DIR [HEIGHT]}
height=${2:-2400}
command -v chromium >/dev/null || { echo "report_screenshot: no chromium (apt-get install -y chromium)" >&2; exit 2; }
[ -f "$dir/report.html" ] || { echo "report_screenshot: no $dir/report.html (tools/report.py writes it)" >&2; exit 2; }
out="$dir/screenshot.png"
timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --window-size=1200,"$height" --screenshot="$out" "file://$(readlink -f "$dir/report.html")" \
  >/dev/null 2>&1
echo "report_screenshot: wrote $out"
