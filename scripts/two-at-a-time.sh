# Sourced by the recipes' run.sh: two_at_a_time FUNCTION ITEM... runs FUNCTION on the items
# two at a time (each in the background, one thread each on a 2-core machine), waiting for
# both before the next pair.
two_at_a_time() {
  local fn=$1
  shift
  local items=("$@") k
  for ((k = 0; k < ${#items[@]}; k += 2)); do
    "$fn" "${items[k]}" &
    if [[ $((k + 1)) -lt ${#items[@]} ]]; then "$fn" "${items[k + 1]}" & fi
    wait
  done
}
