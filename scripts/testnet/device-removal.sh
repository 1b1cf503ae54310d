#!/usr/bin/env bash
# Issue 14's removal on four virtual hosts, each with its own avahi-daemon: run on every host
# at once by multihost.sh (Tests/HearthCommandTests/DeviceRemovalCommandTests.swift):
#
#   scripts/testnet/multihost.sh -n 4 -4 -- scripts/testnet/device-removal.sh SHARED HEARTH
#
# h1 is A (the owner, who removes the phone), h2 is B, h3 the phone, h4 C (away during the
# removal; when it comes back A is gone, so it can only hear of the removal from B). Every host
# runs `hearth daemon` on port 7400 and finds the others by mDNS. SHARED is a folder every host
# sees; the hosts pace each other with flag files in it.
#
# Each check prints one line starting with "check " (the test reads them); the script exits
# non-zero if a wait times out. The daemons are stopped on exit.
set -euo pipefail
shared=$1 hearth=$2
. "$(dirname "$0")/host-lib.sh"
passphrase="a household passphrase for the removal test"
names=(x A B phone C)
store=com.example.notes

now() { date +%s.%N; }
since() { awk -v now="$(now)" -v then="$1" 'BEGIN { printf "%.2f", now - then }'; }
trap stop_daemon EXIT
start_daemon() {   # start_daemon LOG
    "$hearth" daemon --log-level info --port 7400 "${folders[@]}" 2>>"$me/$1" &
    daemon_pid=$!
    for _ in $(seq 100); do [ -S "$XDG_RUNTIME_DIR/hearth/daemon.sock" ] && return 0; sleep 0.1; done
    echo "FAIL: h$i's daemon did not start"; cat "$me/$1"; exit 1
}
get_until() {   # get_until KEY EXPECTED SECONDS
    for _ in $(seq $(( $3 * 5 ))); do
        [ "$(h get --store "$store" "$1" 2>/dev/null || true)" = "$2" ] && return 0
        sleep 0.2
    done
    return 1
}
# Whether KEY is absent here (hearth get exits 7 for a missing key).
absent() { ! h get --store "$store" "$1" >/dev/null 2>&1; }

if [ "$i" = 1 ]; then
    h account create --name "Removal household" --passphrase "$passphrase" --device A >/dev/null
    h account export --output "$shared/bundle" >/dev/null 2>&1
    flag bundle
else
    await bundle
    h account join "$shared/bundle" --passphrase "$passphrase" --device "${names[$i]}" >/dev/null
fi

case $i in
1)  # A: removes the phone once everyone has its early write, then leaves.
    start_daemon daemon.log; flag up-1
    get_until early 1 60 || { echo "FAIL: A never got early"; exit 1; }
    await has-early-2; await has-early-4
    # The daemon saves the devices it met just after the connection (or the relayed entry)
    # arrived: give it a moment.
    for _ in $(seq 50); do
        h device list > "$me/list-before.txt"
        grep -q '^phone ' "$me/list-before.txt" && break
        sleep 0.2
    done
    echo "check a-list-before-phone $(grep -c '^phone ' "$me/list-before.txt" || true)"
    # Without the passphrase nothing is removed.
    if HEARTH_PASSPHRASE= h device remove phone </dev/null >/dev/null 2>&1; then echo "check remove-without-passphrase succeeded"
    else echo "check remove-without-passphrase refused"; fi
    if h device remove phone --passphrase "not the account passphrase" </dev/null >/dev/null 2>&1; then echo "check remove-wrong-passphrase succeeded"
    else echo "check remove-wrong-passphrase refused"; fi
    h device remove phone --passphrase "$passphrase" >/dev/null
    date +%s.%N > "$shared/removed-at"
    flag removed
    echo "check a-list-after $(h device list --json | tr -d '\n' | grep -o '"name":"phone"[^}]*"removed":"[^"]*"' | wc -l)"
    await late-written
    sleep 5
    absent late && echo "check a-late absent" || echo "check a-late present"
    stop_daemon
    flag a-left
    await done 150
    ;;
2)  # B: closes the phone's connection within 2 s of the removal; refuses it after a restart.
    start_daemon daemon.log; flag up-2
    get_until early 1 60 && flag has-early-2
    await removed 90
    removed_at=$(cat "$shared/removed-at")
    # Whoever closes it (B, or the phone once it holds the record), the connection is gone, and
    # B holds the record.
    closed=never
    for _ in $(seq 100); do
        if [ -z "$(ss -tnH state established dst 169.254.77.3)" ] && grep -q "device removed from the account: removal of phone" "$me/daemon.log"; then
            closed=$(since "$removed_at"); break
        fi
        sleep 0.05
    done
    echo "check b-closed-phone-after $closed"
    await late-written
    sleep 5
    absent late && echo "check b-late absent" || echo "check b-late present"
    get_until early 1 1 && echo "check b-early kept" || echo "check b-early lost"
    # The removal survives a restart: the phone dials again and is refused.
    stop_daemon
    start_daemon daemon-2.log
    flag b-restarted
    await phone-redialled 60
    sleep 3
    echo "check b-refused-after-restart $(grep -c 'code=peerRemoved.*TLS connection refused' "$me/daemon-2.log" || true)"
    echo "check b-list-after-restart $(h device list --json | tr -d '\n' | grep -o '"name":"phone"[^}]*"removed":"[^"]*"' | wc -l)"
    await c-checked 90
    stop_daemon
    flag done
    ;;
3)  # The phone: writes early, is removed, writes late (which must reach no one).
    start_daemon daemon.log; flag up-3
    await up-1; await up-2
    sleep 2
    h set --store "$store" early 1 --wait 0 >/dev/null
    await removed 120
    sleep 3
    h set --store "$store" late 1 --wait 0 >/dev/null
    flag late-written
    sleep 1
    echo "check phone-status $(h status | grep -c '^removed ' || true)"
    echo "check phone-log $(grep -c 'this device was removed from the account' "$me/daemon.log" || true)"
    # openssl s_client with the phone's own certificate: B completes the handshake only to send
    # the signed removal record (a "removals" message, a binary plist), then closes (issue 26).
    account_dir=$(ls -d "$XDG_CONFIG_HOME/hearth/accounts"/*/)
    # stdin stays open 2 s: s_client leaves at EOF, maybe before the server's verdict arrives.
    { sleep 2; } | timeout 10 openssl s_client -connect 169.254.77.2:7400 -tls1_3 -alpn hearth/1 -cert "$account_dir/device.pem" \
          -key "$account_dir/device.key" -CAfile "$account_dir/ca.pem" >"$me/s_client.txt" 2>&1 || true
    echo "check phone-s_client $(grep -a -c 'removals' "$me/s_client.txt" || true)"
    await b-restarted 60
    # Restarted, the phone dials B again.
    stop_daemon
    start_daemon daemon-2.log
    sleep 4
    flag phone-redialled
    absent late || true
    await done 150
    stop_daemon
    ;;
4)  # C: syncs, goes away before the removal, comes back after A left, hears it from B.
    start_daemon daemon.log
    get_until early 1 60 && flag has-early-4
    stop_daemon
    await a-left 150
    start_daemon daemon-2.log
    learned=never
    begin=$(now)
    for _ in $(seq 200); do
        if grep -q "learned 1 device removal" "$me/daemon-2.log"; then learned=$(since "$begin"); break; fi
        sleep 0.05
    done
    echo "check c-learned-after $learned"
    sleep 4
    absent late && echo "check c-late absent" || echo "check c-late present"
    echo "check c-refused-phone $(grep -c 'code=peerRemoved.*TLS connection refused\|closing the connection to .*removed' "$me/daemon-2.log" || true)"
    flag c-checked
    await done 150
    stop_daemon
    ;;
esac
