#!/usr/bin/env bash
# Issue 14's pairing on two virtual hosts, each with its own avahi-daemon: run on both at once by
# multihost.sh (Tests/HearthCommandTests/PairingCommandTests.swift):
#
#   scripts/testnet/multihost.sh -n 2 -4 -- scripts/testnet/pairing.sh SHARED HEARTH
#
# h1 is laptop (creates the account), h2 is kitchen (asks to join with `hearth account join
# --pair`, found by `hearth device approve` on h1 through mDNS). Each side prints a pairing code;
# the people are played by the script: each side's "person" reads the code the other side
# prints (through a file in SHARED) and types it. Four rounds, each a fresh request:
#
#   wrong-code        laptop's person types a code that is not kitchen's: nothing admitted
#   newcomer-refuses  kitchen's person types a wrong code: nothing admitted
#   wrong-passphrase  codes match, laptop is given a wrong passphrase: nothing admitted
#   ok                codes match, right passphrase: kitchen joins; then the two sync both ways
#
# Each check prints one line starting with "check " (the test reads them); the script exits
# non-zero if a wait times out. The daemons are stopped on exit.
set -euo pipefail
shared=$1 hearth=$2
. "$(dirname "$0")/host-lib.sh"
passphrase="a household passphrase for the pairing test"
store=com.example.pairing

# The code a running command printed ("pairing code: 123 456") into FILE, as digits, or nothing.
code_in() { sed -n 's/^pairing code: \([0-9]\{3\}\) \([0-9]\{3\}\)$/\1\2/p' "$1" | head -n 1; }
# Copies the code COMMAND-OUTPUT shows to SHARED/NAME once it appears (in the background).
publish_code() {   # publish_code OUTPUT NAME
    ( for _ in $(seq 600); do
          c=$(code_in "$1"); [ -n "$c" ] && { echo "$c" > "$shared/$2.tmp"; mv "$shared/$2.tmp" "$shared/$2"; exit 0; }
          sleep 0.1
      done ) &
}
# What this side's person types: the other side's code (from SHARED/NAME), or ANSWER as given.
answer() {   # answer NAME [ANSWER]
    if [ $# -gt 1 ]; then echo "$2"; return; fi
    for _ in $(seq 600); do [ -s "$shared/$1" ] && { cat "$shared/$1"; return; }; sleep 0.1; done
}
signed_in() { h account show --json | grep -q '"signedIn":{'; }

trap stop_daemon EXIT
# Give up before the test does, so that multihost.sh still prints what each host saw.
trap 'echo "FAIL: h$i gave up after 170 s"; for f in "$me"/*.out "$me"/*.err; do [ -e "$f" ] && sed "s|^|  [$(basename "$f")] |" "$f" >&2; done; stop_daemon; exit 1' USR1
( sleep 170; kill -USR1 $$ 2>/dev/null ) &
watchdog=$!
trap 'stop_daemon; kill "$watchdog" 2>/dev/null || true' EXIT
start_daemon() {
    "$hearth" daemon --log-level info --port 7400 "${folders[@]}" 2>>"$me/daemon.log" &
    daemon_pid=$!
    for _ in $(seq 100); do [ -S "$XDG_RUNTIME_DIR/hearth/daemon.sock" ] && return 0; sleep 0.1; done
    echo "FAIL: h$i's daemon did not start"; cat "$me/daemon.log"; exit 1
}
get_until() {   # get_until KEY EXPECTED SECONDS
    for _ in $(seq $(( $3 * 5 ))); do
        [ "$(h get --store "$store" "$1" 2>/dev/null || true)" = "$2" ] && return 0
        sleep 0.2
    done
    return 1
}

# One round: kitchen asks, laptop approves. Per round, how each person answers ("code": the
# code the other side shows; anything else is typed as it is) and the passphrase laptop is given.
round() {   # round NAME KITCHEN-ANSWER LAPTOP-ANSWER PASSPHRASE
    local name=$1 kitchen_answer=$2 laptop_answer=$3 given=$4 status
    if [ "$i" = 2 ]; then
        publish_code "$me/$name.out" "$name-kitchen-code"
        status=0
        { if [ "$kitchen_answer" = code ]; then answer "$name-laptop-code"; else answer x "$kitchen_answer"; fi; } |
            h account join --pair --device kitchen --port 7500 --timeout 90 >"$me/$name.out" 2>"$me/$name.err" &
        local join=$!
        for _ in $(seq 100); do grep -q '^listening on port' "$me/$name.out" && break; sleep 0.1; done
        flag "$name-listening"
        wait "$join" || status=$?
        echo "check $name-join-status $status"
        signed_in && echo "check $name-joined yes" || echo "check $name-joined no"
        code_in "$me/$name.out" > "$shared/$name-kitchen-shown"
        flag "$name-kitchen-done"
        await "$name-laptop-done"
    else
        await "$name-listening"
        sleep 2   # the previous round's request, withdrawn, leaves every cache
        publish_code "$me/$name.out" "$name-laptop-code"
        status=0
        { if [ "$laptop_answer" = code ]; then answer "$name-kitchen-code"; else answer x "$laptop_answer"; fi; } |
            h device approve kitchen --timeout 30 --passphrase "$given" >"$me/$name.out" 2>"$me/$name.err" || status=$?
        echo "check $name-approve-status $status"
        local listed
        listed=$(h device list | grep -c '^kitchen ' || true)
        echo "check $name-laptop-lists-kitchen $listed"
        code_in "$me/$name.out" > "$shared/$name-laptop-shown"
        flag "$name-laptop-done"
        await "$name-kitchen-done"
    fi
    # Both sides showed the same code in every round (no one in the middle): read from what each
    # printed, once both are done (the copies made for the people may lag a refusal).
    if [ -s "$shared/$name-kitchen-shown" ] && [ "$(cat "$shared/$name-kitchen-shown")" = "$(cat "$shared/$name-laptop-shown")" ]; then
        echo "check $name-codes-match yes"
    else
        echo "check $name-codes-match no"
    fi
    sed "s/^/  [$name] /" "$me/$name.out" "$me/$name.err" >&2
}

if [ "$i" = 1 ]; then
    h account create --name "Pairing household" --passphrase "$passphrase" --device laptop >/dev/null
    h account show --json | sed -n 's/.*"signedIn":{"account":"\([0-9a-f]*\)".*/\1/p' > "$shared/account"
    flag created
else
    await created
fi

round wrong-code code 000000 "$passphrase"
round newcomer-refuses 000000 code "$passphrase"
round wrong-passphrase code code "not the account passphrase"
round ok code code "$passphrase"

if [ "$i" = 2 ]; then
    [ "$(h account show --json | sed -n 's/.*"signedIn":{"account":"\([0-9a-f]*\)".*/\1/p')" = "$(cat "$shared/account")" ] \
        && echo "check kitchen-account same" || echo "check kitchen-account different"
    echo "check kitchen-ca-key $(h account show --json | sed -n 's/.*"caKey":"\([a-z]*\)".*/\1/p')"
    echo "check kitchen-lists-laptop $(h device list | grep -c '^laptop ' || true)"
    echo "check kitchen-lists-itself $(h device list | grep -c '^kitchen .*this device' || true)"
fi

# The two now sync, found by mDNS, each running the daemon: a store neither has yet, written on
# laptop, then on kitchen.
start_daemon
flag "up-$i"
await up-1; await up-2
# On a miss, what the daemon and the write said, for the test's report.
explain() { sed 's/^/  [set] /' "$me/set.out" >&2; tail -n 30 "$me/daemon.log" | sed 's/^/  [daemon] /' >&2; }
if [ "$i" = 1 ]; then
    h set --store "$store" from-laptop 1 --wait 30 >"$me/set.out" 2>&1 || true
    if get_until from-kitchen 2 90; then echo "check sync-kitchen-to-laptop ok"; else echo "check sync-kitchen-to-laptop missing"; explain; fi
    flag laptop-synced
    await kitchen-synced 120
else
    if get_until from-laptop 1 90; then echo "check sync-laptop-to-kitchen ok"; else echo "check sync-laptop-to-kitchen missing"; fi
    h set --store "$store" from-kitchen 2 --wait 30 >"$me/set.out" 2>&1 || true
    flag kitchen-synced
    await laptop-synced 120
    grep -q 'confirmed by' "$me/set.out" || explain
fi
stop_daemon
