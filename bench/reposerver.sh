#!/usr/bin/env bash
# bench/reposerver.sh: backup and restore through a repository server
# (`coffer repository serve` on loopback, TLS) against the same on a local
# directory, in one run, on the same image.
#
#   bench/reposerver.sh [--dir DIR] [--size 4G] [--rounds 2]
#
# Prints each step's wall time, the ratios server/local (issue 39's
# target: <= 1.2x on loopback), the repository server's CPU-seconds
# per GiB of image backed up and restored, and the CPU-seconds per GiB
# of the client and the server together against the local run's (which
# a busy machine hardly changes).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

dir="$here/.cache/bench"
size=4G
rounds=2
while [ $# -gt 0 ]; do
	case "$1" in
	--dir) dir=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "reposerver.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
"$here/bench/data.sh" --dir "$dir" --size "$size" >/dev/null
DATA=$dir
WORK=$dir/reposerver
rm -rf "$WORK"; mkdir -p "$WORK"
export WORK
apt_need /usr/bin/time time
apt_need bc bc
(cd "$here" && go build -o "$GOBIN/coffer" ./cmd/coffer)
RES=$WORK/results.tsv
: >"$RES"
export COFFER_PASSWORD=coffer-bench-password COFFER_CONFIG=/dev/null
img=$DATA/disk.raw
gib=$(echo "$(stat -c %s "$img") / 1073741824" | bc -l)

# proc_cpu PID: CPU-seconds the process used so far.
proc_cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14+$15)/hz}' "/proc/$1/stat"; }

for r in $(seq 1 "$rounds"); do
	# Local directory.
	export COFFER_REPO=$WORK/local COFFER_CATALOG=$WORK/local.db COFFER_CACHE_DIR=$WORK/cache-local
	rm -rf "$COFFER_REPO" "$COFFER_CATALOG"
	coffer init -q
	timed "$RES" "local:backup:$r" "$WORK" coffer backup disk "$img" --name vm -q
	mkdir -p "$WORK/out"
	timed "$RES" "local:restore:$r" "$WORK" coffer restore latest --to "$WORK/out/vm.raw" -q
	rm -rf "$WORK/out"

	# The same through a repository server on loopback.
	srvrepo=$WORK/served
	rm -rf "$srvrepo" "$srvrepo.tls" "$WORK/creds.yaml"
	COFFER_REPO=$srvrepo coffer init -q
	coffer repository credential add bench --right maintain --credentials "$WORK/creds.yaml" >"$WORK/bench.cred"
	coffer repository serve --dir "$srvrepo" --credentials "$WORK/creds.yaml" --listen 127.0.0.1:0 --allow-root >"$WORK/serve.out" 2>"$WORK/serve.log" &
	spid=$!
	for _ in $(seq 1 100); do grep -q 'serving' "$WORK/serve.out" && break; sleep 0.1; done
	grep -q 'serving' "$WORK/serve.out" || { log "coffer repository serve did not print 'serving' within 10 s"; kill "$spid"; exit 2; }
	url=$(grep -o 'https://[^ ]*' "$WORK/serve.out" | head -1)
	export COFFER_REPO=$url COFFER_CATALOG=$WORK/served.db COFFER_CACHE_DIR=$WORK/cache-served
	export COFFER_REPO_CREDENTIAL_FILE=$WORK/bench.cred COFFER_REPO_CA_FILE=$srvrepo.tls/tls.crt
	rm -f "$COFFER_CATALOG"
	c0=$(proc_cpu $spid)
	timed "$RES" "server:backup:$r" "$WORK" coffer backup disk "$img" --name vm -q
	c1=$(proc_cpu $spid)
	mkdir -p "$WORK/out"
	timed "$RES" "server:restore:$r" "$WORK" coffer restore latest --to "$WORK/out/vm.raw" -q
	c2=$(proc_cpu $spid)
	rm -rf "$WORK/out"
	kill "$spid"; wait "$spid" || true
	printf 'serverCPU:backup:%s\t%.2f\nserverCPU:restore:%s\t%.2f\n' "$r" "$(echo "($c1 - $c0) / $gib" | bc -l)" "$r" "$(echo "($c2 - $c1) / $gib" | bc -l)" >>"$RES"
	unset COFFER_REPO_CREDENTIAL_FILE COFFER_REPO_CA_FILE
done
echo "| round | backup local s | through the server s | ratio | restore local s | through the server s | ratio | server CPU-s/GiB backup | restore |"
echo "|---|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "$rounds"); do
	awk -F'\t' -v r="$r" '
		$1 == "local:backup:"r {lb=$2} $1 == "server:backup:"r {sb=$2}
		$1 == "local:restore:"r {lr=$2} $1 == "server:restore:"r {sr=$2}
		$1 == "serverCPU:backup:"r {cb=$2} $1 == "serverCPU:restore:"r {cr=$2}
		END {printf "| %s | %.2f | %.2f | %.2fx | %.2f | %.2f | %.2fx | %.2f | %.2f |\n", r, lb, sb, sb/lb, lr, sr, sr/lr, cb, cr}' "$RES"
done
# CPU-seconds per GiB of image, the client's and the server's together
# against the local run's: unlike the wall times, they hardly depend on
# what else the machine runs.
echo
echo "| round | backup CPU-s/GiB local | through the server (client + server) | ratio | restore local | through the server | ratio | other tenants' CPU-s during the steps |"
echo "|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "$rounds"); do
	awk -F'\t' -v r="$r" -v gib="$gib" '
		$1 == "local:backup:"r {lb=$3; o+=$5} $1 == "server:backup:"r {sb=$3; o+=$5}
		$1 == "local:restore:"r {lr=$3; o+=$5} $1 == "server:restore:"r {sr=$3; o+=$5}
		$1 == "serverCPU:backup:"r {cb=$2} $1 == "serverCPU:restore:"r {cr=$2}
		END {lb/=gib; lr/=gib; sb=sb/gib+cb; sr=sr/gib+cr
			printf "| %s | %.2f | %.2f | %.2fx | %.2f | %.2f | %.2fx | %.0f |\n", r, lb, sb, sb/lb, lr, sr, sr/lr, o}' "$RES"
done
