#!/bin/bash
# submit.sh CONFIG OUT N [extra sbatch args...]
#
# Submits an audit to Slurm as two jobs: an array of N tasks that train the N shards
# (train-array.sbatch), and a job that attacks, analyzes and reports once all of them succeeded
# (finish.sbatch, --dependency=afterok). Extra arguments go to both sbatch calls (for example
# --partition=gpu --time=2:00:00; GPUs with GPUS=1, below). Logs go to OUT/logs/. Prints the
# job ids and the copy of the config the jobs read as
#   train_job=ID
#   finish_job=ID
#   config=OUT/logs/config-TIME-PID.yaml
# The audit binary is $AUDIT, or audit on PATH; it must be reachable from every node.
# SEQUENTIAL=1 submits a sequential run (docs/cluster.md): the array's tasks stop training once
# a look certifies a violation, and the finish job is audit run --sequential.
# GPUS=1 trains on GPUs: each array task asks for one (--gres=gpu:1; Slurm's CUDA_VISIBLE_DEVICES
# makes it device 0) and runs audit train --backend gpu, which needs a binary built with -tags
# gpu. A shard trains on one device, so a node with several GPUs runs several tasks at once.
# MEMORY=SIZE (e.g. 64GiB) is the memory of a compute node's task for the check below, which
# otherwise takes this (login) node's MemAvailable; give the --mem you ask Slurm for.
# The extra arguments may not hold --dependency, --export, --array, --output or --error (nor
# their short forms or abbreviations): sbatch keeps the last of a repeated option, so they would
# replace the finish job's wait on the array, the variables the scripts read, the array's range
# (the finish job would become an array of finish jobs) or the log files of each task.
# The config is copied to OUT/logs/config-TIME-PID.yaml, and the jobs read that copy: an edit of
# CONFIG after submission (a claim changed while the array waits in the queue) changes neither
# what the array trains nor what the finish job judges. The copy is printed as config=PATH.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 CONFIG OUT N [extra sbatch args...]" >&2
  exit 2
fi
config=$1 out=$2 shards=$3
shift 3
case $shards in
  # A leading zero reads as octal in bash's arithmetic and Go's flags (010 is 8 shards).
  ''|*[!0-9]*|0*) echo "submit.sh: N must be a positive integer without leading zeros, got '$shards'" >&2; exit 2 ;;
esac
for arg in "$@"; do
  # sbatch takes a long option by any unambiguous prefix (--dep, --exp, --arr, --out, --err)
  # and a short one with its value attached (-dafterany:1, -a0-3, -olog).
  case $arg in
    --dep*|-d*|--exp*|--ar*|-a*|--ou*|-o*|--er*|-e*)
      echo "submit.sh: $arg: submit.sh sets --dependency (the finish job waits for the array), --export (the scripts read CONFIG, OUT, SHARDS, AUDIT), --array (0 to N-1) and --output (OUT/logs) itself; sbatch keeps the last of a repeated option, so yours would replace them" >&2
      exit 2 ;;
  esac
done
case ${SEQUENTIAL:-0} in
  0|1) ;;
  *) echo "submit.sh: SEQUENTIAL must be 0 or 1, got '$SEQUENTIAL'" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
[ -r "$config" ] || { echo "submit.sh: cannot read config $config" >&2; exit 2; }
config=$(realpath "$config")
mkdir -p "$out/logs"
out=$(realpath "$out")
audit=${AUDIT:-$(command -v audit || true)}
[ -n "$audit" ] || { echo "submit.sh: no audit binary: set AUDIT or put audit on PATH" >&2; exit 2; }
audit=$(realpath "$audit")
gpu=()
case ${GPUS:-} in
  '') ;;
  1) gpu=(--gres=gpu:1); export BACKEND=gpu ;;
  *) echo "submit.sh: GPUS must be 1 (a shard trains on one GPU; Slurm runs one task per GPU), got '$GPUS'" >&2; exit 2 ;;
esac
submitted="$out/logs/config-$(date -u +%Y%m%dT%H%M%SZ)-$$.yaml"
cp "$config" "$submitted"
# Fail here, not in N array tasks, when the config does not load (or, with SEQUENTIAL=1, when
# its tasks would refuse the shard count), cannot fit the memory of a task, asks for a precision
# the tasks' backend cannot give or a backend the binary lacks, or when OUT holds another
# training or another shard layout: what each task's audit train would refuse at its start.
check=(--config "$submitted" --shards "$shards" --quiet)
if [ "${SEQUENTIAL:-0}" = 1 ]; then check+=(--sequential); fi
if [ -n "${MEMORY:-}" ]; then check+=(--memory "$MEMORY"); fi
status=0
"$audit" plan "${check[@]}" --no-calibrate --no-cost >/dev/null &&
  "$audit" train "${check[@]}" --out "$out" --backend "${BACKEND:-auto}" --check >/dev/null || status=$?
if [ "$status" != 0 ]; then
  # A refused submission leaves nothing: the copy, and the folders made for it if now empty.
  rm -f "$submitted"
  rmdir "$out/logs" "$out" 2>/dev/null || true
  if [ "$status" = 127 ]; then
    # A build with -tags gpu links the NVIDIA driver's libcuda.so.1 and cannot start without it.
    echo "submit.sh: $audit cannot start on this node (exit 127; a build with -tags gpu needs the NVIDIA driver's libcuda.so.1): run submit.sh on a node with the driver (docs/cluster.md)" >&2
  fi
  exit "$status"
fi

export CONFIG=$submitted OUT=$out SHARDS=$shards AUDIT=$audit
train=$(sbatch --parsable --export=ALL --array="0-$((shards - 1))" \
  --output="$out/logs/train-%A_%a.out" ${gpu[@]+"${gpu[@]}"} "$@" "$here/train-array.sbatch")
train=${train%%;*}
finish=$(sbatch --parsable --export=ALL --dependency="afterok:$train" --kill-on-invalid-dep=yes \
  --output="$out/logs/finish-%j.out" "$@" "$here/finish.sbatch")
finish=${finish%%;*}
echo "train_job=$train"
echo "finish_job=$finish"
echo "config=$submitted"
