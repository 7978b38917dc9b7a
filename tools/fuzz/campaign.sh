#!/usr/bin/env bash
# Run one target for a number of inputs, restarting after each crash (libFuzzer stops at
# the first), so a long campaign survives what it finds. Crashing inputs are kept under
# $OUT/<target>/crash-*; every run's log is kept under $OUT/<target>/. One process at a time.
#
#     tools/fuzz/campaign.sh summary 600000 [OUT]
set -u
target=$1
wanted=$2
out=${3:-.cache/fuzz-campaign}
python=${PYTHON:-.tox/fuzz/bin/python}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out/$target"
done_runs=0
attempt=0
start=$(date +%s)
while [ "$done_runs" -lt "$wanted" ]; do
    attempt=$((attempt + 1))
    log="$out/$target/run-$attempt.log"
    (cd "$root" && "$python" tools/fuzz/fuzz.py "$target" -runs=$((wanted - done_runs)) \
        -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 \
        -artifact_prefix="$out/$target/") >"$log" 2>&1
    status=$?
    ran=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
    if [ -z "$ran" ]; then
        ran=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
    fi
    ran=${ran:-0}
    rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
    done_runs=$((done_runs + ran))
    echo "$target attempt $attempt: exit $status, $ran inputs (total $done_runs), peak rss ${rss:-?} MB"
    if [ "$ran" -eq 0 ] && [ "$status" -ne 0 ]; then
        echo "$target: no progress, stopping" >&2
        break
    fi
done
echo "$target: $done_runs inputs in $(( $(date +%s) - start )) s"
