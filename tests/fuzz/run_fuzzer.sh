#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time from the committed seed corpus.
#   run_fuzzer.sh BINARY SEED_CORPUS_DIR SECONDS WORK_DIR
# New inputs go to WORK_DIR, never into the source tree. A crash fails with
# the path of the input that caused it (replay: BINARY that-file).
set -euo pipefail
binary=$1 seeds=$2 seconds=$3 work=$4
name=$(basename "$binary")
rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
log="$work/fuzz.log"
if "$binary" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=2048 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" >"$log" 2>&1; then
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  echo "$name: $runs executions in $seconds s, $cov, no crash"
else
  tail -40 "$log"
  echo "$name: FAILED; crashing input: $(ls "$work"/artifacts/* 2>/dev/null)"
  exit 1
fi
