#!/usr/bin/env bash
# Mutation testing of the verified designs (designs/MUTATIONS.md).
#
# Each designs/mutants/NN-name.patch is a small change to the design code
# (designs/src/...) that re-introduces a known kernel bug or drops an
# ordering. For each one this script applies the patch to a scratch copy of
# the current working tree, builds, and runs the designs' suites; a suite
# that fails (or hangs past the timeout) has caught the mutation.
#
#   scripts/mutants.sh                  every mutant
#   scripts/mutants.sh 07               one mutant (by number or name part;
#                                       an extended regex: '0[1-5]|srcu')
#   scripts/mutants.sh --list           the mutants and what they mirror
#   scripts/mutants.sh --markdown FILE  also write the result table as Markdown
#
# Environment: MUTANTS_DIR (scratch directory, default $TMPDIR/blocksim-mutants;
# its target/ is kept between runs, so a second run only rebuilds the designs
# crate), MUTANTS_TIMEOUT (seconds per suite, default 600).
#
# Results: caught (a test failed: the first failing test and the invariant
# message from its output), caught (hang) (a suite ran past the timeout),
# missed (every suite passed), stale (the patch no longer applies, or the
# mutated code does not build: rewrite the patch against the current code).
#
# The suites: the designs crate's unit tests and the four model-checking
# suites (tests/concurrency/loom_btree.rs, tests/concurrency/shuttle_btree.rs, tests/concurrency/loom_inflight.rs,
# tests/concurrency/shuttle_inflight.rs). They use only blocksim-designs, so the scratch
# copy runs them as the designs crate's own integration tests (copied to
# designs/tests/): a mutant rebuilds that one crate, not the simulator. A
# patch's `# Suites:` line orders them (most likely catcher first); the run
# of a mutant stops at the first suite that fails.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRATCH="${MUTANTS_DIR:-${TMPDIR:-/tmp}/blocksim-mutants}"
TIMEOUT="${MUTANTS_TIMEOUT:-600}"
ALL_SUITES=(loom_btree shuttle_btree loom_inflight shuttle_inflight lib)
MARKDOWN=""
ONLY=""
LIST=0

while [[ $# -gt 0 ]]; do
  case "$1" in
    --list) LIST=1 ;;
    --markdown) MARKDOWN="$2"; shift ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "mutants.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) ONLY="$1" ;;
  esac
  shift
done

header() { # header FIELD PATCH: the value of "# FIELD: ..." in the patch header
  sed -n "s/^# $1: //p" "$2" | head -1
}

changed_line() { # changed_line PATCH: file:line of the first line the patch changes
  awk '/^\+\+\+ b\//{f=substr($2,3)} /^@@/{split($2,a,","); n=-a[1]-1; inh=1; next}
       inh && /^ /{n++} inh && /^[-+]/{print f ":" n+1; exit}' "$1"
}

mapfile -t PATCHES < <(ls "$ROOT"/designs/mutants/*.patch | sort)
if [[ -n "$ONLY" ]]; then
  mapfile -t PATCHES < <(printf '%s\n' "${PATCHES[@]}" | grep -E -- "/[^/]*($ONLY)[^/]*\.patch$" || true)
  [[ ${#PATCHES[@]} -gt 0 ]] || { echo "mutants.sh: no patch matches '$ONLY'" >&2; exit 2; }
fi

if [[ $LIST -eq 1 ]]; then
  for p in "${PATCHES[@]}"; do
    printf '%-36s %s\n' "$(basename "$p" .patch)" "$(header Mutation "$p")"
    printf '%-36s   mirrors: %s\n' "" "$(header Mirrors "$p")"
  done
  exit 0
fi

START=$(date +%s)
SRC="$SCRATCH/src"
export CARGO_TARGET_DIR="$SCRATCH/target"
export CARGO_TERM_COLOR=never
mkdir -p "$SCRATCH"
# A first run starts from the working tree's debug build (its dependencies
# are reused; the workspace crates rebuild in the new place).
if [[ ! -d "$CARGO_TARGET_DIR" && -d "$ROOT/target/debug" ]]; then
  mkdir -p "$CARGO_TARGET_DIR"
  cp -a "$ROOT/target/debug" "$CARGO_TARGET_DIR/debug"
fi
rm -rf "$SRC"
mkdir -p "$SRC"
# The working tree's tracked files (uncommitted edits included), no target/.
(cd "$ROOT" && git ls-files -z | tar --null -T - -cf -) | tar -xmf - -C "$SRC"
mkdir -p "$SRC/designs/tests"
for s in loom_btree shuttle_btree loom_inflight shuttle_inflight; do
  cp "$ROOT/tests/concurrency/$s.rs" "$SRC/designs/tests/$s.rs"
done
(cd "$SRC" && git init -q && git add -A && git -c user.name=mutants -c user.email=mutants@localhost commit -qm pristine)

LOG="$SCRATCH/logs"
rm -rf "$LOG"
mkdir -p "$LOG"

reset_copy() {
  (cd "$SRC" && git checkout -q -- . && git clean -fdq designs/src)
}

build() { # build LOGFILE [SUITE]: the library and one suite's test binary
  local args=(--no-run)
  case "${2:-all}" in
    all) ;;
    lib) args+=(--lib) ;;
    *) args+=(--test "$2") ;;
  esac
  (cd "$SRC" && cargo test -p blocksim-designs "${args[@]}") >"$1" 2>&1
}

# run_suite NAME LOGFILE: 0 pass, 1 fail, 124 timeout
run_suite() {
  local args
  if [[ "$1" == lib ]]; then args=(--lib); else args=(--test "$1"); fi
  local rc=0
  (cd "$SRC" && timeout "$TIMEOUT" cargo test -q -p blocksim-designs "${args[@]}") >"$2" 2>&1 || rc=$?
  if [[ $rc -eq 0 ]]; then return 0; elif [[ $rc -eq 124 ]]; then return 124; else return 1; fi
}

# The first failing test and its message: the first panic raised by the
# suite's own assertion (its thread is the test), else the first panic; the
# verdict summary's "got counterexample after N executions: " is cut.
first_failure() { # first_failure LOGFILE
  local at test msg
  # A correct variant that no longer verifies names the broken invariant
  # best; a known-bad one found by another invariant comes next.
  at=$(grep -n -A1 -E "^thread '[^']*'.* panicked at designs/tests/" "$1" \
    | grep -m1 -E '^[0-9]+-.*must (verify|survive)' | cut -d- -f1 || true)
  [[ -z "$at" ]] || at=$((at - 1))
  [[ -n "$at" ]] || at=$(grep -m1 -n -E "^thread '[^']*'.* panicked at designs/tests/" "$1" | cut -d: -f1 || true)
  [[ -n "$at" ]] || at=$(grep -m1 -n -E "^thread '[^']*'.* panicked at " "$1" | cut -d: -f1 || true)
  if [[ -z "$at" ]]; then
    printf '?\t%s\n' "$(grep -m1 -E 'error|FAILED' "$1" | cut -c1-160)"
    return
  fi
  test=$(sed -n "${at}p" "$1" | sed -E "s/^thread '([^']*)'.*/\1/")
  msg=$(sed -n "$((at + 1))p" "$1" \
    | sed -E "s/.*, got //; s/^.*counterexample after [0-9]+ executions: //; s/^'//; s/'\$//" | cut -c1-200)
  printf '%s\t%s\n' "${test:-?}" "${msg:-?}"
}

suites_of() { # suites_of PATCH: its Suites order, then the others
  local want
  want=$(header Suites "$1")
  local out=()
  for s in $want; do out+=("$s"); done
  for s in "${ALL_SUITES[@]}"; do
    [[ " ${out[*]} " == *" $s "* ]] || out+=("$s")
  done
  echo "${out[@]}"
}

# Baseline: the unmutated copy must build and pass every suite.
echo "baseline: building $SRC (target $CARGO_TARGET_DIR)"
if ! build "$LOG/baseline-build.log"; then
  echo "baseline does not build: see $LOG/baseline-build.log" >&2
  exit 1
fi
for s in "${ALL_SUITES[@]}"; do
  t0=$(date +%s)
  if ! run_suite "$s" "$LOG/baseline-$s.log"; then
    echo "baseline suite $s fails without any mutation: see $LOG/baseline-$s.log; aborting" >&2
    exit 1
  fi
  echo "baseline: $s passes ($(( $(date +%s) - t0 )) s)"
done

RESULTS="$SCRATCH/results.tsv"
: >"$RESULTS"
for p in "${PATCHES[@]}"; do
  name=$(basename "$p" .patch)
  t0=$(date +%s)
  reset_copy
  status="" test="-" msg="-"
  if ! (cd "$SRC" && git apply --check "$p") >"$LOG/$name-apply.log" 2>&1; then
    status="stale" msg="patch does not apply (see $LOG/$name-apply.log)"
  else
    (cd "$SRC" && git apply "$p")
    suites=($(suites_of "$p"))
    if ! build "$LOG/$name-build.log" "${suites[0]}"; then
      status="stale" msg="mutated code does not build (see $LOG/$name-build.log)"
    fi
  fi
  if [[ -z "$status" ]]; then
    status="missed"
    for s in "${suites[@]}"; do
      rc=0
      run_suite "$s" "$LOG/$name-$s.log" || rc=$?
      if [[ $rc -eq 124 ]]; then
        status="caught (hang)" test="$s" msg="suite $s still running after ${TIMEOUT} s"
        break
      elif [[ $rc -ne 0 ]]; then
        status="caught"
        IFS=$'\t' read -r test msg < <(first_failure "$LOG/$name-$s.log")
        test="$s::$test"
        break
      fi
    done
  fi
  secs=$(( $(date +%s) - t0 ))
  unobs=$(header Unobservable "$p")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$test" "$msg" "$secs" "$unobs" >>"$RESULTS"
  printf '%-36s %-14s %4d s  %s\n' "$name" "$status" "$secs" "$test"
  [[ "$msg" == "-" ]] || printf '%-36s   %s\n' "" "$msg"
done
reset_copy

TOTAL=$(( $(date +%s) - START ))
n=$(wc -l <"$RESULTS")
caught=$(awk -F'\t' '$2 ~ /^caught/' "$RESULTS" | wc -l)
stale=$(awk -F'\t' '$2 == "stale"' "$RESULTS" | wc -l)
unobservable=$(awk -F'\t' '$6 != ""' "$RESULTS" | wc -l)
missed_obs=$(awk -F'\t' '$2 == "missed" && $6 == ""' "$RESULTS" | wc -l)
observable=$(( n - stale - unobservable ))
echo
echo "mutants: $n; caught $caught; missed $(( n - caught - stale )) ($unobservable marked unobservable); stale $stale"
if [[ $observable -gt 0 ]]; then
  echo "catch rate: $caught/$n of all mutants; of the observable ones $(( caught * 100 / observable ))% ($missed_obs observable missed)"
fi
echo "wall time: $TOTAL s (baseline build and suites included)"

if [[ -n "$MARKDOWN" ]]; then
  {
    echo "| mutant | line changed | result | first failing test | invariant message | s |"
    echo "|---|---|---|---|---|---|"
    while IFS=$'\t' read -r name status test msg secs unobs; do
      [[ -z "$unobs" ]] || msg="unobservable (see below)"
      printf '| %s | `%s` | %s | %s | %s | %s |\n' "$name" "$(changed_line "$ROOT/designs/mutants/$name.patch")" \
        "$status" "${test//|/\\|}" "${msg//|/\\|}" "$secs"
    done <"$RESULTS"
    echo
    echo "mutants: $n; caught $caught; missed $(( n - caught - stale )) ($unobservable marked unobservable); stale $stale; wall time $TOTAL s"
    echo
    echo "### What each mutation changes"
    while IFS=$'\t' read -r name _; do
      pf="$ROOT/designs/mutants/$name.patch"
      echo
      echo "**$name** (\`$(changed_line "$pf")\`): $(header Mutation "$pf")."
      echo "Mirrors: $(header Mirrors "$pf")."
      if [[ -n "$(header Unobservable "$pf")" ]]; then
        echo "Unobservable: $(header Unobservable "$pf")."
      else
        echo "Expected catch: $(header Expect "$pf")."
      fi
    done <"$RESULTS"
  } >"$MARKDOWN"
  echo "table written to $MARKDOWN"
fi
[[ $missed_obs -eq 0 && $stale -eq 0 ]]
