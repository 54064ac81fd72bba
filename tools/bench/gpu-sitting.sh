#!/usr/bin/env bash
# gpu-sitting.sh: one sitting of issue 26's measurements on a lent GPU, within a fixed time
# budget: the validation kit's steps and the PyTorch reference forms, in order of what matters
# most, each under a time limit, everything packed into one archive. Made for the development
# GPU (about 15 minutes a session, 10 a command: docs/gpu.md, "A sitting on a lent GPU"); on a
# cluster node with time to spare run the whole kit instead (bin/gpu-kit/run.sh).
#
# Usage: gpu-sitting.sh KIT REF OUT [--budget SECONDS] [--copy DIR] [--groups LIST] [--shim]
#   KIT  the validation kit (make gpu-kit: bin/gpu-kit), or that folder packed by
#        tar -czf KIT.tgz -C bin gpu-kit (20 MB instead of 57 MB: what the device runner carries)
#   REF  a folder with the PyTorch references: w1.py, w1_cuda.py, w2.py, w2_cuda.py, w3_cuda.py
#        (the benchmark's own) and this repository's tools/bench/w3.py and compiled.py
#   OUT  the results folder; OUT/sitting.tgz holds all of it (on the development GPU, whose
#        runner returns only a few files, make OUT a folder outside its $OUT and pass
#        --copy "$OUT"); a digest of the results ends the standard output
#   --budget  seconds for the whole sitting (default 540: the runner's timeout_s 600 leaves
#        room for the archive); a step runs under its own limit or
#        what is left of the budget (less 10 s for its kill), and one that would start with less
#        than 20 s left is skipped and says so in OUT/sitting.log
#   --copy  a folder that gets a copy of OUT/sitting.tgz after every step (the device runner's
#        $OUT: the archive comes back even when the command is killed at its limit)
#   --groups  the groups below to run (1 to 7, comma-separated; default all): a session whose
#        device time is split between calls runs 1,2,3 in the first and 4,5,6 in the next; not
#        with --shim, which runs its own short check
#   --shim  run the kit in its --shim mode and the PyTorch steps' CPU checks only (a machine
#        without a GPU: checks this script)
# OUT/sitting.tgz is packed again after every step and on INT or TERM, so a sitting stopped from
# outside keeps what it had measured.
# Groups, in order (each kit group is one run.sh --only call with its own summary.md):
#   1 kit: gpu-info, cli-gpu (audit plan and run on the GPU against the CPU backend's verdict),
#     parity, precision-drift (an audit in tf32 and bf16 against fp32)
#   2 kit: bench-gpu, profile-w1 at R 64, 1024, 4096, and bench-gpu at 40 rounds   torch: W1
#     batched and batched_ghost, and batched_ghost at 40 rounds
#   3 kit: bench-gpu-w3 at R 8 to 48, profile-w3, and bench-gpu-w3 at R 64 (which only
#     Winograd's forms fit in 80 GB)   torch: W3 vmap at R 16, then at R 8
#   4 kit: bench-gpu-w2, profile-w2, memory, bench-gpu-w2-patches (the patch form beside the
#     default's direct kernels)   torch: W2 batched, and compiled (reduce-overhead: the best
#     PyTorch form of W2 in every sitting so far)
#   5 torch: W1 batched_ghost compiled (reduce-overhead)   kit: the tf32 and bf16 benchmarks
#     of W1 and W2, w1-parity, and what earlier changes bought: bench-gpu-clientbatch1 (each
#     client's steps launched alone), bench-gpu-w2-launch1 (the light kernels launched as
#     before the ninth session); W3 in TF32 on both sides (bench-gpu-w3-tf32, w3.py --tf32)
#   6 Nsight Compute (where installed): ncu's SpeedOfLight section (how close each kernel comes
#     to the device's memory and compute limits) for 80 launches of W2 at R 64 after its
#     warm-up round, for 40 of W1 at R 4096, and for 6 of W1's hidden_step at R 64 with the
#     warps' stall reasons and the occupancy, and the same for W2's direct convolutions at
#     R 1024 (and the whole-window weight gradient of FEDAUDIT_CUDA_DWROWS=2)
#   7 W2 compiled in max-autotune mode, W3 vmap compiled (reduce-overhead), and the kit's
#     alternatives: bench-gpu-graphs, bench-gpu-hidden1024,
#     bench-gpu-w2-splitk, bench-gpu-w3-splitk
# Exit status 0 when the archive was written (the steps' own outcomes are in the logs).
set -uo pipefail

if [ $# -lt 3 ]; then
  sed -n '2,/^set /s/^#\( \|$\)//p' "$0" | sed '$d'
  exit 2
fi
kit=$1
unpacked=
if [ -f "$kit" ]; then
  # A packed kit (tar -czf kit.tgz -C bin gpu-kit): the repository's tracked files travel to the
  # device too, and with them the unpacked kit no longer fits the runner's 64 MiB.
  unpacked=$(mktemp -d) || exit 2
  tar -xzf "$kit" -C "$unpacked" || { echo "gpu-sitting: cannot unpack $kit" >&2; rm -rf "$unpacked"; exit 2; }
  kit=$(ls -d "$unpacked"/*/ | head -1)
fi
kit=$(cd "$kit" && pwd) || exit 2
ref=$(cd "$2" && pwd) || exit 2
out=$3
shift 3
budget=540
shim=
groups=
copy=
usage_error() {
  echo "gpu-sitting: $*" >&2
  [ -n "$unpacked" ] && rm -rf "$unpacked"
  exit 2
}
while [ $# -gt 0 ]; do
  case $1 in
    --budget|--copy|--groups) [ $# -ge 2 ] || usage_error "$1 needs a value" ;;
  esac
  case $1 in
    --budget) budget=$2; shift ;;
    --copy) copy=$2; shift ;;
    --shim) shim=--shim ;;
    --groups) groups=$2; shift ;;
    *) usage_error "unknown argument $1" ;;
  esac
  shift
done
case $budget in '' | *[!0-9]*) usage_error "--budget takes whole seconds, not '$budget'" ;; esac
if [ -n "$groups" ]; then
  for g in ${groups//,/ }; do
    case $g in [1-7]) ;; *) usage_error "--groups takes groups 1 to 7, comma-separated, not '$groups'" ;; esac
  done
  [ -n "$shim" ] && usage_error "--groups and --shim: the shim mode runs its own short check, not the groups"
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -n "$copy" ]; then mkdir -p "$copy" && copy=$(cd "$copy" && pwd) || exit 2; fi
# A carried kit may arrive without its executable bits.
chmod u+x "$kit"/*.test "$kit/audit" "$kit"/*.sh 2> /dev/null || true
log=$out/sitting.log
: > "$log"
start=$SECONDS
py=${PYTHON:-python3}
if [ -n "$shim" ] && [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; fi
# The references print their RESULT lines without flushing: unbuffered, a step stopped at its
# limit keeps the lines it had printed.
export PYTHONUNBUFFERED=1

# want N: whether group N runs (--groups, default all).
want() { [ -z "$groups" ] || case ",$groups," in *",$1,"*) true ;; *) false ;; esac; }

say() { echo "[$((SECONDS - start)) s] $*" | tee -a "$log"; }

# left: seconds of the budget still free.
left() { echo $((budget - (SECONDS - start))); }

# pack writes OUT/sitting.tgz (and its copy in --copy DIR), atomically: everything in OUT but
# the archive itself and the kit groups' own kit-results.tgz (the same files again).
pack() {
  local base rc
  base=$(basename "$out")
  tar -czf "$out.tgz.tmp" --exclude="$base/sitting.tgz" --exclude=kit-results.tgz -C "$(dirname "$out")" "$base" 2> /dev/null
  rc=$? # 1: a file changed while read (a step still stopping); the archive is whole
  if [ $rc -gt 1 ] || ! mv -f "$out.tgz.tmp" "$out/sitting.tgz"; then
    rm -f "$out.tgz.tmp"
    return 1
  fi
  if [ -n "$copy" ]; then
    cp "$out/sitting.tgz" "$copy/sitting.tgz.tmp" && mv -f "$copy/sitting.tgz.tmp" "$copy/sitting.tgz"
  fi
}

# digest: each kit step's outcome, the benchmark rows of each kit group and the PyTorch results,
# on stdout, for a runner that returns only the output's tail.
digest() {
  local f
  for f in "$out"/kit-*/steps.tsv; do
    [ -f "$f" ] && grep -v "$(printf '\tskipped\t')" "$f" | sed "s|^|$(basename "$(dirname "$f")"): |"
  done
  for f in "$out"/kit-*/summary.md; do
    [ -f "$f" ] && sed -n '/^## W[123] benchmark/,$p' "$f" | grep '^|\|^##' | grep -v '^|---\|^| operation\|^| backend\|^| replicas'
  done
  cat "$out/results.txt" 2> /dev/null
  grep -h "largest parameter difference from fp32" "$out"/kit-*/precision-drift.log 2> /dev/null
}

# Stopped from outside: stop the running step (its timeout passes the TERM to all it started)
# and pack what there is.
child=
interrupted() {
  say "gpu-sitting: interrupted after $((SECONDS - start)) s; packing what there is"
  [ -n "$child" ] && kill -TERM "$child" 2> /dev/null
  pack
  digest
  [ -n "$unpacked" ] && rm -rf "$unpacked"
  exit 130
}
trap interrupted INT TERM

# run LIMIT NAME CMD...: CMD under min(LIMIT, what is left less 10 s for the kill), its output in
# OUT/NAME.log; skipped when less than 20 s would be left. In the background with wait, so that
# an INT or TERM reaches the trap at once; the archive is packed again after each step.
run() {
  local limit=$1 name=$2
  shift 2
  local l
  l=$(($(left) - 10))
  if [ "$l" -lt 20 ]; then
    say "skip $name: $((l + 10)) s of the budget left"
    return 0
  fi
  [ "$limit" -gt "$l" ] && limit=$l
  say "start $name (limit $limit s): $*"
  local t0=$SECONDS rc
  timeout --kill-after=10 "$limit" "$@" > "$out/$name.log" 2>&1 < /dev/null &
  child=$!
  wait "$child"
  rc=$?
  child=
  say "end $name: exit $rc after $((SECONDS - t0)) s"
  grep -h '^RESULT\|^{"workload"\|^CHECK' "$out/$name.log" >> "$out/results.txt" 2>/dev/null || true
  pack || say "packing $out/sitting.tgz failed"
}

# kitgroup NAME LIMIT STEPS ARGS...: one run.sh call with --only STEPS, each step limited too.
kitgroup() {
  local name=$1 limit=$2 steps=$3
  shift 3
  run "$limit" "$name" "$kit/run.sh" $shim --out "$out/$name" --only "$steps" --step-timeout "$limit" --sanitizers none "$@"
}

say "gpu-sitting: budget $budget s, kit $(cat "$kit/COMMIT" 2>/dev/null || echo '?'), results in $out"
if command -v nvidia-smi > /dev/null 2>&1; then
  timeout --kill-after=5 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$out/nvidia-smi.csv" 2>&1
fi
timeout --kill-after=5 60 "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' > "$out/torch.txt" 2>&1

if [ -n "$shim" ]; then
  kitgroup kit-1 120 gpu-info,bench-gpu-w2,profile-w1 --w2-replicas 2 --w2-rounds 1
  if [ -f "$ref/w1_cuda.py" ] && "$py" -c 'import torch' > /dev/null 2>&1; then
    run 60 check-w1-step "$py" "$ref/compiled.py" --ref "$ref" --check
  else
    say "skip check-w1-step: no w1_cuda.py in $ref or no torch for $py"
  fi
else
  # The sittings of 2026-11-27 (docs/benchmark-log.md) measured the forms left out here or
  # moved to the end: torch's im2col form (76 replica-rounds/s, never competitive), the direct
  # convolutions (2.2x slower than the patch form), split products (no change, when each slice
  # was a cuBLAS call of its own; timed again below since the slices run in one call), the fused
  # hidden step in blocks of 1,024 (slower) and W1 a client at a time (1.28x slower).
  if want 1; then
    kitgroup kit-1 150 gpu-info,cli-gpu,parity,precision-drift
  fi
  if want 2; then
    kitgroup kit-2 110 bench-gpu,profile-w1 --replicas 64,1024,4096 --rounds 10
    run 45 torch-w1-batched "$py" "$ref/w1_cuda.py" --impl batched --replicas 64,1024,4096 --rounds 10
    run 45 torch-w1-ghost "$py" "$ref/w1_cuda.py" --impl batched_ghost --replicas 64,1024,4096 --rounds 10
    # W1 at 40 rounds on both sides: each benchmark's clock holds a whole training, whose setup
    # weighs most at few rounds (the sixth sitting: fedaudit 23,180 at 10 rounds and 39,574 at
    # 40 at R 64, torch ghost 16,695 and 23,052); 40 against 10 gives the rounds' own rate.
    kitgroup kit-2r40 60 bench-gpu --replicas 64,1024,4096 --rounds 40
    run 45 torch-w1-ghost-r40 "$py" "$ref/w1_cuda.py" --impl batched_ghost --replicas 64,1024,4096 --rounds 40
  fi
  if want 3; then
    # W3 at the replicas an 80 GB GPU holds, by Winograd's F(4x4, 3x3) (the default since the
    # sixth sitting: 1.12x to 1.25x F(2x2, 3x3) on an H200, itself 1.28x to 1.42x the patch
    # form), profiled. The other forms, split products and 4 threads a row were timed in the
    # fifth and sixth sittings (bench-gpu-w3-winograd2 and -patches time them again).
    kitgroup kit-3 150 bench-gpu-w3,profile-w3 --w3-replicas 8,16,32,48 --w3-rounds 2
    # Goal 3 is at the largest R that fits 80 GB: R 64 by Winograd's forms.
    kitgroup kit-3w64 100 bench-gpu-w3 --w3-replicas 64 --w3-rounds 2
    # The benchmark's own W3 reference where REF has it, else the repository's form of it. Its
    # vmap at R 32 did not finish within 115 s on an H200 in the fifth sitting (and ran out of
    # an H100's 80 GB in the fourth): R 16 and 8 only, each in its own process (in the sixth
    # sitting R 16 after R 8 in one process did not finish within 60 s; alone it took 2 s).
    w3ref=$ref/w3_cuda.py
    [ -f "$w3ref" ] || w3ref=$ref/w3.py
    run 60 torch-w3-vmap-16 "$py" "$w3ref" --impl vmap --replicas 16 --rounds 2
    run 45 torch-w3-vmap-8 "$py" "$w3ref" --impl vmap --replicas 8 --rounds 2
  fi
  if want 4; then
    kitgroup kit-4 150 bench-gpu-w2,profile-w2,memory,bench-gpu-w2-patches --w2-replicas 64,1024 --w2-rounds 5
    run 60 torch-w2-batched "$py" "$ref/w2_cuda.py" --impl batched --replicas 64,1024 --rounds 5
    run 120 torch-w2-compile-reduce-overhead "$py" "$ref/compiled.py" --ref "$ref" --workload w2 --mode reduce-overhead -- --impl batched --replicas 64,1024 --rounds 5
  fi
  if want 5; then
    run 90 torch-w1-compile "$py" "$ref/compiled.py" --ref "$ref" --workload w1 --mode reduce-overhead -- --impl batched_ghost --replicas 64,4096 --rounds 10
    kitgroup kit-5 120 bench-gpu-tf32,bench-gpu-bf16,bench-gpu-w2-tf32,bench-gpu-w2-bf16,w1-parity,bench-gpu-clientbatch1,bench-gpu-w2-launch1 --replicas 64,4096 --rounds 10 --w2-replicas 64,1024 --w2-rounds 5
    # W3 in TF32 on both sides: in FP32, 2x PyTorch asks 79% of the SGEMM rate (docs/gpu.md,
    # "What the unmet goals ask of the device").
    kitgroup kit-5w3 120 bench-gpu-w3-tf32 --w3-replicas 8,32 --w3-rounds 2
    run 90 torch-w3-vmap-tf32 "$py" "$ref/w3.py" --impl vmap --replicas 8,16 --rounds 2 --tf32
  fi
  ncu=$(command -v ncu || true)
  for d in "${CUDA_HOME:-}" /usr/local/cuda; do
    if [ -z "$ncu" ] && [ -n "$d" ] && [ -x "$d/bin/ncu" ]; then ncu=$d/bin/ncu; fi
  done
  if ! want 6; then
    :
  elif [ -n "$ncu" ]; then
    # W2's setup and warm-up round issue about 2,700 launches: skip past them. Clocks as they
    # are (--clock-control none): locking them, ncu's default, was never tried on these machines.
    run 120 ncu-w2 env FEDAUDIT_BENCH_R=64 FEDAUDIT_BENCH_ROUNDS=1 "$ncu" --csv --section SpeedOfLight --clock-control none \
      --launch-skip 3000 --launch-count 80 "$kit/cuda-gpu.test" -test.run '^TestKitBenchW2GPU$' -test.count=1
    # W1 issues 36 launches a round since a group's copies and sums are one launch each:
    # skip the setup and the warm-up round.
    run 90 ncu-w1 env FEDAUDIT_BENCH_R=4096 FEDAUDIT_BENCH_ROUNDS=1 "$ncu" --csv --section SpeedOfLight --clock-control none \
      --launch-skip 60 --launch-count 40 "$kit/cuda-gpu.test" -test.run '^TestKitBenchW1GPU$' -test.count=1
    # hidden_step at R 64, grouped (9 clients' blocks) and alone (the target's): the stall
    # reasons and the occupancy of a block of one replica's step. In the fifth sitting a skip of
    # 10 with one timed round profiled none (since the target joined the group, W1 at R 64
    # launches it a few times a round): skip 3 of three rounds' launches.
    run 60 ncu-hidden env FEDAUDIT_BENCH_R=64 FEDAUDIT_BENCH_ROUNDS=2 "$ncu" --csv --section SpeedOfLight --section WarpStateStats \
      --section Occupancy --clock-control none --kernel-name hidden_step --launch-skip 3 --launch-count 6 \
      "$kit/cuda-gpu.test" -test.run '^TestKitBenchW1GPU$' -test.count=1
    # W2's direct convolutions at R 1024 (half of its device time in the sixth sitting): the
    # stall reasons and occupancy of conv_direct, _dx and _dw, then of the whole-window weight
    # gradient (FEDAUDIT_CUDA_DWROWS=2), which gained 4% there in one run: whether to choose it.
    # A step group launches each (and conv_direct_wt) about once: skip the first few step groups.
    run 90 ncu-w2-direct env FEDAUDIT_BENCH_R=1024 FEDAUDIT_BENCH_ROUNDS=1 "$ncu" --csv --section SpeedOfLight \
      --section WarpStateStats --section Occupancy --clock-control none --kernel-name regex:'^conv_direct' \
      --launch-skip 18 --launch-count 6 "$kit/cuda-gpu.test" -test.run '^TestKitBenchW2GPU$' -test.count=1
    run 90 ncu-w2-dwrows2 env FEDAUDIT_BENCH_R=1024 FEDAUDIT_BENCH_ROUNDS=1 FEDAUDIT_CUDA_DWROWS=2 "$ncu" --csv \
      --section SpeedOfLight --section WarpStateStats --section Occupancy --clock-control none \
      --kernel-name regex:'^conv_direct_dw' --launch-skip 6 --launch-count 2 \
      "$kit/cuda-gpu.test" -test.run '^TestKitBenchW2GPU$' -test.count=1
  else
    say "skip ncu: Nsight Compute not found (PATH, CUDA_HOME, /usr/local/cuda)"
  fi
  if want 7; then
    # Last, what the earlier sittings ran out of time for: max-autotune's compilation took
    # more than 180 s there; W3 vmap compiled; the alternative kernels.
    run 180 torch-w2-compile-max-autotune "$py" "$ref/compiled.py" --ref "$ref" --workload w2 --mode max-autotune -- --impl batched --replicas 1024 --rounds 5
    run 120 torch-w3-compile "$py" "$ref/w3.py" --impl vmap --replicas 8 --rounds 2 --compile reduce-overhead
    kitgroup kit-7 120 bench-gpu-graphs,bench-gpu-hidden1024,bench-gpu-w2-splitk,bench-gpu-w3-splitk --replicas 64,4096 --rounds 10 --w2-replicas 64,1024 --w2-rounds 5 --w3-replicas 8 --w3-rounds 2
  fi
fi
say "gpu-sitting: done in $((SECONDS - start)) s"
trap - INT TERM
pack
rc=$?
digest
[ -n "$unpacked" ] && rm -rf "$unpacked"
exit $rc
