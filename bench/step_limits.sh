# Sourced by the benchmark scripts that must end by a deadline (one device command): `step` prints
# a step's header, `limit` the seconds a step may take. Needs t_start and deadline (in SECONDS).
step() { echo; echo "=== $* ($((SECONDS - t_start)) s)"; }
# limit <wanted> <seconds to keep for the later steps>: the time this step may take.
limit() {
  local left=$((deadline - SECONDS - $2))
  ((left < 1)) && left=1
  ((left < $1)) && echo "$left" || echo "$1"
}
