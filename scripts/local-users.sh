#!/usr/bin/env bash
# Issue 26, point 2: another local user must get nothing from a user's hearth commands.
#
# Run by root, which alone can make two uids: it creates two throwaway system users (kept for the
# next run), hearth-victim and hearth-squatter. The squatter makes the victim's fallback runtime
# folder /tmp/hearth-<victim uid>/ first (as when XDG_RUNTIME_DIR is unset) and plants listening
# sockets where the victim's commands look: the store's control socket (<fnv-1a>.sock), the
# daemon's daemon.sock (with a held daemon.lock), the library's attach socket (store-<hash>.sock).
# Each answers with a forged value and logs every byte it gets. The victim, holding its store
# in `hearth serve`, then runs `hearth get`, `set`, `status`, `daemon status` and `daemon`.
# Every one must fail with status non-zero and a message naming the squatted folder, and the
# squatter must receive nothing. Then, behind the folder check, SO_PEERCRED: root plants
# listeners inside the victim's own 0700 folder (as a folder opened up by hand would let any
# user): get, set and daemon status must fail naming the socket, and an attach by set (the
# store held by another process of the victim, no control socket) must not send its hello.
# Those listeners see the connects, never a byte.
#
# Usage: sudo scripts/local-users.sh [path/to/hearth]   (default .build/debug/hearth)
# Prints PASS/FAIL lines; exits 1 if any check fails. Leaves the two users; removes the rest.
set -uo pipefail

hearth=${1:-.build/debug/hearth}
if [ "$(id -u)" != 0 ]; then echo "FAIL: run as root (only root can make two users)"; exit 2; fi
if [ ! -x "$hearth" ]; then echo "FAIL: no hearth binary at $hearth"; exit 2; fi
for tool in setpriv useradd python3; do
    command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed"; exit 2; }
done

victim=hearth-victim
squatter=hearth-squatter
for user in "$victim" "$squatter"; do
    id -u "$user" >/dev/null 2>&1 || useradd --system --user-group --no-create-home --shell /usr/sbin/nologin "$user" \
        || { echo "FAIL: cannot create user $user"; exit 2; }
done
vuid=$(id -u "$victim")
squatted=/tmp/hearth-$vuid
store=com.example.secrets

work=$(mktemp -d /tmp/hearth-local-users.XXXXXX)
chmod 755 "$work"
# The binary must be readable and executable by both users, whatever the worktree's modes.
cp "$hearth" "$work/hearth"
chmod 755 "$work/hearth"
for user in "$victim" "$squatter"; do
    install -d -m 700 -o "$user" -g "$(id -g "$user")" "$work/$user"
done
vhome=$work/$victim
shome=$work/$squatter
pids=()

cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work" "$squatted"
}
trap cleanup EXIT

# Runs a command as USER with a clean environment: no XDG_RUNTIME_DIR, no TMPDIR (the fallback).
# With AS_EXEC=1 (in a background job) setpriv replaces the job's shell, so $! is its pid.
as() {
    local user=$1 home=$2
    shift 2
    ${AS_EXEC:+exec} setpriv --reuid="$(id -u "$user")" --regid="$(id -g "$user")" --init-groups \
        env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" HEARTH_TEST_WEAK_SCRYPT=1 "$@"
}
directories=(--config-dir "$vhome/config" --data-dir "$vhome/data")
victim_hearth() { as "$victim" "$vhome" "$work/hearth" "$@" "${directories[@]}"; }

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# --- The victim's account and a value, before anyone squats (then /tmp is cleared, as at boot).
rm -rf "$squatted"
victim_hearth account create --passphrase "test passphrase" --device laptop >"$work/create.out" 2>&1 \
    || { cat "$work/create.out"; echo "FAIL: account create"; exit 1; }
victim_hearth set --store "$store" secret --string real --wait 0 >"$work/set0.out" 2>&1 \
    || { cat "$work/set0.out"; echo "FAIL: first set"; exit 1; }
account=$(victim_hearth account show --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["signedIn"]["account"])') \
    || { echo "FAIL: account show"; exit 1; }
rm -rf "$squatted"

# --- The squatter makes the victim's fallback folder and plants its sockets.
cat >"$work/squatter.py" <<'EOF'
import json, os, socket, sys, threading, fcntl
folder, lock_path, data_dir, store, log_path = sys.argv[1:6]
plant = sys.argv[6].split(",") if len(sys.argv) > 6 else ["control", "daemon", "attach"]

def fnv1a(data, seed=0xcbf29ce484222325):
    h = seed
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h

# Where the victim's commands look (ControlSocket.path, DaemonControl, LocalSocketDirectory).
control = "%x.sock" % fnv1a(lock_path.encode())
name = os.path.normpath(data_dir).encode() + b"\0" + store.encode()
attach = "store-%016x%016x.sock" % (fnv1a(name), fnv1a(name, 0x6c62272e07bb0142))
if not os.path.isdir(folder):          # else: planted in the victim's own folder (by root)
    os.mkdir(folder)
    os.chmod(folder, 0o755)
if "daemon" in plant:
    lock = os.open(os.path.join(folder, "daemon.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    os.write(lock, b"%d\n" % os.getpid())
    fcntl.flock(lock, fcntl.LOCK_EX)    # looks like a running daemon
    os.fchmod(lock, 0o644)
forged = json.dumps({"status": 0, "text": "\"forged-by-squatter\"", "outcome": "confirmed", "peers": 1,
                     "required": 1, "held": True, "pid": os.getpid(), "stores": []}) + "\n"
log = open(log_path, "a", buffering=1)
log_lock = threading.Lock()

def serve(conn, label):
    conn.settimeout(2)
    got = b""
    try:
        while b"\n" not in got and len(got) < 1 << 20:
            chunk = conn.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    with log_lock:
        log.write("%s: %d bytes: %r\n" % (label, len(got), got[:300]))
    try:
        conn.sendall(forged.encode())
    except OSError:
        pass
    conn.close()

def listen(label):
    path = os.path.join(folder, label)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o777)
    s.listen(16)
    def loop():
        while True:
            conn, _ = s.accept()
            with log_lock:
                log.write("%s: connection\n" % label)
            threading.Thread(target=serve, args=(conn, label), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()

labels = [{"control": control, "daemon": "daemon.sock", "attach": attach}[p] for p in plant]
for label in labels:
    listen(label)
print("planted " + " ".join(labels), flush=True)
threading.Event().wait()
EOF
chmod 644 "$work/squatter.py"
log=$shome/received.log
AS_EXEC=1 as "$squatter" "$shome" python3 "$work/squatter.py" "$squatted" "$vhome/data/$account/$store.lock" "$vhome/data" "$store" "$log" \
    >"$work/squatter.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q planted "$work/squatter.out" 2>/dev/null && break; sleep 0.1; done
grep -q planted "$work/squatter.out" || { cat "$work/squatter.out"; echo "FAIL: the squatter did not start"; exit 1; }
echo "squatter (uid $(id -u "$squatter")) owns $(stat -c '%n %U %a' "$squatted"): $(cat "$work/squatter.out")"

# --- The victim holds its store in serve (so that set must hand writes to the holder).
AS_EXEC=1 victim_hearth serve --store "$store" >"$work/serve.out" 2>&1 &
serve_pid=$!
pids+=($serve_pid)
for _ in $(seq 300); do grep -q "listening on port" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
grep -q "listening on port" "$work/serve.out" || echo "note: serve did not report listening: $(tail -3 "$work/serve.out")"

# expect_refusal LABEL COMMAND...: non-zero status, the folder named, no forged value printed.
expect_refusal() {
    local label=$1
    shift
    local status=0
    "$@" >"$work/$label.out" 2>"$work/$label.err" || status=$?
    local said
    said=$(cat "$work/$label.out" "$work/$label.err")
    if [ "$status" = 0 ]; then
        fail "$label: exit status 0 (expected a refusal): $said"
    elif ! grep -q "$squatted" <<<"$said"; then
        fail "$label: exit status $status but the message does not name $squatted: $said"
    elif grep -q "forged-by-squatter\|confirmed by" <<<"$said"; then
        fail "$label: printed the squatter's answer: $said"
    else
        pass "$label: exit status $status: $(head -1 "$work/$label.err")"
    fi
}
expect_refusal get victim_hearth get --store "$store" secret
expect_refusal set victim_hearth set --store "$store" secret --string "the victim's secret" --wait 2
expect_refusal status victim_hearth status
expect_refusal daemon-status victim_hearth daemon status
kill "$serve_pid" 2>/dev/null
wait "$serve_pid" 2>/dev/null
# (timeout: a daemon that started would run until stopped)
expect_refusal daemon as "$victim" "$vhome" timeout 20 "$work/hearth" daemon run "${directories[@]}"

# --- The remedy the messages give works, squatter or not: a private XDG_RUNTIME_DIR.
install -d -m 700 -o "$victim" -g "$(id -g "$victim")" "$vhome/run"
private=(env XDG_RUNTIME_DIR="$vhome/run" TMPDIR="$vhome/run" "$work/hearth")
if as "$victim" "$vhome" "${private[@]}" set --store "$store" secret --string updated --wait 0 "${directories[@]}" >"$work/xdg.out" 2>&1 \
    && [ "$(as "$victim" "$vhome" "${private[@]}" get --store "$store" secret "${directories[@]}" 2>>"$work/xdg.out")" = '"updated"' ]; then
    pass "with XDG_RUNTIME_DIR and TMPDIR set (the advice given), the victim's set and get work beside the squatted /tmp folder"
else
    fail "with XDG_RUNTIME_DIR and TMPDIR set: $(cat "$work/xdg.out")"
fi

# --- The squatter got nothing: not a connection, not a byte.
if [ -s "$log" ]; then
    fail "the squatter received: $(cat "$log")"
    if grep -q "secret" "$log"; then fail "the victim's value reached the squatter"; fi
else
    pass "the squatter received nothing"
fi
kill "${pids[0]}" 2>/dev/null
wait "${pids[0]}" 2>/dev/null

# --- Behind the folder check, SO_PEERCRED: the victim's own folder (0700) with listeners of
# another uid in it. Only root can plant them there (as a folder opened up by hand would let
# anyone): every client must still refuse before sending a byte.
rm -rf "$squatted"
install -d -m 700 -o "$victim" -g "$(id -g "$victim")" "$squatted"
rootlog=$work/root-received.log
python3 "$work/squatter.py" "$squatted" "$vhome/data/$account/$store.lock" "$vhome/data" "$store" "$rootlog" \
    >"$work/rootsquatter.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q planted "$work/rootsquatter.out" 2>/dev/null && break; sleep 0.1; done
grep -q planted "$work/rootsquatter.out" || { cat "$work/rootsquatter.out"; echo "FAIL: the root listener did not start"; exit 1; }
expect_refusal get-peercred victim_hearth get --store "$store" secret
expect_refusal set-peercred victim_hearth set --store "$store" secret --string "the victim's secret" --wait 2
expect_refusal daemon-status-peercred victim_hearth daemon status
# They see the connect (SO_PEERCRED needs one), never a byte.
nothing_but_connects() {
    local label=$1 file=$2
    if grep -qv ": connection$\|: 0 bytes: b''$" "$file" 2>/dev/null; then
        fail "$label received: $(cat "$file")"
    else
        pass "$label received nothing ($(grep -c ': connection$' "$file" 2>/dev/null) connects, 0 bytes)"
    fi
}
nothing_but_connects "the other uid's listeners in the victim's own folder" "$rootlog"
kill "${pids[-1]}" 2>/dev/null
wait "${pids[-1]}" 2>/dev/null

# --- The library's attach client: the store held by a process of the victim without a control
# socket (flock on its lock file, as an app holding it would), no daemon, and another uid's
# listener on the store's attach socket. set must not send it its hello (nor anything else).
rm -rf "$squatted"
install -d -m 700 -o "$victim" -g "$(id -g "$victim")" "$squatted"
attachlog=$work/attach-received.log
python3 "$work/squatter.py" "$squatted" "$vhome/data/$account/$store.lock" "$vhome/data" "$store" "$attachlog" attach \
    >"$work/attachsquatter.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q planted "$work/attachsquatter.out" 2>/dev/null && break; sleep 0.1; done
grep -q planted "$work/attachsquatter.out" || { cat "$work/attachsquatter.out"; echo "FAIL: the attach listener did not start"; exit 1; }
AS_EXEC=1 as "$victim" "$vhome" flock "$vhome/data/$account/$store.lock" sleep 120 &
pids+=($!)
for _ in $(seq 100); do flock -n "$vhome/data/$account/$store.lock" true || break; sleep 0.1; done   # until it holds the lock
status=0
victim_hearth set --store "$store" secret --string "the victim's secret" --wait 1 >"$work/set-attach.out" 2>&1 || status=$?
if [ "$status" = 0 ] || grep -q "forged-by-squatter\|confirmed by" "$work/set-attach.out"; then
    fail "set-attach: exit status $status: $(cat "$work/set-attach.out")"
else
    pass "set-attach: exit status $status: $(head -1 "$work/set-attach.out")"
fi
nothing_but_connects "another uid's listener on the store's attach socket" "$attachlog"

if [ "$failures" = 0 ]; then
    echo "PASS: local-users: another local user gets nothing from hearth-victim's commands"
    exit 0
fi
echo "FAIL: local-users: $failures check(s) failed"
exit 1
