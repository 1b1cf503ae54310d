#!/usr/bin/env bash
# Prints what failed in a test log, to be read at the end of a long CI output (CI shows only
# its tail): each failed test and issue recorded (Swift Testing's ✘ lines), and crashes.
# Usage: scripts/failures.sh LOG
log="$1"
echo
echo "==== what failed (from $log) ===="
grep -aE '✘|Fatal error|Crash|Segmentation fault|ThreadSanitizer: (data race|thread leak)|error: (Exited|Terminated)' "$log" | head -80
echo "==== end of what failed ===="
