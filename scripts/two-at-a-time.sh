# Sourced by the recipes' run.sh: two_at_a_time FUNCTION ITEM... runs FUNCTION on the items
# in order, two at a time (each in the background, one thread each on a 2-core machine):
# whenever one finishes, the next item starts, so a short item never waits for a long one.
# Returns when all are done. A failing item does not stop the others (its own output says
# why; the tables then show it as missing).
two_at_a_time() {
  local fn=$1 item running=0
  shift
  for item in "$@"; do
    if ((running == 2)); then
      wait -n || true
      running=$((running - 1))
    fi
    "$fn" "$item" &
    running=$((running + 1))
  done
  wait
}
