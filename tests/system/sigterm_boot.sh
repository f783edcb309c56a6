#!/usr/bin/env bash
# SIGTERM while the guest is booting: mvm tears down cleanly (exit 143,
# 128+SIGTERM) and leaves no process behind.
. "$(dirname "$0")/lib.sh"
marker="mvm-sigterm-$$-$RANDOM"
"$MVM" "${SYS_IDS[@]}" --cpus 2 --cmdline "-- sleep 600 # $marker" </dev/null >"$SYS_TMP/out" 2>&1 &
pid=$!
sleep "${SYS_SIGTERM_DELAY:-1}"
kill -0 "$pid" 2>/dev/null || { cat "$SYS_TMP/out"; fail "mvm ended before SIGTERM"; }
kill -TERM "$pid"
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fail "mvm still running 10 s after SIGTERM"; fi
wait "$pid"; rc=$?
tail -n 5 "$SYS_TMP/out" | tr -d '\r' | sed 's/^/    guest| /'
[ "$rc" -eq 143 ] || fail "mvm exited $rc after SIGTERM, expected 143"
left=$(pgrep -f "$marker" || true)
[ -z "$left" ] || fail "mvm processes left: $left"
echo "mvm exited 143 after SIGTERM; no mvm process left"
