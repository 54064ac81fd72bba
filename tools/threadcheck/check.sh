#!/usr/bin/env bash
# Runs `audit run` on an MLP, a LeNet-5 and a ResNet config at several GOMAXPROCS values and
# checks that the run files, the scores, findings.json and rounds.json are byte-identical to the
# first value's (docs/training.md: results do not depend on the thread count).
#
# usage: tools/threadcheck/check.sh AUDIT_BINARY [GOMAXPROCS values...]   (default 1 2 3 8 16 64)
set -euo pipefail
audit=${1:?usage: check.sh AUDIT_BINARY [GOMAXPROCS...]}
shift
procs=("$@")
[ ${#procs[@]} -gt 0 ] || procs=(1 2 3 8 16 64)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

compare() { # the files that must not depend on the thread count
  local a=$1 b=$2 f
  for f in runs/*.arrow scores.arrow canary-scores.arrow findings.json rounds.json; do
    if [ -e "$a/$f" ] || [ -e "$b/$f" ]; then
      cmp -s "$a/$f" "$b/$f" || { echo "differs: $f ($a vs $b)"; return 1; }
    fi
  done
  for f in "$a"/runs/*.arrow; do [ -e "$b/runs/$(basename "$f")" ] || { echo "missing in $b: $f"; return 1; }; done
}

fail=0
for cfg in mlp lenet5 resnet; do
  ref=""
  for p in "${procs[@]}"; do
    out="$work/$cfg-$p"
    start=$(date +%s%N)
    if ! GOMAXPROCS=$p "$audit" run --config "$here/$cfg.yaml" --out "$out" --quiet >"$out.log" 2>&1; then
      echo "FAIL $cfg GOMAXPROCS=$p: audit run failed"; tail -20 "$out.log"; fail=1; continue
    fi
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    secs=$(printf '%d.%02d' $((ms / 1000)) $((ms % 1000 / 10)))
    if [ -z "$ref" ]; then
      ref=$out; printf 'ok   %-7s GOMAXPROCS=%-3s %6.2f s (reference)\n' "$cfg" "$p" "$secs"
    elif compare "$ref" "$out"; then
      printf 'ok   %-7s GOMAXPROCS=%-3s %6.2f s, identical to GOMAXPROCS=%s\n' "$cfg" "$p" "$secs" "${procs[0]}"
    else
      echo "FAIL $cfg GOMAXPROCS=$p: outputs differ from GOMAXPROCS=${procs[0]}"; fail=1
    fi
  done
done
exit $fail
