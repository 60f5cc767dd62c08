#!/usr/bin/env bash
# bench/nbd.sh: NBD read throughput of `coffer instant export` (a backup
# point served straight from the repository) against qemu-nbd serving the
# same raw file, both read to null by nbdcopy over a unix socket.
#
#   bench/nbd.sh [--size 4G] [--rounds 3] [--dir DIR] [--chunk-size 256KiB]
#
# For each server, nbdcopy runs twice per round:
#   extents     nbdcopy's default: it asks for base:allocation and skips
#               ranges the server reports as zero/holes. coffer knows its
#               all-zero chunks; qemu-nbd serving a thick raw file reports
#               all of it as data, so this is the end-to-end figure a client
#               like qemu-img or a mirror job sees.
#   all-bytes   nbdcopy --no-extents: every byte of the disk is read from
#               both servers (the raw server throughput).
# Also: seconds from starting `coffer instant export` to the export
# answering (nbdinfo), and the export server's peak RSS. The repository and
# the raw file are in the page cache. Medians over --rounds.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

size=4G
rounds=3
dir="$here/.cache/bench"
chunk=256KiB
while [ $# -gt 0 ]; do
	case "$1" in
	--size) size=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--chunk-size) chunk=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "nbd.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

"$here/bench/data.sh" --size "$size" --dir "$dir"
DATA=$dir
WORK=$dir/nbd
rm -rf "$WORK"; mkdir -p "$WORK"
export WORK
apt_need /usr/bin/time time
apt_need bc bc
apt_need jq jq
apt_need qemu-nbd qemu-utils
apt_need nbdcopy libnbd-bin
apt_need nbdinfo libnbd-bin
(cd "$here" && go build -o "$GOBIN/coffer" ./cmd/coffer)

export COFFER_REPO=$WORK/repo COFFER_PASSWORD=coffer-bench-password COFFER_CONFIG=/dev/null
export COFFER_CATALOG=$WORK/catalog.db COFFER_CACHE_DIR=$WORK/cache
log "backing up disk.raw into a coffer repository ($chunk chunks)"
coffer init --chunk-size "$chunk" -q
id=$(coffer backup disk "$DATA/disk.raw" --name vm --json | jq -r .id)
RES=$WORK/results.tsv
: >"$RES"
logical=$(stat -c %s "$DATA/disk.raw")

server_pid=
stop_server() { # SIGINT to the server (not to /usr/bin/time), then wait for time -v's report
	[ -n "$server_pid" ] || return 0
	local child; child=$(cat /proc/"$server_pid"/task/*/children 2>/dev/null | awk '{print $1}')
	[ -n "$child" ] && kill -INT "$child" 2>/dev/null || true
	# At most 30 s for the server to exit on SIGINT, then SIGKILL.
	for _ in $(seq 1 300); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$server_pid" 2>/dev/null; then
		log "the NBD server (pid $server_pid) did not exit within 30 s of SIGINT: killed"
		[ -n "$child" ] && kill -KILL "$child" 2>/dev/null || true
	fi
	wait "$server_pid" 2>/dev/null || true
	server_pid=
}
trap stop_server EXIT

wait_sock() { # wait_sock SOCKET EXPORT: seconds until the export answers
	local t0; t0=$(date +%s.%N)
	for _ in $(seq 1 600); do
		if nbdinfo --size "nbd+unix:///$2?socket=$1" >/dev/null 2>&1; then
			echo "$(date +%s.%N) - $t0" | bc -l; return 0
		fi
		sleep 0.05
	done
	log "export $2 on $1 did not answer"; return 1
}

for r in $(seq 1 "$rounds"); do
	# coffer
	sock=$WORK/coffer.sock; rm -f "$sock"
	/usr/bin/time -v -o "$WORK/coffer-server.time" coffer instant export "$id" --listen "unix:$sock" -q \
		>"$WORK/coffer-server.log" 2>&1 &
	server_pid=$!
	ready=$(wait_sock "$sock" 0 || wait_sock "$sock" vda)
	export_name=0; nbdinfo --size "nbd+unix:///0?socket=$sock" >/dev/null 2>&1 || export_name=vda
	printf 'coffer:ready:%s\t%.3f\t0\t0\t0\n' "$r" "$ready" >>"$RES"
	timed "$RES" "coffer:extents:$r" "$WORK" nbdcopy "nbd+unix:///$export_name?socket=$sock" null:
	timed "$RES" "coffer:all-bytes:$r" "$WORK" nbdcopy --no-extents "nbd+unix:///$export_name?socket=$sock" null:
	stop_server
	printf 'coffer:server:%s\t0\t0\t%s\t0\n' "$r" "$(awk -F': ' '/Maximum resident/ {print $2}' "$WORK/coffer-server.time")" >>"$RES"

	# qemu-nbd on the same raw file
	sock=$WORK/qemu.sock; rm -f "$sock"
	warm "$DATA/disk.raw"
	/usr/bin/time -v -o "$WORK/qemu-server.time" qemu-nbd -r -f raw -x vda --socket "$sock" --persistent --shared 4 "$DATA/disk.raw" \
		>"$WORK/qemu-server.log" 2>&1 &
	server_pid=$!
	ready=$(wait_sock "$sock" vda)
	printf 'qemu-nbd:ready:%s\t%.3f\t0\t0\t0\n' "$r" "$ready" >>"$RES"
	timed "$RES" "qemu-nbd:extents:$r" "$WORK" nbdcopy "nbd+unix:///vda?socket=$sock" null:
	timed "$RES" "qemu-nbd:all-bytes:$r" "$WORK" nbdcopy --no-extents "nbd+unix:///vda?socket=$sock" null:
	stop_server
	printf 'qemu-nbd:server:%s\t0\t0\t%s\t0\n' "$r" "$(awk -F': ' '/Maximum resident/ {print $2}' "$WORK/qemu-server.time")" >>"$RES"
done

python3 - "$RES" "$logical" "$chunk" <<'EOF'
import statistics, sys
from collections import defaultdict
res, logical, chunk = sys.argv[1], int(sys.argv[2]), sys.argv[3]
d = defaultdict(list)
for line in open(res):
    label, wall, cpu, rss, other = line.split("\t")
    srv, step, _ = label.split(":")
    d[srv, step].append((float(wall), float(cpu), int(rss), float(other)))
m = lambda s, k, i: statistics.median(x[i] for x in d[s, k]) if d.get((s, k)) else None
print(f"NBD read of a {logical/2**30:.1f} GiB disk to null with nbdcopy over a unix socket; coffer repository with {chunk} chunks; medians of {len(d['coffer','extents'])} round(s).\n")
print("| server | nbdcopy (extents) s | MB/s logical | nbdcopy --no-extents s | MB/s | client CPU s (no-extents) | server peak RSS MiB | ready after s | CPU s outside nbdcopy (server + other tenants), max |")
print("|---|---|---|---|---|---|---|---|---|")
for s in ("coffer", "qemu-nbd"):
    e, a = m(s, "extents", 0), m(s, "all-bytes", 0)
    print(f"| {s} | {e:.2f} | {logical/e/1e6:.0f} | {a:.2f} | {logical/a/1e6:.0f} | {m(s,'all-bytes',1):.2f} | {m(s,'server',2)/1024:.0f} | {m(s,'ready',0):.2f} | {max(x[3] for k in ('extents','all-bytes') for x in d[s,k]):.1f} |")
ce, qe = m("coffer", "extents", 0), m("qemu-nbd", "extents", 0)
ca, qa = m("coffer", "all-bytes", 0), m("qemu-nbd", "all-bytes", 0)
print(f"\ncoffer / qemu-nbd throughput: {qe/ce:.2f}x with extents, {qa/ca:.2f}x reading every byte (above 1: coffer is faster).")
EOF
