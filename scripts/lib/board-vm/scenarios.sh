# The virtual board's scenarios (scripts/board-vm): sourced by it once the package is installed in the
# guest (or, with --rerun, in a guest left running by --keep). Uses what scripts/board-vm defines: out,
# share, lib, scenarios, ready_within, guest_run, wait_agent, boot_id, say. Each scenario prints one
# line, "PASS|FAIL N name (S s) figures", here and in out/board-vm/results.txt; its files are
# out/board-vm/sN*.txt and out/board-vm/share/results/sN*/.
# shellcheck shell=bash disable=SC2154

# Every scenario prints "PASS|FAIL N name (S s) figures" here and in out/board-vm/results.txt.
failures=0
report() { # VERDICT NUMBER NAME SECONDS DETAILS
    local line
    line="$(printf '%s %s %s (%s s) %s' "$1" "$2" "$3" "$4" "$5")"
    printf '%s\n' "$line" | tee -a "$out/results.txt"
    [ "$1" = PASS ] || failures=$((failures + 1))
}
field() { sed -n "s/^$1=//p" "$2" | tail -n 1; }
wanted() { case ",$scenarios," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# Shell functions for the scenarios' guest scripts: `with_functions <<'EOF' | guest_run ...` puts them
# before the script.
with_functions() {
    cat <<'FUNCTIONS'
# The journal's cursor now: a later read starts after it.
cursor() { journalctl -n 0 --show-cursor -o cat | sed -n 's/^-- cursor: //p'; }
# Seconds since boot: the clock of the journal's monotonic stamps and of systemd's *Monotonic properties.
now() { cut -d' ' -f1 /proc/uptime; }
# The first monotonic stamp of a line matching PATTERN in the unit's journal after CURSOR.
stamp() { journalctl -q --after-cursor="$1" -u hark -o short-monotonic --no-pager | grep -e "$2" | head -n 1 | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p'; }
# wait_active SECONDS [OLD_PID]: until hark runs (ActiveState active, not reloading) with a main process
# other than OLD_PID; status 1 if it does not within SECONDS. Both read at once: a process that dies
# between two reads would otherwise pass for a new one (MainPID 0 beside the old ActiveState).
wait_active() {
    local end=$((SECONDS + $1)) state
    while [ $SECONDS -lt "$end" ]; do
        state="$(systemctl show -p ActiveState -p MainPID hark)"
        if grep -qx 'ActiveState=active' <<<"$state" && ! grep -qx -e 'MainPID=0' -e "MainPID=${2:-0}" <<<"$state"; then
            return 0
        fi
        sleep 0.2
    done
    return 1
}
# with_mode MODE: hark runs in MODE; the file is edited and the service restarted only if it was not so.
with_mode() {
    if ! grep -q "^mode: $1\$" /etc/hark/hark.yaml || [ "$(systemctl show -P ActiveState hark)" != active ]; then
        sed -i "s/^mode: .*/mode: $1/" /etc/hark/hark.yaml
        systemctl restart hark || true
    fi
    wait_active 150
}
# A digest of the stored resumption handle (never the handle itself), or "none".
handle_digest() {
    local handle
    handle="$(sed -n 's/.*"handle" *: *"\([^"]*\)".*/\1/p' /var/lib/hark/resumption.json 2>/dev/null)"
    if [ -n "$handle" ]; then printf '%s' "$handle" | sha256sum | cut -c1-12; else echo none; fi
}
# The unit's state in one word: ActiveState/SubState.
unit_state() { echo "$(systemctl show -P ActiveState hark)/$(systemctl show -P SubState hark)"; }
FUNCTIONS
    cat
}
# seconds FROM TO: TO - FROM with one decimal ("?" when either is missing).
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "") print "?"; else printf "%.1f", b - a }'; }
# The simulator's log after line FROM.
simulator_since() { tail -n +"$(($1 + 1))" "$out/simulator.log"; }

# A spoken turn through the loopback card, as the guest helper does it: ARGS: NAME BUTTON(yes|no).
# Records the card's answer end (1,1) from before the question until the daemon is idle again; the
# question is played into the microphone's far end (0,0). Prints key=value figures; the files go to
# results/NAME/.
spoken_turn_script() {
    cat <<EOF
res=/mnt/board/results/$1
mkdir -p \$res
cursor="\$(journalctl -n 0 --show-cursor -o cat | sed -n 's/^-- cursor: //p')"
arecord -q -D plughw:CARD=Loopback,DEV=1,SUBDEV=1 -f S16_LE -r 24000 -c 1 -t wav \$res/answer.wav &
recorder=\$!
sleep 0.5
start=\$(date +%s.%N)
[ $2 = yes ] && echo press >/run/hark-virt-button
[ $2 = yes ] && sleep 0.3
aplay -q -D plughw:CARD=Loopback,DEV=0,SUBDEV=0 /mnt/board/question.wav
[ $2 = yes ] && sleep 0.3
[ $2 = yes ] && echo release >/run/hark-virt-button
played=\$(date +%s.%N)
# Until the answer has been spoken and the daemon is idle again, or it gave up, or 60 s.
SECONDS=0
while [ \$SECONDS -lt 60 ]; do
    journalctl -q --after-cursor="\$cursor" -u hark -o cat >\$res/journal.txt
    if grep -q 'state: speaking' \$res/journal.txt && sed -n '/state: speaking/,\$p' \$res/journal.txt | grep -q 'state: idle'; then
        break
    fi
    grep -q 'giving up' \$res/journal.txt && break
    sleep 0.2
done
# A microphone that cannot be reopened: who holds the loopback's capture substreams (owner_pid).
if grep -q 'resource busy' \$res/journal.txt; then
    for sub in /proc/asound/Loopback/pcm1c/sub*; do echo "== \$sub"; cat \$sub/status \$sub/hw_params; done >\$res/busy.txt 2>&1
    for p in /proc/[0-9]*; do
        ls -l \$p/fd 2>/dev/null | grep /dev/snd | sed "s|^|\$p \$(cat \$p/comm 2>/dev/null): |"
    done >>\$res/busy.txt
    ps -eLo pid,tid,comm,stat,wchan:32 >>\$res/busy.txt
fi
sleep 0.5
kill -INT \$recorder; wait \$recorder
echo "played=\$(awk -v a="\$start" -v b="\$played" 'BEGIN { printf "%.1f", b - a }')"
echo "states=\$(sed -n 's/.*state: \([a-z-]*\).*/\1/p' \$res/journal.txt | uniq | paste -sd' ')"
echo "trigger=\$(sed -n 's/^  trigger: *\([a-z]*\).*/\1/p' /etc/hark/hark.yaml)"
hark status >\$res/status.txt 2>&1 || true
EOF
}

if wanted 1 || wanted 2 || wanted 3; then
    say "rebooting into the installed appliance"
    guest_run reboot 10 <<<"(sleep 0.5; systemctl reboot) >/dev/null 2>&1 &" >/dev/null || true
    started=$SECONDS
    boot_id="$(wait_agent "$boot_id" 180)" || die "the guest did not come back after the reboot"
    guest_up=$((SECONDS - started))
fi

if wanted 1; then
    started=$SECONDS
    guest_run ready $((ready_within + 30)) >"$out/s1.txt" 2>&1 <<EOF || true
for _ in \$(seq 1 $((ready_within * 10))); do
    [ "\$(cut -d' ' -f1 /proc/uptime | cut -d. -f1)" -ge $ready_within ] && break
    systemctl is-active -q hark && break
    sleep 0.1
done
echo "active=\$(systemctl is-active hark)"
echo "ready_us=\$(systemctl show -P ActiveEnterTimestampMonotonic hark)"
echo "restarts=\$(systemctl show -P NRestarts hark)"
echo "userspace_us=\$(systemctl show -P UserspaceTimestampMonotonic)"
echo "== hark status"
hark status
echo "== journal"
journalctl -q -b -u hark -o short-monotonic --no-pager
echo "== systemd about the unit (warnings)"
journalctl -q -b -p warning -o short-monotonic --no-pager _PID=1 | grep -i hark || true
journalctl -q -b -p warning -o short-monotonic --no-pager UNIT=hark.service || true
echo "== end"
echo "status_idle=\$(hark status 2>&1 | grep -ciw idle)"
echo "started_line=\$(journalctl -q -b -u hark -o cat | grep -c 'ready: idle')"
echo "systemd_warnings=\$( (journalctl -q -b -p warning -o cat _PID=1 | grep -i hark; journalctl -q -b -p warning -o cat UNIT=hark.service) | grep -vc '^-- ')"
echo "daemon_warnings=\$(journalctl -q -b -p warning -o cat _SYSTEMD_UNIT=hark.service | grep -vc '^-- ')"
# A thread priority the unit does not grant: Dispatch says so in the journal (LimitNICE= is for it).
echo "priority_refused=\$(journalctl -q -b -o cat _SYSTEMD_UNIT=hark.service | grep -c 'Failed to set thread priority')"
EOF
    active="$(field active "$out/s1.txt")"
    ready_us="$(field ready_us "$out/s1.txt")"
    ready_s="$(awk -v us="${ready_us:-0}" 'BEGIN { printf "%.1f", us / 1e6 }')"
    warnings="$(field systemd_warnings "$out/s1.txt")"
    details="active ${ready_s} s after the kernel started (limit $ready_within s), guest agent up ${guest_up} s after the reboot, restarts $(field restarts "$out/s1.txt"), hark status idle: $([ "$(field status_idle "$out/s1.txt")" -gt 0 ] 2>/dev/null && echo yes || echo no), systemd warnings ${warnings:-?}, daemon warnings $(field daemon_warnings "$out/s1.txt"), thread priorities refused $(field priority_refused "$out/s1.txt") (out/board-vm/s1.txt)"
    if [ "$active" = active ] && awk -v s="$ready_s" -v l="$ready_within" 'BEGIN { exit !(s > 0 && s <= l) }' &&
        [ "$(field status_idle "$out/s1.txt")" -gt 0 ] 2>/dev/null && [ "$(field started_line "$out/s1.txt")" -gt 0 ] 2>/dev/null &&
        [ "${warnings:-1}" -eq 0 ] && [ "$(field priority_refused "$out/s1.txt")" = 0 ]; then
        report PASS 1 "boot to READY=1" "$ready_s" "$details"
    else
        report FAIL 1 "boot to READY=1" "$ready_s" "$details; active=$active"
    fi
fi

# turn_verdict NAME LOG_LINE FILE: how a spoken turn went, from results/NAME, the simulator's log after
# line LOG_LINE and the guest's figures in FILE: a turn's answer finished, the recording holds that turn's
# beeps (their frequency) over as long a span as the simulator sent (within 0.5 s), and the states went
# listening ... speaking ... idle. Sets turn_ok (yes or no), turn_number and turn_details.
turn_verdict() {
    local name="$1" from="$2" file="$3" figures finished sent span states expected_hz
    finished="$(tail -n +"$((from + 1))" "$out/simulator.log" | grep 'answer finished' | tail -n 1 || true)"
    turn_number="$(sed -n 's/.*turn=\([0-9]*\).*/\1/p' <<<"$finished")"
    sent="$(sed -n 's/.*audio=\([0-9.]*\)s.*/\1/p' <<<"$finished")"
    expected_hz=$((${turn_number:-1} % 4 == 1 ? 440 : ${turn_number:-1} % 4 == 2 ? 550 : ${turn_number:-1} % 4 == 3 ? 660 : 880))
    figures="no recording"
    [ -f "$share/results/$name/answer.wav" ] &&
        figures="$(python3 "$lib/answer-audio.py" "$share/results/$name/answer.wav" "$expected_hz" 2>&1 | tail -n 1 || true)"
    span="$(sed -n 's/.* answer=\([0-9.]*\).*/\1/p' <<<"$figures")"
    states="$(field states "$file")"
    turn_details="simulator: turn ${turn_number:-none} answered with ${sent:-no} s of audio at $expected_hz Hz; recorded: $figures; states: ${states:-none} (out/board-vm/$(basename "$file"))"
    turn_ok=no
    if [ -n "$sent" ] && [ -n "$span" ] &&
        awk -v a="$sent" -v b="$span" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.5) }' &&
        grep -q 'listening.*speaking.*idle' <<<"$states"; then
        turn_ok=yes
    fi
}

# judge_turn NUMBER NAME STARTED LOG_LINE TITLE [NOTE]: the verdict on a spoken turn (turn_verdict), its
# line, NOTE first in its figures.
judge_turn() {
    turn_verdict "$2" "$4" "$out/s$1.txt"
    report "$([ "$turn_ok" = yes ] && echo PASS || echo FAIL)" "$1" "$5" "$((SECONDS - $3))" "${6:+$6; }$turn_details"
}

if wanted 2; then
    started=$SECONDS
    from="$(wc -l <"$out/simulator.log")"
    spoken_turn_script s2 no | guest_run speaker-turn 120 >"$out/s2.txt" 2>&1 || true
    judge_turn 2 s2 "$started" "$from" "spoken turn, speaker mode" "session.trigger $(field trigger "$out/s2.txt")"
fi

if wanted 3; then
    started=$SECONDS
    guest_run push-to-talk 30 >"$out/s3-reload.txt" 2>&1 <<'EOF' || true
sed -i 's/^mode: .*/mode: push-to-talk/' /etc/hark/hark.yaml
# A restart, not a reload: this scenario is about the button (reloading is scenario 6's).
systemctl restart hark
SECONDS=0
while [ $SECONDS -lt 60 ]; do systemctl is-active -q hark && break; sleep 0.2; done
systemctl is-active hark
journalctl -u hark -n 5 -o cat --no-pager
EOF
    from="$(wc -l <"$out/simulator.log")"
    spoken_turn_script s3 yes | guest_run ptt-turn 120 >"$out/s3.txt" 2>&1 || true
    judge_turn 3 s3 "$started" "$from" "push-to-talk with the uinput button"
fi

if wanted 4; then
    started=$SECONDS
    # A conversation to resume: push-to-talk (the button opens the session) and one turn, unless a handle is
    # stored already (scenario 3's).
    with_functions <<'EOF' | guest_run watchdog-prepare 200 >"$out/s4-prepare.txt" 2>&1 || true
with_mode push-to-talk
echo "state=$(unit_state)"
echo "handle=$(handle_digest)"
EOF
    if [ "$(field handle "$out/s4-prepare.txt")" = none ]; then
        spoken_turn_script s4-first yes | guest_run first-turn 180 >"$out/s4-first.txt" 2>&1 || true
    fi
    # The daemon stopped dead (SIGSTOP: no thread runs, nothing pings): systemd's watchdog kills it and
    # Restart= starts it again.
    with_functions <<'EOF' | guest_run watchdog 300 >"$out/s4.txt" 2>&1 || true
pid="$(systemctl show -P MainPID hark)"
restarts="$(systemctl show -P NRestarts hark)"
echo "handle_before=$(handle_digest)"
from="$(cursor)"
stopped="$(now)"
kill -STOP "$pid"
wait_active 240 "$pid"
echo "state=$(unit_state)"
echo "stopped=$stopped"
echo "watchdog=$(stamp "$from" 'Watchdog timeout')"
echo "ready=$(awk -v us="$(systemctl show -P ActiveEnterTimestampMonotonic hark)" 'BEGIN { printf "%.3f", us / 1e6 }')"
echo "watchdog_limit=$(systemctl show -P WatchdogUSec hark)"
echo "result_watchdog=$(journalctl -q --after-cursor="$from" -u hark -o cat | grep -c "Failed with result 'watchdog'")"
echo "restarts=$(($(systemctl show -P NRestarts hark) - restarts))"
echo "handle_after=$(handle_digest)"
journalctl -q --after-cursor="$from" -u hark -o short-monotonic --no-pager
EOF
    # The next turn resumes the stored conversation: the simulator accepts a setup that resumes, and the
    # turns count on in the same session.
    from="$(wc -l <"$out/simulator.log")"
    spoken_turn_script s4-turn yes | guest_run resumed-turn 180 >"$out/s4-turn.txt" 2>&1 || true
    turn_verdict s4-turn "$from" "$out/s4-turn.txt"
    resumed_session="$(simulator_since "$from" | grep 'setup accepted' | grep 'resumed=true' | head -n 1 |
        sed -n 's/.* session=\([0-9]*\).*/\1/p' || true)"
    resuming="$(grep -c 'connecting to .*(resuming)' "$share/results/s4-turn/journal.txt" 2>/dev/null || true)"
    stopped="$(field stopped "$out/s4.txt")"
    handle_before="$(field handle_before "$out/s4.txt")"
    handle_kept=no
    [ "$handle_before" != none ] && [ -n "$handle_before" ] && [ "$handle_before" = "$(field handle_after "$out/s4.txt")" ] &&
        handle_kept=yes
    details="SIGSTOP -> watchdog timeout $(seconds "$stopped" "$(field watchdog "$out/s4.txt")") s (WatchdogSec $(field watchdog_limit "$out/s4.txt")) -> ready again $(seconds "$stopped" "$(field ready "$out/s4.txt")") s after the stop, result 'watchdog': $(field result_watchdog "$out/s4.txt"), restarts $(field restarts "$out/s4.txt"), stored handle kept: $handle_kept; next turn: $(
        [ -n "$resumed_session" ] && echo "resumed session $resumed_session" || echo "not resumed"), daemon connected resuming: ${resuming:-0}; $turn_details"
    if [ "$(field result_watchdog "$out/s4.txt")" -ge 1 ] 2>/dev/null && [ "$(field state "$out/s4.txt")" = active/running ] &&
        [ "$handle_kept" = yes ] && [ -n "$resumed_session" ] && [ "${resuming:-0}" -ge 1 ] && [ "$turn_ok" = yes ]; then
        report PASS 4 "watchdog" "$((SECONDS - started))" "$details"
    else
        report FAIL 4 "watchdog" "$((SECONDS - started))" "$details"
    fi
fi

if wanted 5; then
    started=$SECONDS
    # The sound card goes away mid-session, as a USB card pulled out would: the button held, the session
    # connected, then snd-aloop's device is unbound from its driver (the card disconnects under the open
    # PCMs). The daemon gives up after its device rule's 20 s, systemd restarts it, and every start fails
    # to open the card while it is gone. Then the module is loaded again (or the device bound again).
    with_functions <<'EOF' | guest_run card-gone 420 >"$out/s5.txt" 2>&1 || true
with_mode push-to-talk
pid="$(systemctl show -P MainPID hark)"
restarts="$(systemctl show -P NRestarts hark)"
from="$(cursor)"
echo press >/run/hark-virt-button
end=$((SECONDS + 60))
while [ $SECONDS -lt "$end" ]; do
    journalctl -q --after-cursor="$from" -u hark -o cat | grep -q 'session connected' && break
    sleep 0.2
done
echo "connected=$(journalctl -q --after-cursor="$from" -u hark -o cat | grep -c 'session connected')"
gone="$(now)"
echo snd_aloop.0 >/sys/bus/platform/drivers/snd_aloop/unbind
echo release >/run/hark-virt-button
echo "gone=$gone"
echo "cards_gone=$(grep -c Loopback /proc/asound/cards)"
# Until systemd has started it twice without the card (the second start proves the first failed too).
end=$((SECONDS + 240))
while [ $SECONDS -lt "$end" ]; do
    [ $(($(systemctl show -P NRestarts hark) - restarts)) -ge 2 ] && break
    sleep 0.5
done
echo "restarts_gone=$(($(systemctl show -P NRestarts hark) - restarts))"
echo "state_gone=$(unit_state)"
echo "gave_up=$(stamp "$from" 'giving up')"
echo "gave_up_line=$(journalctl -q --after-cursor="$from" -u hark -o cat | grep 'giving up' | head -n 1)"
echo "open_failures=$(journalctl -q --after-cursor="$from" -u hark -o cat | grep -c 'giving up: the audio devices would not open')"
back="$(now)"
if modprobe -r snd-aloop 2>/dev/null; then
    modprobe snd-aloop
    echo "card_back=module loaded again"
else
    echo snd_aloop.0 >/sys/bus/platform/drivers/snd_aloop/bind
    echo "card_back=device bound again (the module was in use)"
fi
echo "back=$back"
wait_active 240 "$pid"
echo "state=$(unit_state)"
echo "ready=$(awk -v us="$(systemctl show -P ActiveEnterTimestampMonotonic hark)" 'BEGIN { printf "%.3f", us / 1e6 }')"
echo "restarts=$(($(systemctl show -P NRestarts hark) - restarts))"
journalctl -q --after-cursor="$from" -u hark -o short-monotonic --no-pager
EOF
    # Recovered without a reboot: a turn through the card that came back.
    from="$(wc -l <"$out/simulator.log")"
    spoken_turn_script s5-turn yes | guest_run turn-after-card 180 >"$out/s5-turn.txt" 2>&1 || true
    turn_verdict s5-turn "$from" "$out/s5-turn.txt"
    gone="$(field gone "$out/s5.txt")"
    gave_up="$(field gave_up "$out/s5.txt")"
    details="card unbound mid-session (session connected: $(field connected "$out/s5.txt")) -> the daemon gave up $(seconds "$gone" "$gave_up") s later ($(field gave_up_line "$out/s5.txt" | cut -c1-90)); while gone: $(field restarts_gone "$out/s5.txt") restarts, $(field open_failures "$out/s5.txt") starts that could not open the card, state $(field state_gone "$out/s5.txt"); $(field card_back "$out/s5.txt") -> active $(seconds "$(field back "$out/s5.txt")" "$(field ready "$out/s5.txt")") s later ($(field state "$out/s5.txt")), restarts in all $(field restarts "$out/s5.txt"); turn after: $turn_details"
    if [ -n "$gave_up" ] && [ "$(field restarts_gone "$out/s5.txt")" -ge 2 ] 2>/dev/null &&
        [ "$(field state "$out/s5.txt")" = active/running ] && [ "$turn_ok" = yes ]; then
        report PASS 5 "sound card gone and back" "$((SECONDS - started))" "$details"
    else
        report FAIL 5 "sound card gone and back" "$((SECONDS - started))" "$details"
    fi
fi

if wanted 6; then
    started=$SECONDS
    # A changed mode, applied by a reload: the daemon started in speaker mode, the owner edits the file to
    # push-to-talk and reloads. The same process (no restart) then answers a push-to-talk turn: the button
    # does what the new mode says.
    with_functions <<'EOF' | guest_run reload-mode 240 >"$out/s6-reload.txt" 2>&1 || true
with_mode speaker
pid="$(systemctl show -P MainPID hark)"
echo "mode_before=$(sed -n 's/.*"mode" *: *"\([^"]*\)".*/\1/p' /run/hark/status.json)"
sed -i 's/^mode: .*/mode: push-to-talk/' /etc/hark/hark.yaml
from="$(cursor)"
asked="$(now)"
systemctl reload hark
echo "reload_status=$?"
returned="$(now)"
echo "mode_on_return=$(sed -n 's/.*"mode" *: *"\([^"]*\)".*/\1/p' /run/hark/status.json)"
end=$((SECONDS + 30))
while [ $SECONDS -lt "$end" ]; do
    grep -q '"mode" *: *"push-to-talk"' /run/hark/status.json && break
    sleep 0.1
done
applied="$(now)"
wait_active 30
echo "mode_after=$(sed -n 's/.*"mode" *: *"\([^"]*\)".*/\1/p' /run/hark/status.json)"
echo "reload_took=$(awk -v a="$asked" -v b="$returned" 'BEGIN { printf "%.1f", b - a }')"
echo "applied_after=$(awk -v a="$asked" -v b="$applied" 'BEGIN { printf "%.1f", b - a }')"
echo "same_process=$([ "$(systemctl show -P MainPID hark)" = "$pid" ] && echo yes || echo no)"
echo "reloaded_line=$(journalctl -q --after-cursor="$from" -u hark -o cat | grep -c 'reloading the configuration (mode push-to-talk')"
journalctl -q --after-cursor="$from" -u hark -o short-monotonic --no-pager
EOF
    from="$(wc -l <"$out/simulator.log")"
    spoken_turn_script s6-turn yes | guest_run turn-after-reload 180 >"$out/s6-turn.txt" 2>&1 || true
    turn_verdict s6-turn "$from" "$out/s6-turn.txt"
    reload_ok=no
    [ "$(field mode_after "$out/s6-reload.txt")" = push-to-talk ] && [ "$(field same_process "$out/s6-reload.txt")" = yes ] &&
        [ "$(field reload_status "$out/s6-reload.txt")" = 0 ] && [ "$turn_ok" = yes ] && reload_ok=yes

    # A broken file: a misspelt key. A reload keeps the running configuration and says why; a restart
    # fails with the file, the line and the key in `systemctl status`; the file fixed, it starts again.
    with_functions <<'EOF' | guest_run broken-config 300 >"$out/s6.txt" 2>&1 || true
cp /etc/hark/hark.yaml /run/board-vm/hark.yaml.good
sed -i 's/^  idle_timeout: \(.*\)$/&\n  idle_timout: \1/' /etc/hark/hark.yaml
line="$(grep -n '^  idle_timout:' /etc/hark/hark.yaml | cut -d: -f1)"
expected="/etc/hark/hark.yaml:$line: session.idle_timout"
echo "expected=$expected"
pid="$(systemctl show -P MainPID hark)"
from="$(cursor)"
systemctl reload hark
end=$((SECONDS + 30))
while [ $SECONDS -lt "$end" ]; do
    journalctl -q --after-cursor="$from" -u hark -o cat | grep -q 'reload failed' && break
    sleep 0.2
done
sleep 1
echo "reload_kept=$([ "$(systemctl show -P MainPID hark)" = "$pid" ] && echo "$(unit_state)" || echo restarted)"
echo "reload_message=$(journalctl -q --after-cursor="$from" -u hark -o cat | grep 'reload failed' | grep -cF "$expected")"
systemctl restart hark
echo "restart_status=$?"
# The failed start's state and what `systemctl status` shows of it.
sleep 2
echo "state_broken=$(unit_state) ($(systemctl show -P Result hark), exit status $(systemctl show -P ExecMainStatus hark))"
systemctl status hark --no-pager -l -n 20 >/mnt/board/results/s6-status.txt 2>&1
echo "status_message=$(grep -cF "$expected" /mnt/board/results/s6-status.txt)"
echo "status_line=$(grep -F "$expected" /mnt/board/results/s6-status.txt | head -n 1 | sed 's/^.*hark\[[0-9]*\]: //')"
# Fixed. Restart=on-failure tries again every RestartSec; without that, the owner starts it.
cp /run/board-vm/hark.yaml.good /etc/hark/hark.yaml
fixed="$(now)"
if wait_active 60; then
    echo "started_by=itself (Restart=on-failure)"
else
    systemctl restart hark
    wait_active 150
    echo "started_by=systemctl restart"
fi
echo "state=$(unit_state)"
echo "fixed=$fixed"
echo "ready=$(awk -v us="$(systemctl show -P ActiveEnterTimestampMonotonic hark)" 'BEGIN { printf "%.3f", us / 1e6 }')"
echo "restarts=$(systemctl show -P NRestarts hark)"
journalctl -q --after-cursor="$from" -u hark -o short-monotonic --no-pager
EOF
    details="reload to push-to-talk: systemctl reload took $(field reload_took "$out/s6-reload.txt") s, hark status said $(field mode_on_return "$out/s6-reload.txt") when it returned and $(field mode_after "$out/s6-reload.txt") $(field applied_after "$out/s6-reload.txt") s after it was asked, same process: $(field same_process "$out/s6-reload.txt"), turn after: $turn_details; broken file: reload kept the running daemon ($(field reload_kept "$out/s6.txt"), message: $(field reload_message "$out/s6.txt")), restart -> $(field state_broken "$out/s6.txt"), systemctl status shows '$(field status_line "$out/s6.txt" | cut -c1-80)': $(field status_message "$out/s6.txt"); fixed -> active $(seconds "$(field fixed "$out/s6.txt")" "$(field ready "$out/s6.txt")") s later, started by $(field started_by "$out/s6.txt")"
    if [ "$reload_ok" = yes ] && [ "$(field reload_kept "$out/s6.txt")" = active/running ] &&
        [ "$(field reload_message "$out/s6.txt")" -ge 1 ] 2>/dev/null &&
        [ "$(field status_message "$out/s6.txt")" -ge 1 ] 2>/dev/null && [ "$(field state "$out/s6.txt")" = active/running ]; then
        report PASS 6 "reload and a broken configuration" "$((SECONDS - started))" "$details"
    else
        report FAIL 6 "reload and a broken configuration" "$((SECONDS - started))" "$details"
    fi
fi

if wanted 7; then
    started=$SECONDS
    # The sandbox as the running daemon has it: systemd's own exposure figure; the kernel's view of the
    # process (no new privileges, a seccomp filter, no capabilities); what its mount namespace lets the
    # hark user read (nsenter into that namespace, setpriv to the service's user and groups); and every
    # file the hark user owns there (its private /tmp and /var/tmp included) before and after a turn.
    with_functions <<'EOF' | guest_run hardening 300 >"$out/s7.txt" 2>&1 || true
with_mode push-to-talk
pid="$(systemctl show -P MainPID hark)"
echo "pid=$pid"
systemd-analyze security hark --no-pager >/mnt/board/results/s7-security.txt 2>&1
echo "exposure=$(sed -n 's/.*Overall exposure level for hark.service: \([0-9.]*\) \([A-Z]*\).*/\1 \2/p' /mnt/board/results/s7-security.txt)"
echo "no_new_privs=$(sed -n 's/^NoNewPrivs:[[:space:]]*//p' /proc/"$pid"/status)"
echo "seccomp=$(sed -n 's/^Seccomp:[[:space:]]*//p' /proc/"$pid"/status)"
echo "cap_eff=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/"$pid"/status)"
# Someone else's files: a user's home (readable by all, so only ProtectHome= stands in the way), a private
# file of theirs elsewhere, root's, the owner's key store, the password hashes.
id alice >/dev/null 2>&1 || useradd -m -s /bin/sh alice
printf 'shopping list\n' >/home/alice/notes.txt
chown alice:alice /home/alice/notes.txt
chmod 644 /home/alice/notes.txt
chmod 755 /home/alice
printf 'private\n' >/srv/alice-private.txt
chown alice:alice /srv/alice-private.txt
chmod 600 /srv/alice-private.txt
as_hark() { nsenter -t "$pid" -m -- setpriv --reuid=hark --regid=hark --init-groups -- "$@"; }
readable=""
for file in /home/alice/notes.txt /srv/alice-private.txt /root/.bashrc /etc/credstore/hark.gemini-api-key /etc/shadow; do
    if as_hark cat "$file" >/dev/null 2>&1; then readable="$readable $file"; fi
done
echo "forbidden_readable=${readable# }"
echo "home_listing=$(as_hark ls -A /home 2>&1 | head -n 3 | paste -sd' ')"
# What it must read (the checks above are not failing for some other reason): its configuration, its key.
missing=""
for file in /etc/hark/hark.yaml "/run/credentials/hark.service/gemini-api-key"; do
    as_hark cat "$file" >/dev/null 2>&1 || missing="$missing $file"
done
echo "allowed_unreadable=${missing# }"
echo "processes_seen=$(as_hark sh -c 'ls -d /proc/[0-9]* | wc -l') of $(ls -d /proc/[0-9]* | wc -l)"
# Every file of the hark user in its namespace, with size and time of change.
nsenter -t "$pid" -m -- find / \( -path /proc -o -path /sys -o -path /mnt/board \) -prune -o \
    \( -user hark -o -group hark \) -printf '%p %s %C@\n' 2>/dev/null | sort >/run/board-vm/hark-files-before.txt
echo "files_before=$(wc -l </run/board-vm/hark-files-before.txt)"
EOF
    from="$(wc -l <"$out/simulator.log")"
    spoken_turn_script s7-turn yes | guest_run turn-for-files 180 >"$out/s7-turn.txt" 2>&1 || true
    with_functions <<'EOF' | guest_run hardening-files 200 >"$out/s7-files.txt" 2>&1 || true
pid="$(systemctl show -P MainPID hark)"
echo "pid=$pid"
nsenter -t "$pid" -m -- find / \( -path /proc -o -path /sys -o -path /mnt/board \) -prune -o \
    \( -user hark -o -group hark \) -printf '%p %s %C@\n' 2>/dev/null | sort >/run/board-vm/hark-files-after.txt
echo "files_after=$(wc -l </run/board-vm/hark-files-after.txt)"
# New or changed files (and the ones gone), by path.
changed="$(comm -3 /run/board-vm/hark-files-before.txt /run/board-vm/hark-files-after.txt | sed 's/^[[:space:]]*//; s/ [0-9.]* [0-9.]*$//' | sort -u)"
echo "changed=$(printf '%s\n' "$changed" | sed '/^$/d' | paste -sd' ')"
echo "outside=$(printf '%s\n' "$changed" | sed '/^$/d' | grep -v -e '^/var/lib/hark\(/\|$\)' -e '^/run/hark\(/\|$\)' | paste -sd' ')"
cp /run/board-vm/hark-files-before.txt /run/board-vm/hark-files-after.txt /mnt/board/results/
EOF
    turn_verdict s7-turn "$from" "$out/s7-turn.txt"
    details="systemd-analyze security: $(field exposure "$out/s7.txt") (out/board-vm/share/results/s7-security.txt); process: NoNewPrivs $(field no_new_privs "$out/s7.txt"), Seccomp $(field seccomp "$out/s7.txt"), CapEff $(field cap_eff "$out/s7.txt"); as the daemon: other users' files readable: $(field forbidden_readable "$out/s7.txt" | sed 's/^$/none/'), /home holds '$(field home_listing "$out/s7.txt")', own files unreadable: $(field allowed_unreadable "$out/s7.txt" | sed 's/^$/none/'), processes seen $(field processes_seen "$out/s7.txt"); hark's files before/after a turn: $(field files_before "$out/s7.txt")/$(field files_after "$out/s7-files.txt"), changed: $(field changed "$out/s7-files.txt" | sed 's/^$/none/'), outside its folders: $(field outside "$out/s7-files.txt" | sed 's/^$/none/'); turn: $turn_ok"
    exposure="$(field exposure "$out/s7.txt" | cut -d' ' -f1)"
    if [ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e <= 3.0) }' &&
        [ "$(field no_new_privs "$out/s7.txt")" = 1 ] && [ "$(field seccomp "$out/s7.txt")" = 2 ] &&
        [ "$(field cap_eff "$out/s7.txt")" = 0000000000000000 ] &&
        [ -z "$(field forbidden_readable "$out/s7.txt")" ] && [ -z "$(field allowed_unreadable "$out/s7.txt")" ] &&
        [ "$(field pid "$out/s7.txt")" = "$(field pid "$out/s7-files.txt")" ] &&
        [ -n "$(field files_after "$out/s7-files.txt")" ] && [ -z "$(field outside "$out/s7-files.txt")" ] &&
        [ "$turn_ok" = yes ]; then
        report PASS 7 "hardening holds" "$((SECONDS - started))" "$details"
    else
        report FAIL 7 "hardening holds" "$((SECONDS - started))" "$details"
    fi
fi

if wanted 9; then
    started=$SECONDS
    # Updates from the signed repository the host serves (scripts/release, a throwaway key), reached at the
    # gateway: a good release is installed and kept; one built to fail (its hark exits at start) is rolled back
    # to the kept package and held, and hark status says why; the next good release is taken. health_for is
    # 60 s here (TCG is slow; the gate's logic is the same at 10 min).
    version="$(dpkg-deb -f "$share/hark.deb" Version)"
    fleet="$out/fleet"
    rm -rf "$fleet" "$share/repo"
    mkdir -p "$fleet"
    install -d -m 0700 "$fleet/gnupg"
    GNUPGHOME="$fleet/gnupg" gpg --batch --quiet --passphrase '' --quick-gen-key 'Hark board-vm <vm@localhost>' \
        ed25519 sign never 2>/dev/null
    GNUPGHOME="$fleet/gnupg" gpg --batch --export-secret-keys >"$fleet/maker.key"
    release_as() { # SUFFIX [fail]: this package as version+SUFFIX, its hark exiting at start with "fail"
        rm -rf "$fleet/pkg"
        dpkg-deb -R "$share/hark.deb" "$fleet/pkg"
        sed -i "s/^Version: .*/Version: $version+$1/" "$fleet/pkg/DEBIAN/control"
        if [ "${2:-}" = fail ]; then printf '#!/bin/sh\necho "built to fail" >&2\nexit 1\n' >"$fleet/pkg/usr/bin/hark"; fi
        dpkg-deb --root-owner-group -Znone --build "$fleet/pkg" "$fleet/hark-$1.deb" >/dev/null
        "$repo/scripts/release" --repo "$share/repo" --key "$fleet/maker.key" --deb "$fleet/hark-$1.deb" >>"$fleet/release.log" 2>&1
    }
    release_as fleet1
    python3 -m http.server --bind 127.0.0.1 0 --directory "$share/repo" >"$fleet/http.log" 2>&1 &
    http_pid=$!
    port=""
    for _ in $(seq 100); do port="$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$fleet/http.log" | head -n 1)"; [ -z "$port" ] || break; sleep 0.1; done
    update_script() { # NAME: runs hark-update --now in the guest, prints NAME_status, NAME_version, NAME_seconds
        cat <<EOF
started=\$SECONDS
UPDATER_POLL=2 /usr/lib/hark/hark-update --now --health-for 60 >/mnt/board/results/s9-$1.txt 2>&1
echo "$1_status=\$?"
echo "$1_seconds=\$((SECONDS - started))"
echo "$1_version=\$(dpkg-query -W -f '\${Version}' hark)"
echo "$1_held=\$(apt-mark showhold | paste -sd' ')"
EOF
    }
    {
        cat <<EOF
install -D -m 0644 /mnt/board/repo/hark-archive-keyring.gpg /usr/share/keyrings/hark-archive-keyring.gpg
printf 'Types: deb\nURIs: http://10.0.2.2:$port/\nSuites: stable\nComponents: main\nSigned-By: /usr/share/keyrings/hark-archive-keyring.gpg\n' >/etc/apt/sources.list.d/hark.sources
install -d /var/cache/hark
cp /mnt/board/hark.deb "/var/cache/hark/hark_${version}_\$(dpkg --print-architecture).deb"
EOF
        update_script good
    } | guest_run update-good 900 >"$out/s9.txt" 2>&1 || true
    release_as fleet2 fail
    update_script bad | guest_run update-bad 900 >>"$out/s9.txt" 2>&1 || true
    guest_run update-status 60 >>"$out/s9.txt" 2>&1 <<'EOF' || true
hark status >/mnt/board/results/s9-status.txt 2>&1
echo "status_rollback=$(grep -c '^rollback:' /mnt/board/results/s9-status.txt)"
echo "status_held=$(sed -n 's/^held back: *//p' /mnt/board/results/s9-status.txt)"
EOF
    release_as fleet3
    update_script next | guest_run update-next 900 >>"$out/s9.txt" 2>&1 || true
    kill "$http_pid" 2>/dev/null || true
    details="good: status $(field good_status "$out/s9.txt"), $(field good_version "$out/s9.txt") in $(field good_seconds "$out/s9.txt") s; built to fail: status $(field bad_status "$out/s9.txt"), back to $(field bad_version "$out/s9.txt") in $(field bad_seconds "$out/s9.txt") s, held: $(field bad_held "$out/s9.txt"), hark status held back: $(field status_held "$out/s9.txt"); next: status $(field next_status "$out/s9.txt"), $(field next_version "$out/s9.txt"), held: $(field next_held "$out/s9.txt" | sed 's/^$/none/')"
    if [ "$(field good_status "$out/s9.txt")" = 0 ] && [ "$(field good_version "$out/s9.txt")" = "$version+fleet1" ] &&
        [ "$(field bad_status "$out/s9.txt")" = 1 ] && [ "$(field bad_version "$out/s9.txt")" = "$version+fleet1" ] &&
        [ "$(field bad_held "$out/s9.txt")" = hark ] && [ "$(field bad_seconds "$out/s9.txt")" -le 120 ] &&
        [ "$(field status_rollback "$out/s9.txt")" = 1 ] && [ "$(field status_held "$out/s9.txt")" = "$version+fleet2" ] &&
        [ "$(field next_status "$out/s9.txt")" = 0 ] && [ "$(field next_version "$out/s9.txt")" = "$version+fleet3" ] &&
        [ -z "$(field next_held "$out/s9.txt")" ]; then
        report PASS 9 "updates from the repository" "$((SECONDS - started))" "$details"
    else
        report FAIL 9 "updates from the repository" "$((SECONDS - started))" "$details"
    fi
fi

if wanted 10; then
    started=$SECONDS
    # A timer set over the control socket, the service restarted before it is due: it rings at its wall-clock
    # time from the new process, with no session, through the kernel sound card; `hark timers stop` stops it.
    guest_run timer 150 >"$out/s10.txt" 2>&1 <<'EOF' || true
res=/mnt/board/results/s10
mkdir -p $res
SECONDS=0
while [ $SECONDS -lt 90 ]; do systemctl is-active -q hark && [ -S /run/hark/control.sock ] && break; sleep 0.2; done
asked=$(date +%s.%N)
hark timers add 30s pasta
echo "added=$?"
added=$(date +%s.%N)
pid_before=$(systemctl show -P MainPID hark)
systemctl restart hark
SECONDS=0
while [ $SECONDS -lt 60 ]; do systemctl is-active -q hark && break; sleep 0.2; done
echo "restarted=$([ "$(systemctl show -P MainPID hark)" != "$pid_before" ] && systemctl is-active -q hark && echo yes || echo no)"
recording=$(date +%s.%N)
arecord -q -D plughw:CARD=Loopback,DEV=1,SUBDEV=1 -f S16_LE -r 24000 -c 1 -t wav $res/ring.wav &
recorder=$!
SECONDS=0
ringing=no
while [ $SECONDS -lt 60 ]; do
    hark timers list >$res/list.txt 2>&1 && grep -q 'ringing: pasta' $res/list.txt && { ringing=yes; break; }
    sleep 0.2
done
echo "ringing=$ringing"
sleep 3
hark timers stop >$res/stop.txt 2>&1
echo "stopped=$?"
sleep 2
kill -INT $recorder; wait $recorder
# Due 30 s after the daemon set it: between the command's start and its return.
echo "due_from=$(awk -v a="$asked" -v r="$recording" 'BEGIN { printf "%.2f", a + 30 - r }')"
echo "due_in_recording=$(awk -v a="$added" -v r="$recording" 'BEGIN { printf "%.2f", a + 30 - r }')"
hark timers list >$res/after.txt 2>&1 || true
echo "after=$(grep -c ringing $res/after.txt)"
echo "sessions=$(hark status 2>/dev/null | sed -n 's/^sessions: *\([0-9]*\).*/\1/p')"
journalctl -q -u hark -o cat --no-pager -n 40 >$res/journal.txt
EOF
    figures="no recording"
    [ -f "$share/results/s10/ring.wav" ] &&
        figures="$(python3 "$lib/ring-audio.py" "$share/results/s10/ring.wav" 1760 2>&1 | tail -n 1 || true)"
    first="$(sed -n 's/^ring_first=\([0-9.]*\) .*/\1/p' <<<"$figures")"
    due="$(field due_in_recording "$out/s10.txt")"
    due_from="$(field due_from "$out/s10.txt")"
    details="set over the socket: $([ "$(field added "$out/s10.txt")" = 0 ] && echo yes || echo no), restarted: $(field restarted "$out/s10.txt"), ringing: $(field ringing "$out/s10.txt"), due between ${due_from:-?} and ${due:-?} s of the recording (the command's start and return), the 1760 Hz alert from ${first:-never} s ($figures), stopped by hark timers stop: $([ "$(field stopped "$out/s10.txt")" = 0 ] && [ "$(field after "$out/s10.txt")" = 0 ] && echo yes || echo no) (out/board-vm/s10.txt)"
    if [ "$(field added "$out/s10.txt")" = 0 ] && [ "$(field restarted "$out/s10.txt")" = yes ] &&
        [ "$(field ringing "$out/s10.txt")" = yes ] && [ "$(field stopped "$out/s10.txt")" = 0 ] &&
        [ "$(field after "$out/s10.txt")" = 0 ] && [ -n "$first" ] && [ -n "$due" ] &&
        awk -v f="$first" -v a="$due_from" -v d="$due" 'BEGIN { exit !(f >= a - 0.25 && f <= d + 1.0) }'; then
        report PASS 10 "a timer rings through the sound card after a restart" "$((SECONDS - started))" "$details"
    else
        report FAIL 10 "a timer rings through the sound card after a restart" "$((SECONDS - started))" "$details"
    fi
fi

if wanted 8; then
    started=$SECONDS
    # The next release: this package with a higher version and a changed example configuration, so the
    # upgrade meets a conffile both the owner (the install edited it) and the package changed.
    version="$(dpkg-deb -f "$share/hark.deb" Version)"
    rm -rf "$out/next"
    dpkg-deb -R "$share/hark.deb" "$out/next"
    sed -i "s/^Version: .*/Version: $version+next1/" "$out/next/DEBIAN/control"
    printf '\n# The next release documents one more setting here.\n' >>"$out/next/etc/hark/hark.yaml"
    dpkg-deb --root-owner-group -Zxz --build "$out/next" "$share/hark-next.deb" >/dev/null
    # Upgraded the way unattended upgrades do it (keep the owner's conffile, put the new one beside it),
    # then purged. The file listings are the install's (taken before dpkg -i) and one after the purge, made
    # by the same command.
    with_functions <<'EOF' | guest_run upgrade-purge 400 >"$out/s8.txt" 2>&1 || true
with_mode push-to-talk
pid="$(systemctl show -P MainPID hark)"
echo "version_before=$(dpkg-query -W -f '${Version}' hark)"
echo "config_before=$(sha256sum </etc/hark/hark.yaml | cut -c1-12)"
echo "handle_before=$(handle_digest)"
apt-get install -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    /mnt/board/hark-next.deb >/mnt/board/results/s8-upgrade.txt 2>&1
echo "upgrade_status=$?"
echo "version_after=$(dpkg-query -W -f '${Version}' hark)"
echo "config_after=$(sha256sum </etc/hark/hark.yaml | cut -c1-12)"
echo "config_new=$(ls /etc/hark/hark.yaml.dpkg-* 2>/dev/null | paste -sd' ')"
wait_active 150 "$pid"
echo "state_after=$(unit_state)"
echo "restarted=$([ "$(systemctl show -P MainPID hark)" != "$pid" ] && echo yes || echo no)"
echo "handle_after=$(handle_digest)"
apt-get purge -y -q hark >/mnt/board/results/s8-purge.txt 2>&1
echo "purge_status=$?"
echo "unit_after_purge=$(systemctl show -P LoadState hark)"
echo "processes_after_purge=$(pgrep -u hark | wc -l)"
echo "user_kept=$(getent passwd hark >/dev/null && echo yes || echo no)"
{ find / -xdev -path /mnt/board -prune -o -print; find /run -xdev -path /run/board-vm -prune -o -print; } 2>/dev/null |
    sort >/mnt/board/results/files-after-purge.txt
comm -13 /mnt/board/results/files-before-install.txt /mnt/board/results/files-after-purge.txt >/mnt/board/results/s8-new-files.txt
echo "new_files=$(wc -l </mnt/board/results/s8-new-files.txt)"
# The package's: any new path that names hark, but the owner's own files (the key in /etc/credstore, the
# simulator's CA the install put in /etc/hark, and so /etc/hark itself).
echo "left=$(grep -i hark /mnt/board/results/s8-new-files.txt | grep -v -x -e /etc/credstore/hark.gemini-api-key -e /etc/hark/sim-ca.pem -e /etc/hark | paste -sd' ')"
echo "owned_by_hark=$(find / -xdev -path /mnt/board -prune -o -user hark -print 2>/dev/null | paste -sd' ')"
EOF
    details="upgrade $(field version_before "$out/s8.txt") -> $(field version_after "$out/s8.txt") (apt status $(field upgrade_status "$out/s8.txt")): hark.yaml kept: $([ "$(field config_before "$out/s8.txt")" = "$(field config_after "$out/s8.txt")" ] && echo yes || echo no) (the new one as $(field config_new "$out/s8.txt" | sed 's/^$/nothing/')), stored handle kept: $([ "$(field handle_before "$out/s8.txt")" != none ] && [ "$(field handle_before "$out/s8.txt")" = "$(field handle_after "$out/s8.txt")" ] && echo yes || echo no), restarted: $(field restarted "$out/s8.txt") ($(field state_after "$out/s8.txt")); purge (apt status $(field purge_status "$out/s8.txt")): unit $(field unit_after_purge "$out/s8.txt"), processes $(field processes_after_purge "$out/s8.txt"), $(field new_files "$out/s8.txt") paths new since before the install (out/board-vm/share/results/s8-new-files.txt), the package's left: $(field left "$out/s8.txt" | sed 's/^$/none/'), files owned by hark: $(field owned_by_hark "$out/s8.txt" | sed 's/^$/none/'), the hark user kept: $(field user_kept "$out/s8.txt")"
    if [ "$(field upgrade_status "$out/s8.txt")" = 0 ] && [ "$(field version_after "$out/s8.txt")" = "$version+next1" ] &&
        [ -n "$(field config_before "$out/s8.txt")" ] && [ "$(field config_before "$out/s8.txt")" = "$(field config_after "$out/s8.txt")" ] &&
        [ "$(field handle_before "$out/s8.txt")" != none ] && [ "$(field handle_before "$out/s8.txt")" = "$(field handle_after "$out/s8.txt")" ] &&
        [ "$(field state_after "$out/s8.txt")" = active/running ] && [ "$(field restarted "$out/s8.txt")" = yes ] &&
        [ "$(field purge_status "$out/s8.txt")" = 0 ] && [ "$(field unit_after_purge "$out/s8.txt")" = not-found ] &&
        [ "$(field processes_after_purge "$out/s8.txt")" = 0 ] &&
        [ -z "$(field left "$out/s8.txt")" ] && [ -z "$(field owned_by_hark "$out/s8.txt")" ]; then
        report PASS 8 "upgrade and purge" "$((SECONDS - started))" "$details"
    else
        report FAIL 8 "upgrade and purge" "$((SECONDS - started))" "$details"
    fi
fi

guest_run journal 30 >/dev/null 2>&1 <<'EOF' || true
journalctl -b --no-pager -o short-monotonic >/mnt/board/results/journal.txt
EOF
cp "$share/results/journal.txt" "$out/journal.txt" 2>/dev/null || true
