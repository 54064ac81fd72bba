#!/usr/bin/env bash
# gpu-ab.sh: two validation kits timed against each other in one call on a lent GPU: kit NEW's
# parity step, then the same run.sh steps on NEW, OLD, NEW, OLD, ... (alternating, so that a
# drift of the device's clocks shows as a spread between a kit's runs, not as a difference
# between the kits), then one profile step of NEW. Made for a change timed on a fresh machine
# of the development GPU, where a sitting's numbers from another machine are no baseline
# (docs/gpu.md, "A sitting on a lent GPU").
#
# Usage: gpu-ab.sh NEW OLD OUT [--repeat N] [--parity STEP] [--profile STEP] [--limit SECONDS]
#                  -- RUN-ARGS...
#   NEW, OLD   validation kits (make gpu-kit), or those folders packed by
#              tar -czf X.tgz --exclude=gpu-kit/audit --exclude=gpu-kit/shim.test -C bin gpu-kit
#              (3 MB each without the CLI and the shim's tests: two fit the device runner)
#   OUT        the results folder; OUT/ab.tgz holds it all, packed again after every step, so a
#              call stopped at its limit keeps what it measured (make OUT the runner's $OUT)
#   --repeat   runs of RUN-ARGS per kit (default 2)
#   --parity   the step NEW runs first (default parity; none for none)
#   --profile  the step NEW runs once at the end (default profile-w3; none for none)
#   --limit    seconds per run.sh call (default 60)
#   RUN-ARGS   run.sh's arguments for the timed runs, for example
#              --only bench-gpu-w3 --w3-replicas 8,32,48 --w3-rounds 2 (with --shim, on the host
#              shim: .ci/gpu-checks checks the script so)
# The standard output ends with each step's outcome and the benchmark rows of every run.
set -uo pipefail

usage() { sed -n '2,/^set /s/^#\( \|$\)//p' "$0" | sed '$d'; exit 2; }
[ $# -ge 3 ] || usage
new=$1 old=$2 out=$3
shift 3
repeat=2 parity=parity profile=profile-w3 limit=60
while [ $# -gt 0 ]; do
  case $1 in
    --repeat) repeat=${2:?--repeat needs a value}; shift 2 ;;
    --parity) parity=${2:?--parity needs a value}; shift 2 ;;
    --profile) profile=${2:?--profile needs a value}; shift 2 ;;
    --limit) limit=${2:?--limit needs a value}; shift 2 ;;
    --) shift; break ;;
    *) echo "gpu-ab: unknown argument $1 (RUN-ARGS come after --)" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "gpu-ab: no RUN-ARGS after --: nothing to time" >&2; exit 2; }
case $repeat$limit in *[!0-9]*) echo "gpu-ab: --repeat and --limit take whole numbers" >&2; exit 2 ;; esac

mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
work=$(mktemp -d) || exit 2
res=$work/ab
mkdir -p "$res"
trap 'rm -rf "$work"' EXIT

# unpack NAME KIT: the kit in $work/NAME/gpu-kit, whether KIT is a folder or a packed one.
unpack() {
  mkdir -p "$work/$1"
  if [ -f "$2" ]; then
    tar -xzf "$2" -C "$work/$1" || return 1
  else
    cp -r "$2" "$work/$1/gpu-kit" || return 1
  fi
  chmod u+x "$work/$1"/gpu-kit/*.sh "$work/$1"/gpu-kit/*.test 2> /dev/null
  echo "$1: $(cat "$work/$1/gpu-kit/COMMIT" 2> /dev/null || echo '?')" >> "$res/kits.txt"
}
unpack new "$new" && unpack old "$old" || { echo "gpu-ab: cannot unpack the kits" >&2; exit 2; }
if command -v nvidia-smi > /dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$res/nvidia-smi.csv" 2>&1
fi

# kit NAME KIT ARGS...: one run.sh call of kit KIT into $res/NAME, then the archive again.
kit() {
  local name=$1 k=$2 t0=$SECONDS
  shift 2
  timeout -k 5 "$limit" "$work/$k/gpu-kit/run.sh" --out "$res/$name" --sanitizers none --step-timeout "$limit" "$@" > "$res/$name.log" 2>&1
  echo "$name: exit $? after $((SECONDS - t0)) s" | tee -a "$res/runs.txt"
  tar -czf "$out/ab.tgz.tmp" -C "$work" ab && mv -f "$out/ab.tgz.tmp" "$out/ab.tgz"
}

[ "$parity" = none ] || kit new-parity new --only "$parity"
for i in $(seq 1 "$repeat"); do
  kit "new-$i" new "$@"
  kit "old-$i" old "$@"
done
[ "$profile" = none ] || kit new-profile new --only "$profile"

cat "$res/kits.txt" "$res/nvidia-smi.csv" 2> /dev/null
for f in "$res"/*/steps.tsv; do
  grep -v "$(printf '\tskipped\t')" "$f" | sed "s|^|$(basename "$(dirname "$f")"): |"
done
for d in "$res"/*/; do
  [ -f "$d/summary.md" ] && grep '^| gpu\|^| shim' "$d/summary.md" | grep -v '| skipped |\|| pass |\|| FAIL |' | sed "s|^|$(basename "$d"): |"
done
exit 0
