# What every per-host script of multihost.sh needs (device-removal.sh, daemon-household.sh,
# pairing.sh); sourced after setting `shared` (a folder every host sees) and `hearth` (the binary).
#
# Sets i (this host's index), me ($shared/h$i), the host's own runtime folder (/run is per host:
# daemon and attach sockets), the default config and data folders as an app has them, and
# `folders` (the same as options); defines h (hearth with those folders), flag and await (hosts
# pace each other with flag files in $shared) and stop_daemon (for a daemon started in
# $daemon_pid).
i=$HEARTH_HOST_INDEX
# Hearth runs as an ordinary user (multihost.sh drops to one; issue 26): as root, a host's
# devices would hide what a user's meet.
if [ "$(id -u)" -eq 0 ]; then echo "FAIL: h$i runs its Hearth processes as root"; exit 1; fi
me="$shared/h$i"
mkdir -p "$me"
export XDG_RUNTIME_DIR=/run/hearth-user
mkdir -p -m 0700 "$XDG_RUNTIME_DIR"
export XDG_CONFIG_HOME="$me/config" XDG_DATA_HOME="$me/data"
# Settings from the outside must not leak into the devices.
unset HEARTH_PEERS HEARTH_CONFIG_DIR HEARTH_DATA_DIR HEARTH_PASSPHRASE
data="$XDG_DATA_HOME/hearth"
folders=(--config-dir "$XDG_CONFIG_HOME/hearth" --data-dir "$data")

h() { "$hearth" "$@" "${folders[@]}"; }
flag() { touch "$shared/$1"; }
await() {   # await FLAG [SECONDS]
    local n=$(( ${2:-90} * 10 ))
    for _ in $(seq "$n"); do [ -e "$shared/$1" ] && return 0; sleep 0.1; done
    echo "FAIL: h$i timed out waiting for $1"; exit 1
}
daemon_pid=""
stop_daemon() {
    [ -n "$daemon_pid" ] || return 0
    kill -TERM "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
    daemon_pid=""
}
