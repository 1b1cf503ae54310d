# Who runs Hearth's processes in the tests, CI and the demo (issue 26). Sourced, not run.
#
# Hearth runs as an ordinary user; root hides what such a user meets (a socket option only
# root may set made every connection fail for everyone else, and nothing noticed while every
# test ran as root). So a script run as root uses root only to install packages, build, make
# network namespaces and start avahi/dbus, and runs every Hearth process (the test suite, the
# demo's devices, the fuzz targets) as the unprivileged user $HEARTH_TEST_USER (default
# hearth-test; a system user made here if missing, home /var/lib/hearth-test for SwiftPM's
# caches). Run by any other user, a script runs as that user and nothing changes.
#
# HEARTH_TEST_AS_ROOT=1 says root is intended: nothing is dropped (scripts/test.sh sets it for
# the few tests whose harness needs root; see docs/architecture.md, "Who runs the tests").
#
# After `hearth_user_init [always]` (always: drop even with HEARTH_TEST_AS_ROOT=1, for
# processes that never need root, like multihost.sh's per-host commands):
#   HEARTH_AS_USER   an array to put before a command so that it runs as the user (empty if
#                    no drop is needed): setpriv, then env with a home of the user's and none
#                    of root's per-user folders (XDG_RUNTIME_DIR=/run/user/0 would be refused),
#                    nor root's SHELL: the user's login shell is nologin, and CI sets no
#                    SHELL, so nothing may rely on one (tmux would start nologin)
#   HEARTH_RUNNER    "hearth-test (uid 999)", for the scripts' output
# and `hearth_user_owns DIR…` makes DIR (created if missing) the user's, recursively;
# `hearth_user_owns_build DIR` does so for a SwiftPM build folder that root has just built.

HEARTH_TEST_USER="${HEARTH_TEST_USER:-hearth-test}"

hearth_user_init() {
    HEARTH_AS_USER=()
    if [ "$(id -u)" -ne 0 ]; then
        HEARTH_RUNNER="$(id -un) (uid $(id -u))"
        return 0
    fi
    if [ "${HEARTH_TEST_AS_ROOT:-0}" = 1 ] && [ "${1:-}" != always ]; then
        HEARTH_RUNNER="root (HEARTH_TEST_AS_ROOT=1)"
        return 0
    fi
    command -v setpriv >/dev/null || { echo "user: setpriv (util-linux) is missing" >&2; return 1; }
    if ! id -u "$HEARTH_TEST_USER" >/dev/null 2>&1; then
        command -v useradd >/dev/null || { echo "user: useradd (Debian package passwd) is missing" >&2; return 1; }
        useradd --system --user-group --create-home --home-dir "/var/lib/$HEARTH_TEST_USER" \
            --shell /usr/sbin/nologin --comment "runs Hearth's tests and demo (scripts/user.sh)" "$HEARTH_TEST_USER" \
            || { echo "user: cannot create the user $HEARTH_TEST_USER" >&2; return 1; }
        echo "user: created the system user $HEARTH_TEST_USER (home /var/lib/$HEARTH_TEST_USER)" >&2
    fi
    local uid gid home
    uid=$(id -u "$HEARTH_TEST_USER") gid=$(id -g "$HEARTH_TEST_USER")
    home=$(getent passwd "$HEARTH_TEST_USER" | cut -d: -f6)
    [ "$uid" -ne 0 ] || { echo "user: $HEARTH_TEST_USER has uid 0" >&2; return 1; }
    mkdir -p "$home" && chown "$uid:$gid" "$home" && chmod 0700 "$home"
    HEARTH_AS_USER=(setpriv --reuid "$uid" --regid "$gid" --init-groups
        env -u XDG_RUNTIME_DIR -u XDG_CONFIG_HOME -u XDG_DATA_HOME -u XDG_CACHE_HOME -u XDG_STATE_HOME
        -u DBUS_SESSION_BUS_ADDRESS -u MAIL -u SHELL HOME="$home" USER="$HEARTH_TEST_USER" LOGNAME="$HEARTH_TEST_USER")
    HEARTH_RUNNER="$HEARTH_TEST_USER (uid $uid)"
    export HEARTH_TEST_USER
}

hearth_user_owns() {
    [ ${#HEARTH_AS_USER[@]} -gt 0 ] || return 0
    local dir
    for dir in "$@"; do
        mkdir -p "$dir" && chown -R "$HEARTH_TEST_USER:" "$dir"
    done
}

# A build folder root built, for `swift test` as the user: the folder, and SwiftPM's lock files
# for it, which SwiftPM keeps in $TMPDIR named after the folder's path ("/w/x/.build" ->
# "_w_x_.build.lock", "_w_x_.build_workspace-state.json.lock"). Root made them: readable and
# writable by all, they stay root's, as /tmp is, so that fs.protected_regular lets the user
# open them and root still may afterwards (were they the user's, root could not open them
# with O_CREAT in a sticky folder).
hearth_user_owns_build() {
    [ ${#HEARTH_AS_USER[@]} -gt 0 ] || return 0
    hearth_user_owns "$1"
    local prefix lock
    prefix="${TMPDIR:-/tmp}/$(cd "$1" && pwd | tr / _)"
    for lock in "$prefix".lock "$prefix"_*.lock; do
        if [ -f "$lock" ] && [ "$(stat -c %u "$lock")" = 0 ]; then chmod a+rw "$lock"; fi
    done
}
