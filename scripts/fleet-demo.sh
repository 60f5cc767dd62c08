#!/usr/bin/env bash
# A fleet on one machine: one `coffer server` and two `coffer worker`s, each
# worker on a "host" of its own (a network namespace with its own host name,
# joined to the server's PostgreSQL catalog by a veth on a bridge, addresses
# from 198.18.0.0/15, the range reserved for benchmarks) beside its own small
# QEMU guest (software emulation, the guest of `coffer demo`). One policy
# covers both guests; the script runs it through the server, whose
# dispatcher hands each guest's backup to the worker on its host, checks
# the points (each restored disk checked block by block, every chunk of the
# repository read back), and prints the console's address and login: the
# console shows both VMs and both workers. It then serves until Ctrl-C
# (--exit: it stops after the checks). Everything it made is removed on
# exit, Ctrl-C included: processes, namespaces, links, the bridge, files.
#
#   sudo scripts/fleet-demo.sh          # the fleet, then its console until Ctrl-C
#   sudo scripts/fleet-demo.sh --exit   # the fleet and its checks only
#
# Needs root (network namespaces), Go >= 1.26, and Debian 12's packages
# (installed when missing: QEMU, PostgreSQL, the guest's kernel).
set -euo pipefail
cd "$(dirname "$0")/.."
repo_root=$PWD
serve=1
for arg in "$@"; do
  case "$arg" in
    --exit) serve=0 ;;
    *) echo "usage: $0 [--exit]" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" != 0 ]; then
  echo "fleet-demo.sh makes network namespaces: run it as root (sudo $0)" >&2
  exit 1
fi
if ! command -v go >/dev/null; then
  echo "coffer needs Go >= 1.26 (https://go.dev/dl/); Debian 12's golang package is too old" >&2
  exit 1
fi
start=$(date +%s)
step() { printf '==> [%3ds] %s\n' "$(($(date +%s) - start))" "$*"; }

step "installing what is missing (QEMU, PostgreSQL, the guest's kernel)"
for part in base qemu guest postgres; do bash "scripts/ci/install-$part.sh"; done
command -v curl >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends curl; }
if [ ! -s internal/console/static/vendor/htmx.min.js ]; then
  step "building the web console's files"
  bash scripts/build-ui.sh
fi
if [ ! -x ./coffer ] || [ -n "$(find cmd internal -newer ./coffer \( -name '*.go' -o -path '*/static/*' -o -path '*/templates/*' \) -print -quit)" ]; then
  step "building coffer"
  go build -o coffer ./cmd/coffer
fi

# Everything lives in $work, under /tmp: the postgres user runs the catalog
# there and must reach it.
work=$(mktemp -d /tmp/coffer-fleet.XXXXXX)
chmod 755 "$work"
id=$(printf '%04x' $((RANDOM % 65536)))
bridge="cf${id}br"
pids=()
namespaces=()
links=()
pgbin=""
cleanup() {
  trap - EXIT INT TERM
  set +e
  echo "==> cleaning up"
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done
  if [ -n "$pgbin" ] && [ -f "$work/pg/data/postmaster.pid" ]; then
    runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pg/data" -m fast -w stop >/dev/null
  fi
  # Whatever still runs on the hosts (nothing, unless a process above
  # ignored its signals) ends with them.
  for ns in "${namespaces[@]}"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip netns delete "$ns"
  done
  for l in "${links[@]}"; do ip link delete "$l" 2>/dev/null; done
  ip link delete "$bridge" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The lab's network: a bridge in this namespace (the server's side) with
# the gateway's address, and one namespace per host. 198.19.x, the upper
# half of the benchmark range: coffer's tests make their labs in 198.18.x.
subnet=""
for _ in $(seq 20); do
  candidate="198.19.$((RANDOM % 256))"
  if ! ip -4 addr | grep -q "inet $candidate\."; then subnet=$candidate; break; fi
done
[ -n "$subnet" ] || { echo "no free 198.19.x/24 on this machine" >&2; exit 1; }
gw="$subnet.1"
step "network: bridge $bridge at $gw/24; hosts kvm1 ($subnet.2) and kvm2 ($subnet.3), each a network namespace"
ip link add "$bridge" type bridge
ip addr add "$gw/24" dev "$bridge"
ip link set "$bridge" up
hosts=(kvm1 kvm2)
declare -A nsof
n=2
for h in "${hosts[@]}"; do
  ns="cf${id}-$h"; veth="cf${id}v$n"
  ip netns add "$ns"; namespaces+=("$ns")
  ip link add "$veth" type veth peer name "${veth}p"; links+=("$veth")
  ip link set "$veth" master "$bridge"
  ip link set "$veth" up
  ip link set "${veth}p" netns "$ns"
  ip -n "$ns" link set "${veth}p" name eth0
  ip -n "$ns" addr add "$subnet.$n/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" route add default via "$gw"
  nsof[$h]=$ns
  n=$((n + 1))
done
# on HOST CMD... &: CMD in HOST's namespace, with HOST as its host name.
# ip, unshare and sh each exec the next, so $! is CMD's own process.
on() { local h=$1; shift; exec ip netns exec "${nsof[$h]}" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$h" "$@"; }

free_port() {
  local p=$1
  while ss -Hltn "sport = :$p" | grep -q .; do p=$((p + 1)); done
  echo "$p"
}
# waitfor FILE TEXT WHAT PID: until FILE says TEXT, at most 3 minutes, or
# fail with the file's end when PID (its writer) has exited.
waitfor() {
  local file=$1 text=$2 what=$3 pid=$4
  for _ in $(seq 1800); do
    grep -q -- "$text" "$file" 2>/dev/null && return 0
    if ! kill -0 "$pid" 2>/dev/null; then echo "$what failed:" >&2; tail -20 "$file" >&2; exit 1; fi
    sleep 0.1
  done
  echo "$what: not within 3 minutes:" >&2; tail -20 "$file" >&2; exit 1
}

pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pgport=$(free_port 55432)
step "PostgreSQL (the catalog) from $pgbin on 127.0.0.1 and $gw:$pgport, a throwaway cluster in $work/pg"
install -d -o postgres -g postgres -m 700 "$work/pg"
runuser -u postgres -- "$pgbin/initdb" -D "$work/pg/data" -U coffer -A trust -E UTF8 --locale=C --no-sync --no-instructions >"$work/pg/initdb.log"
echo "host all all $subnet.0/24 trust" >>"$work/pg/data/pg_hba.conf"
runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pg/data" -l "$work/pg/postgres.log" -w \
  -o "-k $work/pg -h 127.0.0.1,$gw -p $pgport -c fsync=off -c max_connections=100" start >/dev/null

step "two small guests (TCG), one on each host"
go build -o "$work/fleetguest" ./scripts/fleetguest
(cd "$repo_root" && "$work/fleetguest" image)
declare -A uuid=([kvm1]=c0ffe400-0000-4000-8000-00000000f101 [kvm2]=c0ffe400-0000-4000-8000-00000000f102)
for h in "${hosts[@]}"; do
  mkdir -p "$work/$h"
  (on "$h" "$work/fleetguest" boot "$work/$h" "web-$h" "${uuid[$h]}") >"$work/$h/guest.log" 2>&1 &
  pids+=($!)
done
i=0
for h in "${hosts[@]}"; do
  waitfor "$work/$h/guest.log" "^ready" "guest web-$h" "${pids[i]}"
  i=$((i + 1))
done

# One configuration for the server and the workers: a qemu connection per
# host (its guests' monitors; host: names the host the units are bound to)
# and one policy over both.
export COFFER_CATALOG="postgres://coffer@$gw:$pgport/postgres?sslmode=disable"
worker_catalog="postgres://$gw:$pgport/postgres?sslmode=disable" # a worker's token is its credential
export COFFER_CONFIG="$work/coffer.yaml"
export COFFER_REPO="$work/repo"
export COFFER_PASSWORD_FILE="$work/repo.password"
head -c 24 /dev/urandom | base64 >"$COFFER_PASSWORD_FILE"
cat >"$COFFER_CONFIG" <<EOF
connections:
  - {name: kvm1, kind: qemu, options: {sockets: ["$work/kvm1/vm/qmp.sock"], host: kvm1}}
  - {name: kvm2, kind: qemu, options: {sockets: ["$work/kvm2/vm/qmp.sock"], host: kvm2}}
policies:
  - {name: fleet, connections: [kvm1, kvm2], schedule: "0 3 * * *", retention: {keep-last: 7}}
EOF
step "a repository in $COFFER_REPO, shared by the server and the workers"
./coffer init -q

port=$(free_port 8080)
step "coffer server on 127.0.0.1:$port (plain HTTP on loopback)"
./coffer server init -q >/dev/null
./coffer --state-dir "$work/server-state" server --insecure-http --listen "127.0.0.1:$port" --log-level info >"$work/server.log" 2>&1 &
pids+=($!)
server_pid=$!
waitfor "$work/server.log" "coffer server: serving" "coffer server" "$server_pid"
admin_password=$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
printf '%s\n' "$admin_password" >"$work/admin.password"
./coffer user password admin --new-password-file "$work/admin.password" >/dev/null
./coffer token create --user admin --grant /=Admin --lifetime 1d >"$work/token" 2>/dev/null

for h in "${hosts[@]}"; do
  step "coffer worker $h on host $h: reaches connection $h and its host ($h/$h)"
  # Its own credential, made on the server's host: a token, whose role
  # reaches the queue and its own registry row, never the API's users.
  ./coffer workers token create "$h" >"$work/$h/worker.token"
  (on "$h" ./coffer --state-dir "$work/$h/state" worker --name "$h" --slots 2 --reach-connections "$h" --reach-hosts "$h/$h" \
    --catalog "$worker_catalog" --token-file "$work/$h/worker.token" --log-level info) >"$work/$h/worker.log" 2>&1 &
  pids+=($!)
  waitfor "$work/$h/worker.log" "worker registered" "worker $h" "$!"
done
waitfor "$work/server.log" "workers=kvm1,kvm2" "the server placing units on both workers" "$server_pid"
./coffer workers

step "running policy fleet through the server: each guest is backed up by the worker on its host"
# Through the REST API (POST /policies/fleet/run), as the console's Run
# button does: `coffer run` runs a policy in its own process.
curl -sS -X POST -H "Authorization: Bearer $(cat "$work/token")" \
  "http://127.0.0.1:$port/api/v1/policies/fleet/run?wait=true" >"$work/run.json"
job=$(grep -o '"id": *[0-9]*' "$work/run.json" | head -1 | grep -o '[0-9]*$')
if ! grep -q '"status": *"success"' "$work/run.json"; then
  echo "the run failed:" >&2; cat "$work/run.json" >&2; ./coffer job show "$job" >&2; exit 1
fi
./coffer job show "$job" | grep -E "runs on worker|backed up|^(Status|status)" || true

step "checking the points: each guest's latest point restored and checked block by block, every chunk read back"
./coffer catalog points
for h in "${hosts[@]}"; do
  point=$(./coffer catalog points --vm "web-$h" --limit 1 --json | grep -o '"id": *"[^"]*"' | head -1 | cut -d'"' -f4)
  ./coffer restore "$point" --to "$work/$h/restored.raw" -q
  printf 'web-%s: ' "$h"
  "$work/fleetguest" check "$work/$h/restored.raw"
  rm -f "$work/$h/restored.raw"
done
./coffer verify --read-data
for h in "${hosts[@]}"; do
  # A worker serves nothing: it connects out to the catalog and the
  # repository, and no one connects to it.
  ports=$(ip netns exec "${nsof[$h]}" ss -Hltn | awk '{print $4}' | tr '\n' ' ')
  echo "host $h (its worker and its guest) listens on TCP ports: ${ports:-none}"
done

step "sizing: the planner's prediction of the next run on two workers of one slot each (one per host), and on one worker of one slot"
./coffer plan fleet --what-if workers=2x1 --what-if workers=1x1 | sed '/^assumptions:/,$d'

step "done in $(($(date +%s) - start)) s"
if [ "$serve" = 0 ]; then exit 0; fi
cat <<EOF

The fleet's console: http://127.0.0.1:$port/ui/   (from another machine: ssh -L $port:127.0.0.1:$port this-host)
  login: admin   password: $admin_password
  Workers: kvm1 and kvm2; VMs: web-kvm1 and web-kvm2, each backed up on its own host's worker.
  Logs: $work/server.log, $work/kvm1/worker.log, $work/kvm2/worker.log
Ctrl-C stops everything and removes what the demo made.
EOF
wait "$server_pid"
