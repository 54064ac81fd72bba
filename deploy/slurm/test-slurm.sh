#!/bin/bash
# test-slurm.sh: end-to-end test of the Slurm deployment on a real, single-node Slurm.
#
# Starts slurmctld and slurmd on localhost (Debian's slurm-wlm, installed when missing; no munge:
# auth/none), builds audit, submits a 4-task array audit of a small config with submit.sh, waits
# for both jobs, and checks that the result equals a one-process `audit run` of the same config:
# the run rows bit for bit (runsdiff), findings.json and `audit analyze --json` byte for byte.
# The daemons are stopped by process id on exit. Needs root (slurmd runs jobs as root here).
#
# Usage: deploy/slurm/test-slurm.sh   (from anywhere; exit 0 on success)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
here="$repo/deploy/slurm"
timeout_s=${SLURM_TEST_TIMEOUT:-300}
shards=4

log() { echo "test-slurm: $*"; }
die() { echo "test-slurm: FAIL: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root to run slurmd (and to install slurm-wlm)"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null; then
  log "installing slurm-wlm"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq slurm-wlm >/dev/null
fi
log "$(slurmctld -V)"

work=$(mktemp -d /tmp/fedaudit-slurm.XXXXXX)
ctld_pid="" slurmd_pid=""
dump_logs() {
  for f in "$work"/slurmctld.log "$work"/slurmd.log "$work"/slurmctld.out "$work"/slurmd.out "$work"/cluster/logs/*.out; do
    [ -f "$f" ] || continue
    echo "----- $f (last 40 lines)" >&2
    tail -n 40 "$f" >&2
  done
}
cleanup() {
  rc=$?
  if [ $rc -ne 0 ]; then
    dump_logs
  fi
  # Cancel what is still queued or running (the cluster is this test's own), so no job step
  # outlives the daemons.
  if [ -n "$ctld_pid" ] && kill -0 "$ctld_pid" 2>/dev/null; then
    jobs=$(squeue -h -o '%F' 2>/dev/null | sort -u | tr '\n' ' ')
    if [ -n "$jobs" ]; then
      scancel $jobs 2>/dev/null || true
      sleep 2
    fi
  fi
  for p in $slurmd_pid $ctld_pid; do
    kill "$p" 2>/dev/null || true
  done
  for p in $slurmd_pid $ctld_pid; do
    wait "$p" 2>/dev/null || true
  done
  if [ $rc -eq 0 ] && [ -z "${SLURM_TEST_KEEP:-}" ]; then
    rm -rf "$work"
  else
    log "files kept in $work"
  fi
  exit $rc
}
trap cleanup EXIT

# Ports away from the defaults, so a Slurm already on the machine is not disturbed.
port=$((20000 + RANDOM % 20000))
mkdir -p "$work/state" "$work/spool"
cat > "$work/slurm.conf" <<CONF
ClusterName=fedaudit-test
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=3600
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
NodeName=localhost CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$work/slurm.conf"

log "building audit"
export PATH="/usr/local/go/bin:$PATH"
(cd "$repo" && go build -o "$work/bin/audit" ./cmd/audit && go build -o "$work/bin/runsdiff" ./deploy/internal/runsdiff)

log "starting slurmctld and slurmd (port $port)"
slurmctld -D -i >"$work/slurmctld.out" 2>&1 &
ctld_pid=$!
slurmd -D -N localhost >"$work/slurmd.out" 2>&1 &
slurmd_pid=$!
for i in $(seq 1 60); do
  if sinfo -h -N -o '%t' 2>/dev/null | grep -qx 'idle'; then
    break
  fi
  kill -0 "$ctld_pid" 2>/dev/null || die "slurmctld exited"
  kill -0 "$slurmd_pid" 2>/dev/null || die "slurmd exited"
  [ "$i" -lt 60 ] || die "the node did not become idle in 30 s: $(sinfo 2>&1)"
  sleep 0.5
done
log "cluster up: $(sinfo -h -o '%P %a %D %t')"

job_state() { scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | sort -u | tr '\n' ' '; }
# submit_and_wait submits the array with submit.sh and waits for both jobs to complete; it
# sets train_job and finish_job.
train_job="" finish_job=""
submit_and_wait() {
  local ids deadline st j
  ids=$(AUDIT="$work/bin/audit" "$here/submit.sh" "$config" "$work/cluster" "$shards")
  echo "$ids"
  train_job=$(echo "$ids" | sed -n 's/^train_job=//p')
  finish_job=$(echo "$ids" | sed -n 's/^finish_job=//p')
  [ -n "$train_job" ] && [ -n "$finish_job" ] || die "submit.sh printed no job ids"
  log "waiting for jobs $train_job (array) and $finish_job (finish), at most ${timeout_s}s"
  deadline=$((SECONDS + timeout_s))
  while squeue -h -j "$train_job,$finish_job" 2>/dev/null | grep -q .; do
    [ $SECONDS -lt $deadline ] || { squeue >&2; die "jobs still queued after ${timeout_s}s"; }
    sleep 2
  done
  for j in "$train_job" "$finish_job"; do
    st=$(job_state "$j")
    log "job $j: $st"
    [ "$st" = "JobState=COMPLETED " ] || die "job $j did not complete: $st"
  done
}

# A small config: the CLI golden test's experiment with more pairs, so shards hold several.
config="$work/small.yaml"
sed 's/^pairs: .*/pairs: 24/' "$repo/cmd/audit/testdata/run_small.yaml" > "$config"

log "submitting a $shards-task array"
submit_and_wait
# The reference: a one-process run of the same config.
"$work/bin/audit" run --quiet --config "$config" --out "$work/single" >/dev/null

log "comparing with the one-process run"
"$work/bin/audit" status "$work/cluster" --shards "$shards"
[ "$(ls "$work/cluster/runs" | grep -c '\.arrow$')" = "$shards" ] || die "expected $shards run files"
"$work/bin/runsdiff" "$work/single" "$work/cluster"
cmp "$work/single/findings.json" "$work/cluster/findings.json" || die "findings.json differ"
"$work/bin/audit" analyze --quiet --json "$work/single" > "$work/single-analysis.json"
cmp "$work/single-analysis.json" "$work/cluster/analysis.json" || die "analyze --json outputs differ"
n=$(grep -c '"mu_lower"' "$work/cluster/findings.json" || true)
[ "$n" -ge 1 ] || die "findings.json holds no findings"
log "findings.json: $n findings, identical"

# A shard cut short on disk, then the same submission again: the array retrains only that
# shard (the others are skipped), and the result is unchanged.
victim="$work/cluster/runs/runs-00002-of-0000$shards.arrow"
head -c 500 "$victim" > "$work/cut" && cat "$work/cut" > "$victim"
if "$work/bin/audit" status --quiet "$work/cluster" --shards "$shards" >/dev/null 2>&1; then
  die "status passed a cut shard"
fi
log "resubmitting after cutting $(basename "$victim")"
submit_and_wait
grep -q "already complete" "$work/cluster/logs/train-${train_job}_0.out" || die "the rerun did not skip the complete shard 0"
grep -q "shard 2/$shards written" "$work/cluster/logs/train-${train_job}_2.out" || die "the rerun did not retrain the cut shard 2"
"$work/bin/runsdiff" "$work/single" "$work/cluster"
cmp "$work/single/findings.json" "$work/cluster/findings.json" || die "findings.json differ after the rerun"
log "PASS: $shards-shard Slurm array audit equals the one-process run, also after a repaired shard"

# A sequential run of a deployment far from its claim (SEQUENTIAL=1): the first look (shard 0 of
# 8) certifies the violation, the array's later tasks train nothing, and the finish job
# (audit run --sequential) ends with status 3 on the analysis of that look's 25 pairs.
log "submitting a sequential 8-task array of a leaky deployment"
ids=$(SEQUENTIAL=1 AUDIT="$work/bin/audit" "$here/submit.sh" "$repo/cmd/audit/testdata/sequential_leaky.yaml" "$work/seq" 8)
echo "$ids"
train_job=$(echo "$ids" | sed -n 's/^train_job=//p')
finish_job=$(echo "$ids" | sed -n 's/^finish_job=//p')
deadline=$((SECONDS + timeout_s))
while squeue -h -j "$train_job,$finish_job" 2>/dev/null | grep -q .; do
  [ $SECONDS -lt $deadline ] || { squeue >&2; die "sequential jobs still queued after ${timeout_s}s"; }
  sleep 2
done
st=$(job_state "$train_job")
[ "$st" = "JobState=COMPLETED " ] || die "sequential array did not complete: $st"
scontrol show job "$finish_job" | grep -q 'ExitCode=3:0' || die "the sequential finish job did not exit 3: $(scontrol show job "$finish_job" | grep -o 'JobState=[A-Z_]* .*ExitCode=[0-9:]*')"
grep -q '"stopped": true' "$work/seq/sequential.json" || die "sequential.json records no stop: $(cat "$work/seq/sequential.json")"
trained=$(ls "$work/seq/runs" | grep -c '\.arrow$' || true)
[ "$trained" -lt 8 ] || die "all 8 shards trained: the array did not stop"
grep -l "is not needed" "$work/seq/logs/"train-*.out >/dev/null || die "no task skipped its shard"
grep -q "25 of 200 pairs" "$work/seq/report.md" || die "the report is not the first look's"
log "PASS: the sequential array stopped after the first look ($trained of 8 shards trained, the finish job exited 3)"
