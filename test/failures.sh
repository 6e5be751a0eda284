#!/usr/bin/env bash
# Prints, from the outputs of go test runs, what a failure left: the failed
# tests' messages, the tests still running when a binary timed out or
# panicked, and the names of the failed tests and packages, in that order and
# briefly, so that the last lines of a long log (a CI run's, whose control
# planes log thousands of lines) say which test failed and why.
#
#   failures.sh LOG...
set -uo pipefail

echo "=== what failed (test/failures.sh)"
for log in "$@"; do
	# A test's messages are indented under its name (file.go:line: text);
	# the API servers' and schedulers' own log lines are not.
	grep -E '^\s+[A-Za-z0-9_.-]+\.go:[0-9]+: ' "$log" | cut -c1-300 | tail -n 20
	# A panic or a timeout lists the tests that were running.
	grep -E -A4 '^(panic: |running tests:)' "$log" | cut -c1-300 | head -n 12
done
grep -h -E '^\s*--- FAIL: |^FAIL\s' "$@" | sort -u | head -n 30
