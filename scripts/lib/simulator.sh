# Starts the Live simulator (or $SIM_BINARY: hark-cascade-sim, hark-datagrid-sim) in the background and sets
# SIM_PID and SIM_URL.
# usage: start_simulator BIN_DIR LOG_DIR [simulator flags...]
start_simulator() {
    local bin="$1" logs="$2"
    shift 2
    : >"$logs/simulator.out"
    "$bin/${SIM_BINARY:-hark-live-sim}" --port 0 "$@" >"$logs/simulator.out" 2>"$logs/simulator.log" &
    SIM_PID=$!
    for _ in $(seq 1 200); do
        if grep -q '^listening on ' "$logs/simulator.out"; then
            SIM_URL=$(sed -n 's/^listening on \([^ ]*\).*/\1/p' "$logs/simulator.out" | head -n 1)
            return 0
        fi
        if ! kill -0 "$SIM_PID" 2>/dev/null; then
            echo "the simulator exited; its log:" >&2
            cat "$logs/simulator.log" >&2
            return 1
        fi
        sleep 0.05
    done
    echo "the simulator did not start within 10 s" >&2
    return 1
}

stop_simulator() {
    if [ -n "${SIM_PID:-}" ]; then
        kill "$SIM_PID" 2>/dev/null || true
        wait "$SIM_PID" 2>/dev/null || true
        SIM_PID=""
    fi
}
