# steps.sh: the validation kit's step runner, sourced by run.sh (and by cuda/kit_test.go, which
# drives it with fake steps). Needs bash; `timeout` from coreutils for the time limits.
#
# The caller sets: out (the results folder), step_timeout (seconds per step; 0: no limit) and
# only (empty, or the steps to run, comma-separated).
# Each step's output goes to OUT/NAME.log and its outcome to a line of OUT/steps.tsv:
# NAME, pass | FAIL | skipped, seconds, note. A step that runs past its limit is stopped with
# all its processes (TERM, then KILL 30 s later) and recorded as FAIL, "timed out after N s".

failed=0
step_deadline=0

# lim CMD...: runs CMD within what is left of the current step's time limit, in a process group
# of its own that is killed whole when the time is up (a test binary and the compute-sanitizer
# or subprocesses it started). Exit status 124 (or 137 after the KILL) when it timed out.
# Steps that are shell functions run each of their commands through lim.
lim() {
  if [ "${step_timeout:-0}" -le 0 ] || [ "$step_deadline" -le 0 ]; then
    "$@"
    return
  fi
  local left=$((step_deadline - SECONDS))
  if [ $left -le 0 ]; then
    echo "kit: the step's time limit (${step_timeout} s) was reached before: $*"
    return 124
  fi
  if ! command -v timeout > /dev/null 2>&1; then
    "$@"
    return
  fi
  # Not --foreground: timeout makes its own process group and signals all of it. That group
  # does not get the terminal's Ctrl-C, so an interrupt is passed on to it here (and the shell
  # lim runs in exits 130: run lim in a subshell, as step does, where the caller's own trap
  # must run on an interrupt). The caller's traps are restored afterwards.
  local pid rc prev
  prev=$(trap -p INT TERM)
  timeout --kill-after=30 "$left" "$@" &
  pid=$!
  trap 'kill -TERM "$pid" 2> /dev/null; wait "$pid"; exit 130' INT TERM
  wait "$pid"
  rc=$?
  trap - INT TERM
  eval "$prev"
  return $rc
}

# step NAME NOTE CMD...: runs CMD (a command, or a shell function whose commands use lim) in the
# directory STEP_DIR, if set, with its output in NAME.log, under the step time limit, and
# records pass or FAIL.
# With only set (run.sh --only), a step not in that comma-separated list is recorded as skipped.
step() {
  local name=$1 note=$2
  shift 2
  if [ -n "${only:-}" ]; then
    case ",$only," in *",$name,"*) ;; *) skip "$name" "not in --only"; return 0 ;; esac
  fi
  local start=$SECONDS rc
  echo "== $name: $*"
  if [ "${step_timeout:-0}" -gt 0 ]; then step_deadline=$((SECONDS + step_timeout)); else step_deadline=0; fi
  if [ "$(type -t "$1")" = function ]; then
    (cd "${STEP_DIR:-.}" && "$@") < /dev/null > "$out/$name.log" 2>&1
  else
    (cd "${STEP_DIR:-.}" && lim "$@") < /dev/null > "$out/$name.log" 2>&1
  fi
  rc=$?
  local took=$((SECONDS - start))
  step_deadline=0
  local status=pass
  if [ $rc -ne 0 ]; then
    status=FAIL
    failed=1
    if [ "${step_timeout:-0}" -gt 0 ] && { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && [ $took -ge "$step_timeout" ]; then
      note="timed out after $took s (step limit ${step_timeout} s, --step-timeout); see $name.log. $note"
      echo "kit: $name stopped: past its time limit of ${step_timeout} s" >> "$out/$name.log"
    else
      note="exit $rc; see $name.log. $note"
    fi
  fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$took" "$note" >> "$out/steps.tsv"
  echo "   $status ($took s)"
  tail -n 3 "$out/$name.log" | sed 's/^/   | /'
}

skip() {
  printf '%s\tskipped\t0\t%s\n' "$1" "$2" >> "$out/steps.tsv"
  echo "== $1: skipped ($2)"
}

# archive writes OUT/kit-results.tgz: everything in OUT (logs, steps.tsv, bench.jsonl,
# gpu-info.json, summary.md and summary.json), under a folder named like OUT, so that the
# results come back from a batch node as one file.
archive() {
  local parent base tmp
  parent=$(dirname "$out")
  base=$(basename "$out")
  tmp=$(mktemp "${TMPDIR:-/tmp}/kit-results.XXXXXX") || return 1
  if tar -czf "$tmp" --exclude="$base/kit-results.tgz" -C "$parent" "$base" && mv -f "$tmp" "$out/kit-results.tgz"; then
    chmod 644 "$out/kit-results.tgz"
    return 0
  fi
  rm -f "$tmp"
  return 1
}
