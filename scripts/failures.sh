#!/usr/bin/env bash
# Prints what failed in a test log, to be read at the end of a long CI output (CI shows only
# its tail): each failed test and issue recorded (Swift Testing's ✘ lines, with the lines of
# an issue's message that follow it: the values compared, and the test's comment, which often
# holds a child process's output), and crashes.
# Usage: scripts/failures.sh LOG
log="$1"
echo
echo "==== what failed (from $log) ===="
awk '
    /✘|Fatal error|Crash|Segmentation fault|ThreadSanitizer: (data race|thread leak)|error: (Exited|Terminated)/ {
        if (shown++ >= 80) exit
        print; follow = (/recorded an issue/) ? 40 : 0; next
    }
    follow > 0 {
        # The message ends where the next test event or log line starts.
        if (/^(◇|✔|✘|􀟈|Test Suite|Test Case)/ || /^[0-9]{4}-[0-9]{2}-[0-9]{2}T/) { follow = 0; next }
        print "    " $0; follow--
    }
' "$log"
echo "==== end of what failed ===="
