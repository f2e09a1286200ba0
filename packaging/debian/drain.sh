# --- shared by preinst and prerm (packaging/build-deb puts it here) -----------------------------
# Before an upgrade or a removal, every running table is drained as docs/install.md §10 says:
# `pokdeng-table supervisor --config CONFIG drain --wait` over its control socket lets the open
# round finish and starts no new one; only then is the unit stopped. A table that does not
# drain within $POKDENG_DRAIN_TIMEOUT seconds (default 600: a paused table waits for its
# supervisor) stops the upgrade with the table still running (and still draining: `pokdeng-table
# supervisor resume` releases it). POKDENG_UPGRADE_WITHOUT_DRAIN=1 stops the tables without a
# drain (safe: a stopped daemon carries on with the round where it was, but the players wait).
# The units stopped here are listed in $restart_list; postinst starts them again (still drained).
restart_list=/run/pokdeng-table.upgrade-units
pokdeng_bin=/opt/pokdeng-table/venv/bin/pokdeng-table
pokdeng_drain() {  # unit config: drain the table, or wait for a drain already asked for
  timeout=${POKDENG_DRAIN_TIMEOUT:-600}
  case $("$pokdeng_bin" status --config "$2" --json 2>/dev/null) in
    *'"draining": true'*)
      echo "pokdeng-table: $1 is already draining; waiting for it (at most $timeout s)"
      end=$(( $(date +%s) + timeout ))
      while :; do
        case $("$pokdeng_bin" status --config "$2" --json 2>/dev/null) in
          *'"drained": true'*) echo "drained: safe to stop"; return 0 ;;
          *'"draining": true'*) ;;
          *) return 1 ;;                         # released, or the daemon is gone
        esac
        [ "$(date +%s)" -lt "$end" ] || return 1
        sleep 1
      done ;;
  esac
  echo "pokdeng-table: draining $1: the open round finishes, no new one starts"
  "$pokdeng_bin" supervisor --config "$2" drain --wait --timeout "$timeout"
}
pokdeng_drain_and_stop() {
  [ -d /run/systemd/system ] || return 0          # no systemd running: no unit to stop
  units=$(systemctl list-units --plain --no-legend --state=active \
            'pokdeng-table.service' 'pokdeng-table@*.service' 2>/dev/null | awk '{print $1}')
  for unit in $units; do
    case $unit in
      pokdeng-table.service) config=/etc/pokdeng-table/table.yaml ;;
      pokdeng-table@*.service) instance=${unit#pokdeng-table@}
                               config=/etc/pokdeng-table/${instance%.service}.yaml ;;
      *) continue ;;
    esac
    if [ "${POKDENG_UPGRADE_WITHOUT_DRAIN:-0}" != 1 ] && ! pokdeng_drain "$unit" "$config"; then
      echo "pokdeng-table: $unit did not drain; nothing was stopped or changed for it." >&2
      echo "  Let the round finish (or a supervisor act) and run dpkg again, or set" >&2
      echo "  POKDENG_UPGRADE_WITHOUT_DRAIN=1; 'pokdeng-table supervisor resume' ends the drain." >&2
      return 1
    fi
    echo "$unit" >> "$restart_list"
    systemctl stop "$unit"
  done
}
pokdeng_forget_bytecode() {
  # postinst compiles the venv; dpkg does not know these files, so they go before it removes
  # or replaces the venv
  [ -d /opt/pokdeng-table ] && find /opt/pokdeng-table -name __pycache__ -type d -prune \
    -exec rm -rf {} + 2>/dev/null || true
}
# -------------------------------------------------------------------------------------------------
