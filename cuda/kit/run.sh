#!/usr/bin/env bash
# run.sh validates and benchmarks the GPU backend with the binaries beside it, on a GPU node
# without Go (docs/gpu.md, "The validation kit"). Steps, each logged to OUT/STEP.log:
#   gpu-info    audit gpu-info: driver, device, memory, cuBLAS, whether the PTX loads
#   cli-gpu     the CLI on the device: audit plan --backend gpu (its calibration on the GPU),
#               and audit run --backend gpu --devices all against --backend cpu on
#               cli-gpu.yaml: the same verdict (exit status 3) and certified mu within 0.05
#   parity      the parity suite (every kernel and whole small runs against the CPU backend)
#   w1-parity   W1 on the device against the CPU backend (TestW1MatchesCPU)
#   precision-drift  an audit trained in fp32, tf32 and bf16: how far the reduced precisions
#               move the parameters and the certified mu (TestKitPrecisionDriftGPU: an MLP, W1
#               and a small ResNet by Winograd's F(2x2, 3x3); on the shim,
#               TestReducedPrecisionMovesTheAuditLittle)
#   memory      the device memory of W1, W2 and a ResNet-18 of W3's shape at 1 and 2 pairs
#               against the estimate `audit plan` prints (TestKitMemoryGPU; on the shim, the
#               shim's memory tests)
#   memcheck    compute-sanitizer memcheck on a subset of the parity suite, where installed
#   racecheck, initcheck  the same subset under compute-sanitizer's racecheck and initcheck
#   bench-gpu   W1 at each replica count on the device (with its SGEMM rate as reference)
#   bench-gpu-graphs  the same with every batch run as a CUDA graph (FEDAUDIT_CUDA_GRAPHS=1)
#   bench-gpu-tf32, bench-gpu-w2-tf32, bench-gpu-bf16, bench-gpu-w2-bf16  W1 and W2 on the
#               device with TF32 or bfloat16 products (FEDAUDIT_BENCH_PRECISION)
#   bench-cpu   W1 at each replica count on the CPU backend of the same node
#   bench-gpu-w2, bench-cpu-w2  W2 (LeNet-5) on the device and on the CPU backend
#   bench-gpu-w3  W3 (ResNet-18, GroupNorm, 3x32x32) on the device (GPU mode only)
#   bench-gpu-w2-splitk, bench-gpu-w3-splitk  W2 and W3 with the products of small output and
#               long depth (the weight gradients at few replicas) in depth slices
#               (FEDAUDIT_CUDA_SPLITK=1)
#   bench-gpu-w3-tf32  W3 on the device with TF32 products (FEDAUDIT_BENCH_PRECISION=tf32),
#               to set beside PyTorch's W3 in TF32 (tools/bench/w3.py --tf32)
#   bench-gpu-w3-biascopies  W3 with every convolution's weights copied beside its bias, as
#               before the bias was kept apart (FEDAUDIT_CUDA_BIASCOPIES=1), beside bench-gpu-w3
#   bench-gpu-w3-patches  W3 with every convolution by its patches (FEDAUDIT_CUDA_PATCHCONV=1),
#               the stride-1 3x3 ones too, which run by Winograd's F(4x4, 3x3) by default
#               (bench-gpu-w3): what Winograd's form gains, in one sitting
#   bench-gpu-w3-winograd2  W3 with the stride-1 3x3 convolutions by Winograd's F(2x2, 3x3)
#               instead of F(4x4, 3x3) (FEDAUDIT_CUDA_WINOGRAD2=1), beside bench-gpu-w3
#   bench-gpu-w2-patches  W2 with LeNet-5's second convolution by its patches instead of the
#               direct kernels (FEDAUDIT_CUDA_PATCHCONV=1), beside bench-gpu-w2
#   bench-gpu-w2-dwrows2, bench-gpu-w2-dwrows4  W2 with the direct kernels' weight gradient a
#               thread per 2 or 4 output channels and input channel over the whole window
#               (FEDAUDIT_CUDA_DWROWS), beside bench-gpu-w2
#   bench-gpu-hidden1024  W1 with the fused hidden step in blocks of 1,024 threads instead of
#               256 (FEDAUDIT_CUDA_HIDDENBLOCK=1024), beside bench-gpu
#   bench-gpu-clientbatch1  W1 with each client's local steps launched alone, as before
#               grouped clients (FEDAUDIT_CUDA_CLIENTBATCH=1), beside bench-gpu
#   bench-gpu-w2-rowgroup4, bench-gpu-w2-rowgroup2, bench-gpu-w3-rowgroup4  W2 and W3 with 4 or
#               2 threads to a row of samples in the image kernels instead of 8
#               (FEDAUDIT_CUDA_ROWGROUP): each row's index arithmetic (im2col's loop over rows
#               is 332 sm_90 instructions, both branches) over 8 or 16 samples a thread, not 4
#   bench-gpu-w2-launch1, bench-gpu-w3-launch1  W2 and W3 with the light kernels launched as
#               before 2026-11-27 (32 threads a row of samples, one item a thread:
#               FEDAUDIT_CUDA_ROWGROUP=32 FEDAUDIT_CUDA_LIGHTITEMS=1), beside bench-gpu-w2 and
#               bench-gpu-w3: what the new launch shape gains, in one sitting
#   profile-w1, profile-w2, profile-w3  where the device time goes: every launch and GEMM timed
#               with CUDA events (FEDAUDIT_CUDA_PROFILE=1), W1 at R=64 and 4096 (2 rounds), W2
#               at 64 and 1024 (1 round), W3 at 8 (1 round); tables in summary.md (shim mode:
#               profile-w1 at R=2, timed by the host's clock)
#   profile-w2-patches  profile-w2 with every convolution by its patches
#   profile-w3-patches  profile-w3 with every convolution by its patches
#   profile-w3-winograd2  profile-w3 by Winograd's F(2x2, 3x3)
#   summary     OUT/summary.md and OUT/summary.json
# and everything in OUT packed into OUT/kit-results.tgz (one file to bring back). Each step
# runs under a time limit (--step-timeout SECONDS, or FEDAUDIT_KIT_STEP_TIMEOUT; default 1800,
# 0 for none): a step past it is stopped with its processes and recorded as failed.
# With --shim it runs the same steps on a machine without a GPU, with the host shim (the
# kernels compiled as C++ and run on the CPU; needs g++) in place of the device; memcheck is
# then the parity subset under AddressSanitizer (racecheck and initcheck need a GPU).
#
# Usage: run.sh [--shim] [--out DIR] [--replicas LIST] [--cpu-replicas LIST] [--rounds N]
#               [--w2-replicas LIST] [--w2-cpu-replicas LIST] [--w2-rounds N]
#               [--w3-replicas LIST] [--w3-rounds N]
#               [--step-timeout SECONDS] [--sanitizers TOOLS] [--only STEPS]
#   LIST is comma-separated even replica counts. Defaults: GPU mode --replicas
#   64,1024,4096,16384 and the same for the CPU, W1's 20 rounds; W2 --w2-replicas
#   64,1024,4096 --w2-cpu-replicas 64,1024, W2's 10 rounds; W3 --w3-replicas 8,16,32,48 and 2
#   rounds (ResNet-18 takes about 2.6 GB a pair: 48 replicas fit 80 GB); shim mode --replicas 2
#   --cpu-replicas 64,1024 --rounds 1 --w2-replicas 2 --w2-cpu-replicas 2 --w2-rounds 1 (the
#   shim runs one CPU thread). TOOLS: the compute-sanitizer tools run as steps, of memcheck,
#   racecheck, initcheck, comma-separated (default all three; none for none). STEPS: run only
#   these steps, comma-separated (the others are recorded as skipped), e.g. on a short lease
#   --only gpu-info,parity,bench-gpu-w2,profile-w2.
# Exit status: 0 when every step that ran passed and the archive was written, 1 otherwise.
set -uo pipefail

KIT=$(cd "$(dirname "$0")" && pwd)
mode=gpu
out=
replicas=
cpu_replicas=
rounds=
w2_replicas=
w2_cpu_replicas=
w2_rounds=
w3_replicas=
w3_rounds=
step_timeout=${FEDAUDIT_KIT_STEP_TIMEOUT:-1800}
sanitizers=memcheck,racecheck,initcheck
only=
while [ $# -gt 0 ]; do
  case $1 in
    --shim) mode=shim ;;
    --out) out=$2; shift ;;
    --replicas) replicas=$2; shift ;;
    --cpu-replicas) cpu_replicas=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --w2-replicas) w2_replicas=$2; shift ;;
    --w2-cpu-replicas) w2_cpu_replicas=$2; shift ;;
    --w2-rounds) w2_rounds=$2; shift ;;
    --w3-replicas) w3_replicas=$2; shift ;;
    --w3-rounds) w3_rounds=$2; shift ;;
    --step-timeout) step_timeout=$2; shift ;;
    --sanitizers) sanitizers=$2; shift ;;
    --only) only=$2; shift ;;
    -h|--help) sed -n '2,/^[^#]/s/^#\( \|$\)//p' "$0"; exit 0 ;; # the comment at the top
    *) echo "run.sh: unknown argument $1 (see run.sh --help)" >&2; exit 2 ;;
  esac
  shift
done
case $step_timeout in
  ''|*[!0-9]*) echo "run.sh: --step-timeout takes whole seconds (0 for no limit), not '$step_timeout'" >&2; exit 2 ;;
esac
for tool in ${sanitizers//,/ }; do
  case $tool in
    memcheck|racecheck|initcheck|none) ;;
    *) echo "run.sh: --sanitizers takes memcheck, racecheck, initcheck or none, not '$tool'" >&2; exit 2 ;;
  esac
done
if [ "$mode" = gpu ]; then
  replicas=${replicas:-64,1024,4096,16384}
  cpu_replicas=${cpu_replicas:-$replicas}
  rounds=${rounds:-20}
  w2_replicas=${w2_replicas:-64,1024,4096}
  w2_cpu_replicas=${w2_cpu_replicas:-64,1024}
  w2_rounds=${w2_rounds:-10}
  w3_replicas=${w3_replicas:-8,16,32,48}
  w3_rounds=${w3_rounds:-2}
else
  replicas=${replicas:-2}
  cpu_replicas=${cpu_replicas:-64,1024}
  rounds=${rounds:-1}
  w2_replicas=${w2_replicas:-2}
  w2_cpu_replicas=${w2_cpu_replicas:-2}
  w2_rounds=${w2_rounds:-1}
fi
out=${out:-$PWD/gpu-kit-results-$(hostname -s 2>/dev/null || echo host)-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
: > "$out/steps.tsv"
rm -f "$out/bench.jsonl" "$out/kit-results.tgz"
cp "$KIT/COMMIT" "$out/COMMIT" 2>/dev/null || true
echo "gpu-kit: $mode mode, results in $out, steps limited to ${step_timeout} s each (0: no limit)"
if [ "$step_timeout" -gt 0 ] && ! command -v timeout > /dev/null 2>&1; then
  echo "gpu-kit: no 'timeout' command (coreutils): the steps run without a time limit" >&2
fi

# step, skip, lim (the time limit) and archive.
. "$KIT/steps.sh"
# Interrupted (Ctrl-C, or the batch system's TERM before it kills): pack what there is.
trap 'echo "gpu-kit: interrupted; packing what there is into $out/kit-results.tgz" >&2; archive; exit 130' INT TERM

export FEDAUDIT_BENCH_OUT="$out/bench.jsonl"
T="-test.count=1 -test.v -test.timeout=0"
# The parity subset memcheck (GPU) or ASan (shim) runs: every kind of kernel.
memsubset='^TestParity$/^(Axpby|Gather|SoftmaxXent|ClipExamples|ClipStep|Dots|ClipCoefs|AxpbyCoefs|Fused|HiddenStep|AddGaussian|MechNoise|Gemm|Im2col|Col2im|Pool|Transpose|GroupNorm|GroupNormGrad|ConvDirect|Winograd)$'
w1=(FEDAUDIT_BENCH_ROUNDS="$rounds")
w2=(FEDAUDIT_BENCH_ROUNDS="$w2_rounds")

if [ "$mode" = gpu ]; then
  gputest=$KIT/cuda-gpu.test
  gpu_info() {
    lim "$KIT/audit" gpu-info --json > "$out/gpu-info.json"
    local rc=$?
    lim "$KIT/audit" gpu-info
    return $rc
  }
  step gpu-info "driver, device, cuBLAS, PTX load" gpu_info
  # The CLI on the device, as a user runs it: `audit plan --backend gpu` times the training on
  # the GPU, and `audit run` reaches the same verdict with --backend gpu --devices all as with
  # the CPU backend (cli-gpu.yaml: exit status 3, the claim violated by a wide margin).
  cli_gpu() {
    local d=$out/cli-gpu rc mg mc
    rm -rf "$d" && mkdir -p "$d" || return 1
    lim "$KIT/audit" plan --config "$KIT/cli-gpu.yaml" --backend gpu --no-calibrate --no-cost --calibrate-time 2s --json > "$d/plan.json" || return 1
    if ! grep -q '"calibration"' "$d/plan.json"; then echo "cli-gpu: audit plan --backend gpu reported no GPU calibration"; return 1; fi
    grep -A6 '"calibration"' "$d/plan.json"
    for b in gpu cpu; do
      local devs=()
      [ $b = gpu ] && devs=(--devices all)
      lim "$KIT/audit" run --config "$KIT/cli-gpu.yaml" --out "$d/$b" --backend $b "${devs[@]}" --quiet > "$d/$b.txt" 2>&1
      rc=$?
      cat "$d/$b.txt"
      if [ $rc -ne 3 ]; then echo "cli-gpu: audit run --backend $b exited $rc, want 3 (claim violated)"; return 1; fi
      lim "$KIT/audit" analyze "$d/$b" --json > "$d/$b.json" 2> /dev/null
      [ $? -eq 3 ] || { echo "cli-gpu: audit analyze of the $b runs did not exit 3"; return 1; }
    done
    mg=$(grep -m1 '"mu_lower"' "$d/gpu.json" | sed 's/.*: *//; s/,.*//')
    mc=$(grep -m1 '"mu_lower"' "$d/cpu.json" | sed 's/.*: *//; s/,.*//')
    echo "cli-gpu: headline certified mu: gpu $mg, cpu $mc"
    awk -v a="$mg" -v b="$mc" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 0.05) }' ||
      { echo "cli-gpu: the certified mu differs by more than 0.05 between the backends"; return 1; }
  }
  step cli-gpu "audit plan and run on the GPU: same verdict as the CPU backend" cli_gpu
  STEP_DIR=$KIT step parity "every kernel and small runs vs the CPU backend" "$gputest" -test.run '^(TestParity|TestThisBinaryDoesNotLinkCublas)$' $T
  step w1-parity "W1, 3 rounds, 4 pairs vs the CPU backend" "$gputest" -test.run '^TestW1MatchesCPU$' $T
  step precision-drift "an audit in tf32 and bf16 vs fp32: parameters, certified mu" "$gputest" -test.run '^TestKitPrecisionDriftGPU$' $T
  step memory "device memory of W1, W2, W3 vs the estimate" "$gputest" -test.run '^TestKitMemoryGPU$' $T
  sanitizer=$(command -v compute-sanitizer || true)
  for d in "${CUDA_HOME:-}" /usr/local/cuda; do
    if [ -z "$sanitizer" ] && [ -n "$d" ] && [ -x "$d/bin/compute-sanitizer" ]; then sanitizer=$d/bin/compute-sanitizer; fi
  done
  # memcheck: out-of-bounds and misaligned accesses, and failed API calls (a CUDA error that
  # the backend ignores counts too); racecheck: shared-memory hazards (hidden_step is the one
  # kernel with shared memory and barriers); initcheck: reads of device memory never written.
  for tool in memcheck racecheck initcheck; do
    case ",$sanitizers," in *",$tool,"*) ;; *) skip "$tool" "not in --sanitizers"; continue ;; esac
    if [ -n "$sanitizer" ]; then
      # One sync per launch so that a report names its kernel; a subset (the tools are slow).
      step "$tool" "compute-sanitizer $tool, parity subset" env FEDAUDIT_CUDA_SYNC=1 "$sanitizer" --tool "$tool" --error-exitcode 1 \
        "$gputest" -test.run "$memsubset" $T
    else
      skip "$tool" "compute-sanitizer not found (PATH, CUDA_HOME, /usr/local/cuda)"
    fi
  done
  step bench-gpu "W1 on the device, R=$replicas, $rounds rounds" env "${w1[@]}" FEDAUDIT_BENCH_R="$replicas" "$gputest" -test.run '^TestKitBenchW1GPU$' $T
  step bench-gpu-graphs "W1 on the device with CUDA graphs, R=$replicas, $rounds rounds" env "${w1[@]}" FEDAUDIT_CUDA_GRAPHS=1 FEDAUDIT_BENCH_R="$replicas" "$gputest" -test.run '^TestKitBenchW1GPU$' $T
  step bench-gpu-hidden1024 "W1 on the device, hidden step in blocks of 1024, R=$replicas, $rounds rounds" env "${w1[@]}" FEDAUDIT_CUDA_HIDDENBLOCK=1024 FEDAUDIT_BENCH_R="$replicas" "$gputest" -test.run '^TestKitBenchW1GPU$' $T
  step bench-gpu-clientbatch1 "W1 on the device, a client at a time, R=$replicas, $rounds rounds" env "${w1[@]}" FEDAUDIT_CUDA_CLIENTBATCH=1 FEDAUDIT_BENCH_R="$replicas" "$gputest" -test.run '^TestKitBenchW1GPU$' $T
  step bench-gpu-tf32 "W1 on the device in TF32, R=$replicas, $rounds rounds" env "${w1[@]}" FEDAUDIT_BENCH_PRECISION=tf32 FEDAUDIT_BENCH_R="$replicas" "$gputest" -test.run '^TestKitBenchW1GPU$' $T
  step bench-gpu-bf16 "W1 on the device in bf16, R=$replicas, $rounds rounds" env "${w1[@]}" FEDAUDIT_BENCH_PRECISION=bf16 FEDAUDIT_BENCH_R="$replicas" "$gputest" -test.run '^TestKitBenchW1GPU$' $T
  step bench-cpu "W1 on the CPU backend, R=$cpu_replicas, $rounds rounds" env "${w1[@]}" FEDAUDIT_BENCH_R="$cpu_replicas" "$gputest" -test.run '^TestKitBenchW1CPU$' $T
  step bench-gpu-w2 "W2 on the device, R=$w2_replicas, $w2_rounds rounds" env "${w2[@]}" FEDAUDIT_BENCH_R="$w2_replicas" "$gputest" -test.run '^TestKitBenchW2GPU$' $T
  step bench-gpu-w2-tf32 "W2 on the device in TF32, R=$w2_replicas, $w2_rounds rounds" env "${w2[@]}" FEDAUDIT_BENCH_PRECISION=tf32 FEDAUDIT_BENCH_R="$w2_replicas" "$gputest" -test.run '^TestKitBenchW2GPU$' $T
  step bench-gpu-w2-bf16 "W2 on the device in bf16, R=$w2_replicas, $w2_rounds rounds" env "${w2[@]}" FEDAUDIT_BENCH_PRECISION=bf16 FEDAUDIT_BENCH_R="$w2_replicas" "$gputest" -test.run '^TestKitBenchW2GPU$' $T
  step bench-cpu-w2 "W2 on the CPU backend, R=$w2_cpu_replicas, $w2_rounds rounds" env "${w2[@]}" FEDAUDIT_BENCH_R="$w2_cpu_replicas" "$gputest" -test.run '^TestKitBenchW2CPU$' $T
  step bench-gpu-w3 "W3 on the device, R=$w3_replicas, $w3_rounds rounds" env FEDAUDIT_BENCH_ROUNDS="$w3_rounds" FEDAUDIT_BENCH_R="$w3_replicas" "$gputest" -test.run '^TestKitBenchW3GPU$' $T
  step bench-gpu-w2-rowgroup4 "W2 on the device, 4 threads a row of samples, R=$w2_replicas, $w2_rounds rounds" env "${w2[@]}" FEDAUDIT_CUDA_ROWGROUP=4 FEDAUDIT_BENCH_R="$w2_replicas" "$gputest" -test.run '^TestKitBenchW2GPU$' $T
  step bench-gpu-w2-rowgroup2 "W2 on the device, 2 threads a row of samples, R=$w2_replicas, $w2_rounds rounds" env "${w2[@]}" FEDAUDIT_CUDA_ROWGROUP=2 FEDAUDIT_BENCH_R="$w2_replicas" "$gputest" -test.run '^TestKitBenchW2GPU$' $T
  step bench-gpu-w3-rowgroup4 "W3 on the device, 4 threads a row of samples, R=$w3_replicas, $w3_rounds rounds" env FEDAUDIT_CUDA_ROWGROUP=4 FEDAUDIT_BENCH_ROUNDS="$w3_rounds" FEDAUDIT_BENCH_R="$w3_replicas" "$gputest" -test.run '^TestKitBenchW3GPU$' $T
  step bench-gpu-w2-launch1 "W2 on the device, light kernels launched as before, R=$w2_replicas, $w2_rounds rounds" env "${w2[@]}" FEDAUDIT_CUDA_ROWGROUP=32 FEDAUDIT_CUDA_LIGHTITEMS=1 FEDAUDIT_BENCH_R="$w2_replicas" "$gputest" -test.run '^TestKitBenchW2GPU$' $T
  step bench-gpu-w3-launch1 "W3 on the device, light kernels launched as before, R=$w3_replicas, $w3_rounds rounds" env FEDAUDIT_CUDA_ROWGROUP=32 FEDAUDIT_CUDA_LIGHTITEMS=1 FEDAUDIT_BENCH_ROUNDS="$w3_rounds" FEDAUDIT_BENCH_R="$w3_replicas" "$gputest" -test.run '^TestKitBenchW3GPU$' $T
  step bench-gpu-w2-splitk "W2 on the device with split products, R=$w2_replicas, $w2_rounds rounds" env "${w2[@]}" FEDAUDIT_CUDA_SPLITK=1 FEDAUDIT_BENCH_R="$w2_replicas" "$gputest" -test.run '^TestKitBenchW2GPU$' $T
  step bench-gpu-w3-tf32 "W3 on the device in tf32, R=$w3_replicas, $w3_rounds rounds" env FEDAUDIT_BENCH_PRECISION=tf32 FEDAUDIT_BENCH_ROUNDS="$w3_rounds" FEDAUDIT_BENCH_R="$w3_replicas" "$gputest" -test.run '^TestKitBenchW3GPU$' $T
  step bench-gpu-w3-biascopies "W3 on the device with the weights copied beside the bias, R=$w3_replicas, $w3_rounds rounds" env FEDAUDIT_CUDA_BIASCOPIES=1 FEDAUDIT_BENCH_ROUNDS="$w3_rounds" FEDAUDIT_BENCH_R="$w3_replicas" "$gputest" -test.run '^TestKitBenchW3GPU$' $T
  step bench-gpu-w3-patches "W3 on the device with every convolution by its patches, R=$w3_replicas, $w3_rounds rounds" env FEDAUDIT_CUDA_PATCHCONV=1 FEDAUDIT_BENCH_ROUNDS="$w3_rounds" FEDAUDIT_BENCH_R="$w3_replicas" "$gputest" -test.run '^TestKitBenchW3GPU$' $T
  step bench-gpu-w3-winograd2 "W3 on the device by Winograd's F(2x2, 3x3), R=$w3_replicas, $w3_rounds rounds" env FEDAUDIT_CUDA_WINOGRAD2=1 FEDAUDIT_BENCH_ROUNDS="$w3_rounds" FEDAUDIT_BENCH_R="$w3_replicas" "$gputest" -test.run '^TestKitBenchW3GPU$' $T
  step bench-gpu-w3-splitk "W3 on the device with split products, R=$w3_replicas, $w3_rounds rounds" env FEDAUDIT_CUDA_SPLITK=1 FEDAUDIT_BENCH_ROUNDS="$w3_rounds" FEDAUDIT_BENCH_R="$w3_replicas" "$gputest" -test.run '^TestKitBenchW3GPU$' $T
  step profile-w1 "W1 profiled on the device, R=64,4096, 2 rounds" env FEDAUDIT_CUDA_PROFILE=1 FEDAUDIT_BENCH_ROUNDS=2 FEDAUDIT_BENCH_R=64,4096 "$gputest" -test.run '^TestKitBenchW1GPU$' $T
  step profile-w2 "W2 profiled on the device, R=64,1024, 1 round" env FEDAUDIT_CUDA_PROFILE=1 FEDAUDIT_BENCH_ROUNDS=1 FEDAUDIT_BENCH_R=64,1024 "$gputest" -test.run '^TestKitBenchW2GPU$' $T
  step bench-gpu-w2-patches "W2 on the device with every convolution by its patches, R=$w2_replicas, $w2_rounds rounds" env "${w2[@]}" FEDAUDIT_CUDA_PATCHCONV=1 FEDAUDIT_BENCH_R="$w2_replicas" "$gputest" -test.run '^TestKitBenchW2GPU$' $T
  step bench-gpu-w2-dwrows2 "W2 on the device, weight gradient by conv_direct_dw_win2, R=$w2_replicas, $w2_rounds rounds" env "${w2[@]}" FEDAUDIT_CUDA_DWROWS=2 FEDAUDIT_BENCH_R="$w2_replicas" "$gputest" -test.run '^TestKitBenchW2GPU$' $T
  step bench-gpu-w2-dwrows4 "W2 on the device, weight gradient by conv_direct_dw_win4, R=$w2_replicas, $w2_rounds rounds" env "${w2[@]}" FEDAUDIT_CUDA_DWROWS=4 FEDAUDIT_BENCH_R="$w2_replicas" "$gputest" -test.run '^TestKitBenchW2GPU$' $T
  step profile-w2-patches "W2 profiled on the device with every convolution by its patches, R=64,1024, 1 round" env FEDAUDIT_CUDA_PROFILE=1 FEDAUDIT_CUDA_PATCHCONV=1 FEDAUDIT_BENCH_ROUNDS=1 FEDAUDIT_BENCH_R=64,1024 "$gputest" -test.run '^TestKitBenchW2GPU$' $T
  step profile-w3 "W3 profiled on the device, R=8, 1 round" env FEDAUDIT_CUDA_PROFILE=1 FEDAUDIT_BENCH_ROUNDS=1 FEDAUDIT_BENCH_R=8 "$gputest" -test.run '^TestKitBenchW3GPU$' $T
  step profile-w3-patches "W3 profiled on the device with every convolution by its patches, R=8, 1 round" env FEDAUDIT_CUDA_PROFILE=1 FEDAUDIT_CUDA_PATCHCONV=1 FEDAUDIT_BENCH_ROUNDS=1 FEDAUDIT_BENCH_R=8 "$gputest" -test.run '^TestKitBenchW3GPU$' $T
  step profile-w3-winograd2 "W3 profiled on the device by Winograd's F(2x2, 3x3), R=8, 1 round" env FEDAUDIT_CUDA_PROFILE=1 FEDAUDIT_CUDA_WINOGRAD2=1 FEDAUDIT_BENCH_ROUNDS=1 FEDAUDIT_BENCH_R=8 "$gputest" -test.run '^TestKitBenchW3GPU$' $T
  summarizer=$gputest
else
  shimtest=$KIT/shim.test
  shimdir=$KIT/src/cuda/hostshim
  # The gpu-tagged audit cannot start without a GPU (gorgonia.org/cu exits at start-up); the
  # step records that it says so and exits nonzero, which is the expected outcome here.
  gpu_info_shim() {
    lim "$KIT/audit" gpu-info --json > "$out/gpu-info.json" 2>&1
    local rc=$?
    cat "$out/gpu-info.json"
    if [ $rc -eq 0 ]; then echo "unexpected: gpu-info succeeded in --shim mode"; return 1; fi
    echo "exit $rc without a GPU, as expected"
    rm -f "$out/gpu-info.json"
  }
  step gpu-info "shim mode: the gpu build must refuse to run without a GPU" gpu_info_shim
  skip cli-gpu "needs a GPU (the gpu build of audit exits without one)"
  STEP_DIR=$shimdir step parity "every kernel and small runs vs the CPU backend, on the shim" "$shimtest" \
    -test.run '^(TestParity|TestShimKnowsEveryKernel|TestIndexArithmeticBeyond32Bits|TestMixedRadixIndex|TestConvLaunchCounts|TestGemmBatchIsSplit|TestSyncEachLaunch)$' $T
  STEP_DIR=$shimdir step w1-parity "W1, 1 round, 1 pair vs the CPU backend, on the shim" "$shimtest" -test.run '^TestW1MatchesCPU$' $T
  STEP_DIR=$shimdir step precision-drift "an audit in tf32 and bf16 vs fp32, on the shim's model of them" "$shimtest" -test.run '^TestReducedPrecisionMovesTheAuditLittle$' $T
  STEP_DIR=$shimdir step memory "device memory vs the estimate, on the shim" "$shimtest" \
    -test.run '^(TestW1MemoryPerPair|TestDeviceMemoryEstimateOfCNNs|TestDeviceMemoryEstimateWithWinograd|TestNNDeviceMemoryIsTheShimsPeak|TestTrainInGroupsFreesTheDevice)$' $T
  asan=$(${CXX:-g++} -print-file-name=libasan.so 2>/dev/null || true)
  if [ -n "$asan" ] && [ -e "$asan" ]; then
    # The parity subset, then a deliberate out-of-bounds write that ASan must catch.
    shim_asan() {
      lim env FEDAUDIT_SHIM_ASAN=1 LD_PRELOAD="$asan" ASAN_OPTIONS=detect_leaks=0 "$shimtest" \
        -test.run "$memsubset" $T &&
        lim env FEDAUDIT_SHIM_ASAN=1 LD_PRELOAD="$asan" ASAN_OPTIONS=detect_leaks=0 "$shimtest" \
          -test.run '^TestASanCatchesOutOfBounds$' $T
    }
    STEP_DIR=$shimdir step memcheck "AddressSanitizer in place of compute-sanitizer: parity subset on the shim" shim_asan
  else
    skip memcheck "no libasan for ${CXX:-g++}"
  fi
  skip racecheck "needs a GPU (compute-sanitizer)"
  skip initcheck "needs a GPU (compute-sanitizer)"
  STEP_DIR=$shimdir step bench-gpu "W1 on the host shim in place of the device, R=$replicas, $rounds rounds" env "${w1[@]}" FEDAUDIT_BENCH_R="$replicas" "$shimtest" -test.run '^TestKitBenchW1Shim$' $T
  step bench-cpu "W1 on the CPU backend, R=$cpu_replicas, $rounds rounds" env "${w1[@]}" FEDAUDIT_BENCH_R="$cpu_replicas" "$shimtest" -test.run '^TestKitBenchW1CPU$' $T
  STEP_DIR=$shimdir step bench-gpu-w2 "W2 on the host shim in place of the device, R=$w2_replicas, $w2_rounds rounds" env "${w2[@]}" FEDAUDIT_BENCH_R="$w2_replicas" "$shimtest" -test.run '^TestKitBenchW2Shim$' $T
  STEP_DIR=$shimdir step bench-gpu-w2-patches "W2 with every convolution by its patches on the host shim, R=$w2_replicas, $w2_rounds rounds" env "${w2[@]}" FEDAUDIT_CUDA_PATCHCONV=1 FEDAUDIT_BENCH_R="$w2_replicas" "$shimtest" -test.run '^TestKitBenchW2Shim$' $T
  step bench-cpu-w2 "W2 on the CPU backend, R=$w2_cpu_replicas, $w2_rounds rounds" env "${w2[@]}" FEDAUDIT_BENCH_R="$w2_cpu_replicas" "$shimtest" -test.run '^TestKitBenchW2CPU$' $T
  STEP_DIR=$shimdir step profile-w1 "W1 profiled on the host shim, R=2, 1 round" env FEDAUDIT_CUDA_PROFILE=1 FEDAUDIT_BENCH_ROUNDS=1 FEDAUDIT_BENCH_R=2 "$shimtest" -test.run '^TestKitBenchW1Shim$' $T
  summarizer=$shimtest
fi

step_deadline=$((SECONDS + 120)) # the summary reads the files above: seconds
# In a subshell, as every step: an interrupt during the summary still reaches the trap above.
if (FEDAUDIT_KIT_DIR="$out" FEDAUDIT_KIT_MODE="$mode" lim "$summarizer" -test.run '^TestKitSummary$' -test.count=1) > "$out/summary.log" 2>&1; then
  echo "gpu-kit: summary in $out/summary.md and $out/summary.json"
else
  echo "gpu-kit: writing the summary failed, see $out/summary.log" >&2
  failed=1
fi
step_deadline=0
if grep -q "$(printf '\tFAIL\t')" "$out/steps.tsv"; then failed=1; fi
if archive; then
  echo "gpu-kit: everything in $out/kit-results.tgz"
else
  echo "gpu-kit: packing $out/kit-results.tgz failed" >&2
  failed=1
fi
if [ $failed -ne 0 ]; then
  echo "gpu-kit: some steps FAILED (see $out/steps.tsv)" >&2
  exit 1
fi
echo "gpu-kit: every step that ran passed"
