#!/usr/bin/env bash
# The zoo table: trains every variant of the bug zoo at SEEDS seeds (default 5; 100 for the
# reference table), imports each, runs `audit check DIR --json` with 2 coupled pairs and with
# pair 0 alone, and writes OUT/zoo.md and OUT/zoo.csv (variant, what it models, seeds caught,
# pairs needed, the checks that caught it, the median p-value) with every --json output under
# OUT/json/. Needs python3 with torch and numpy, and `audit check`.
#
#   tools/zoo/table.sh results/zoo            # SEEDS=100 tools/zoo/table.sh results/zoo
set -euo pipefail
out=${1:?usage: tools/zoo/table.sh OUT}
cd "$(dirname "$0")/../.."
mkdir -p "$out"
out=$(cd "$out" && pwd)
FEDAUDIT_REQUIRE_TORCH=1 FEDAUDIT_ZOO_SEEDS="${SEEDS:-5}" FEDAUDIT_ZOO_TABLE="$out" \
  go test -count=1 -timeout 6h -v -run 'TestZooCheck' ./tools/zoo | tee "$out/test.log" | grep -E '^(---|ok|FAIL|PASS)|zoo table|checks in' || true
rm -rf "$out/work"   # the snapshots and imported directories
test -s "$out/zoo.md" && cat "$out/zoo.md"
