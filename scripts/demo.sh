#!/usr/bin/env bash
# The demo (README.md): three devices of one household (laptop, kitchen, phone) discover each
# other and sync a store, using the hearth command. With root, they run in a private network
# namespace with its own avahi-daemon (scripts/testnet) and find each other by mDNS; without,
# they use static peers on 127.0.0.1. Every line is prefixed with the device that printed it.
# The devices run as an unprivileged user, as Hearth is meant to: run as root, the demo uses
# root for the build and the namespace only, and runs every hearth as hearth-test (scripts/user.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
. scripts/user.sh
hearth_user_init

# HEARTH_SCRATCH: another build folder (swift build --scratch-path), e.g. to share one with the tests.
scratch=(${HEARTH_SCRATCH:+--scratch-path "$HEARTH_SCRATCH"})
echo "== building the hearth command"
log=$(mktemp)
if ! swift build "${scratch[@]}" --product hearth >"$log" 2>&1; then cat "$log"; rm -f "$log"; exit 1; fi
rm -f "$log"
hearth=$(swift build "${scratch[@]}" --show-bin-path)/hearth

work=$(mktemp -d)
hearth_user_owns "$work"
pids=()
namespace=0
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  [ "$namespace" -eq 1 ] && scripts/testnet/down.sh 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# A namespace of the demo's own, so the demo never disturbs a test run's network.
export HEARTH_NETNS=hearth-demo HEARTH_TESTNET_DIR=/run/hearth-demo
# HEARTH_DEMO_STATIC=1 shows the fallback even where the namespace would work.
if [ "${HEARTH_DEMO_STATIC:-0}" != 1 ] && [ "$(id -u)" -eq 0 ] && scripts/testnet/up.sh 2>/dev/null; then
  namespace=1
  echo "== network namespace $HEARTH_NETNS with its own avahi-daemon: devices find each other by mDNS"
else
  echo "== no network namespace or avahi-daemon here (needs root and iproute2):"
  echo "   the devices use static discovery on 127.0.0.1 (--peer) instead of mDNS"
fi

echo "== every device runs as $HEARTH_RUNNER"

store=com.example.colors
port() { case $1 in laptop) echo 47501;; kitchen) echo 47502;; phone) echo 47503;; esac; }
# The command line of hearth as DEVICE, in $cmd: its own account and data folders; in the
# namespace mDNS finds the peers, otherwise a fixed port and the other two devices as static peers.
# As the test user either way: run.sh drops to it in the namespace, HEARTH_AS_USER outside.
command_for() {
  local device=$1; shift
  local where=(--config-dir "$work/$device/config" --data-dir "$work/$device/data")
  # Each device is a user of its own: its own runtime folder, so one daemon each.
  "${HEARTH_AS_USER[@]}" mkdir -p "$work/$device/run"
  local user=(env XDG_RUNTIME_DIR="$work/$device/run")
  if [ "$namespace" -eq 1 ]; then
    cmd=(scripts/testnet/run.sh "${user[@]}" "$hearth" "$@" "${where[@]}")
  else
    local sync=()
    case $1 in
      set|rm|watch|serve|peers|daemon)
        sync=(--port "$(port "$device")")
        for other in laptop kitchen phone; do [ "$other" = "$device" ] || sync+=(--peer "127.0.0.1:$(port "$other")"); done;;
    esac
    [ "$1 ${2:-}" = "daemon status" ] && sync=()
    cmd=("${HEARTH_AS_USER[@]}" "${user[@]}" "$hearth" "$@" "${where[@]}" "${sync[@]}")
  fi
}
as() { command_for "$@"; "${cmd[@]}" 2>&1 | prefix "$1"; }
# Starts hearth watch on DEVICE in the background; its pid (the hearth process itself, as
# run.sh and ip netns exec exec it) goes into watchers[DEVICE] for a clean SIGTERM.
declare -A watchers
watch_on() {
  command_for "$1" watch --create --store "$store"
  "${cmd[@]}" > >(prefix "$1") 2>&1 &
  watchers[$1]=$!
  pids+=($!)
}
prefix() { sed -u "s/^/  [$1] /"; }
say() { echo; echo "== $*"; sleep 0.3; }

say "laptop creates the household (it prints the account passphrase once); kitchen and phone join it with that passphrase"
command_for laptop account create --name "Our home" --device laptop
created=$("${cmd[@]}" 2>&1)
prefix laptop <<<"$created"
# The six generated words: the indented line (a person would type them on each device).
passphrase=$(sed -n 's/^    //p' <<<"$created" | head -n 1)
[ -n "$passphrase" ] || { echo "no account passphrase in the output of account create"; exit 1; }
as laptop account export --output "$work/home.bundle"
for device in kitchen phone; do
  as "$device" account join "$work/home.bundle" --passphrase "$passphrase" --device "$device"
done

say "laptop and kitchen watch the store $store (hearth watch)"
watch_on laptop
watch_on kitchen
sleep 2
if [ "$namespace" -eq 1 ] && command -v avahi-browse >/dev/null; then
  say "what mDNS sees in the namespace (avahi-browse -rpt _hearth._tcp): one service per device, names and hashes only"
  scripts/testnet/run.sh avahi-browse -rpt _hearth._tcp 2>/dev/null | grep '^=' | cut -d';' -f4,7-9 | sort -u | prefix mdns || true
fi

say "phone sets backgroundColor to 2 and waits until both peers confirm (hearth set)"
as phone set --store "$store" backgroundColor 2 --min-peers 2 --wait 15
sleep 1
say "phone sets a greeting: now a plain serverChange on the watchers"
as phone set --store "$store" greeting --string "hello from the phone" --min-peers 2 --wait 15
sleep 1

say "laptop's view of its peers (hearth peers, read from the running watch)"
as laptop peers --store "$store"

say "kitchen goes offline; phone changes the colour while it is away"
kill -TERM "${watchers[kitchen]}"; wait "${watchers[kitchen]}" 2>/dev/null || true
as phone set --store "$store" backgroundColor 3 --wait 15
sleep 1
say "kitchen comes back and catches up (from laptop: phone has quit)"
watch_on kitchen
sleep 3

say "laptop sets a value while its watcher holds the store: the watcher applies it and syncs it"
as laptop set --store "$store" greeting --string "dinner at 7" --wait 15
sleep 1

say "phone comes online for two seconds (hearth peers) and catches up"
as phone peers --store "$store" --wait 2

say "every device now reads the same values (hearth list)"
for device in laptop kitchen phone; do as "$device" list --store "$store"; done

say "the watchers stop (they save and exit on SIGTERM)"
for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
pids=()
sleep 0.3

say "now each device runs the daemon (hearth daemon): it holds every store, whether an app runs or not"
for device in laptop kitchen phone; do
  command_for "$device" daemon
  "${cmd[@]}" > >(prefix "$device") 2>&1 &
  pids+=($!)
done
sleep 3
as kitchen daemon status

say "phone: a one-shot writer sets backgroundColor to 1 and exits; no app stays open anywhere"
as phone set --store "$store" backgroundColor 1 --min-peers 2 --wait 15
say "laptop: a process started afterwards reads the new value at once, from its own disk"
as laptop get --store "$store" backgroundColor

say "done: stopping the daemons (they save and exit on SIGTERM)"
for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
pids=()
sleep 0.3
