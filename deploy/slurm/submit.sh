#!/bin/bash
# submit.sh CONFIG OUT N [extra sbatch args...]
#
# Submits an audit to Slurm as two jobs: an array of N tasks that train the N shards
# (train-array.sbatch), and a job that attacks, analyzes and reports once all of them succeeded
# (finish.sbatch, --dependency=afterok). Extra arguments go to both sbatch calls (for example
# --partition=gpu --gres=gpu:1 --time=2:00:00). Logs go to OUT/logs/. Prints the job ids as
#   train_job=ID
#   finish_job=ID
# The audit binary is $AUDIT, or audit on PATH; it must be reachable from every node.
# SEQUENTIAL=1 submits a sequential run (docs/cluster.md): the array's tasks stop training once
# a look certifies a violation, and the finish job is audit run --sequential.
# GPUS=1 trains on GPUs: each array task asks for one (--gres=gpu:1; Slurm's CUDA_VISIBLE_DEVICES
# makes it device 0) and runs audit train --backend gpu, which needs a binary built with -tags
# gpu. A shard trains on one device, so a node with several GPUs runs several tasks at once.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 CONFIG OUT N [extra sbatch args...]" >&2
  exit 2
fi
config=$1 out=$2 shards=$3
shift 3
case $shards in
  ''|*[!0-9]*|0) echo "submit.sh: N must be a positive integer, got '$shards'" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
[ -r "$config" ] || { echo "submit.sh: cannot read config $config" >&2; exit 2; }
config=$(realpath "$config")
mkdir -p "$out/logs"
out=$(realpath "$out")
audit=${AUDIT:-$(command -v audit || true)}
[ -n "$audit" ] || { echo "submit.sh: no audit binary: set AUDIT or put audit on PATH" >&2; exit 2; }
audit=$(realpath "$audit")
# Fail here, not in N array tasks, when the config does not load.
"$audit" plan --config "$config" --shards "$shards" --no-calibrate --quiet >/dev/null

gpu=()
case ${GPUS:-} in
  '') ;;
  1) gpu=(--gres=gpu:1); export BACKEND=gpu ;;
  *) echo "submit.sh: GPUS must be 1 (a shard trains on one GPU; Slurm runs one task per GPU), got '$GPUS'" >&2; exit 2 ;;
esac

export CONFIG=$config OUT=$out SHARDS=$shards AUDIT=$audit
train=$(sbatch --parsable --export=ALL --array="0-$((shards - 1))" \
  --output="$out/logs/train-%A_%a.out" ${gpu[@]+"${gpu[@]}"} "$@" "$here/train-array.sbatch")
train=${train%%;*}
finish=$(sbatch --parsable --export=ALL --dependency="afterok:$train" --kill-on-invalid-dep=yes \
  --output="$out/logs/finish-%j.out" "$@" "$here/finish.sbatch")
finish=${finish%%;*}
echo "train_job=$train"
echo "finish_job=$finish"
