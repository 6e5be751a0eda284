#!/usr/bin/env bash
# Runs test/perf's BenchmarkPerfScheduling with every run of a workload under
# a profile in a process of its own, and prints the report.
#
#   run.sh OUT FILTER ROUNDS TIMEOUT [test binary flags...]
#
# OUT is the results directory (emptied first), FILTER the scheduler_perf
# label filter every run shares (quick, full,-slow, ...), ROUNDS how many
# runs of each workload and profile, TIMEOUT the -test.timeout of one run.
# The environment can set WORKLOADS (default "gpu basic"; also quota, churn, gang) and PROFILES
# (default "default native wasm-go wasm-tinygo"); a profile the filter
# excludes with -name is not started.
#
# Why a process per run: in one process, the runs after the first are
# slower by up to a third (the earlier API servers' memory and goroutines
# are still being collected), so whichever profile ran first looked faster.
# Each round still rotates the order of the profiles by one, so that over
# as many rounds as profiles each runs once in every position: with the
# order reversed every other round, the middle profile was always in the
# middle, and one invocation put wasm-go behind native in every round it
# followed it.
set -euo pipefail

out=$1 filter=$2 rounds=$3 timeout=$4
shift 4
workloads=${WORKLOADS:-gpu basic}
profiles=${PROFILES:-default native wasm-go wasm-tinygo}
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)

rm -rf "$out" && mkdir -p "$out"
log=$out/bench.log
: > "$log"
echo "scheduler_perf ($filter): one process per run, log in $log"

# scheduler_perf's etcd keeps its data under TMPDIR. On a disk every write
# waits for an fsync (about 0.3 ms on the machine the figures come from, more
# when the host's storage is busy), a cost of the disk and not of any
# profile; on tmpfs the runs measure the scheduler and the API server. An
# invocation's own directory, removed at exit; PERF_TMPDIR names another.
tmp=${PERF_TMPDIR:-}
if [[ -z $tmp && -d /dev/shm && -w /dev/shm ]]; then
	tmp=$(mktemp -d /dev/shm/wasmsched-perf.XXXXXX)
	trap 'rm -rf "$tmp"' EXIT
fi
if [[ -n $tmp ]]; then
	export TMPDIR=$tmp
	echo "etcd's data under $TMPDIR"
fi

# Leave out the profiles the filter excludes.
wanted=()
for p in $profiles; do
	case ",$filter," in *",-$p,"*) continue ;; esac
	wanted+=("$p")
done

bin=$out/perf.test
"${GO:-go}" test -c -o "$bin" . >> "$log" 2>&1 || { tail -20 "$log"; exit 1; }

for w in $workloads; do
	for ((r = 1; r <= rounds; r++)); do
		order=()
		for ((i = 0; i < ${#wanted[@]}; i++)); do order+=("${wanted[(i + r - 1) % ${#wanted[@]}]}"); done
		for p in "${order[@]}"; do
			dir=$out/$w-$p-$r
			mkdir -p "$dir"
			echo "=== $w $p round $r" >> "$log"
			"$bin" -test.run '^$' -test.bench BenchmarkPerfScheduling -test.benchtime 1x -test.timeout "$timeout" \
				-perf-scheduling-label-filter="$filter,$w,$p" -rounds 1 -data-items-dir "$dir" "$@" >> "$log" 2>&1 || {
				grep -E -- '^(--- FAIL|FAIL|panic)|Error running|perf_test.go:' "$log" | head -40
				exit 1
			}
		done
	done
done
rm -f "$bin"
cd "$root" && "${GO:-go}" run ./test/perf/report "$out"
