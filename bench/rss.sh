#!/usr/bin/env bash
# bench/rss.sh: does coffer's peak RSS stay flat when the disk grows?
#
#   bench/rss.sh [--dir DIR] [--big 64G]
#
# Backs up and restores disk.raw (4 GiB, thick) and a sparse copy of it
# grown to --big (the same data, the rest holes), each into a fresh
# repository, backs the same image up again (an incremental without
# change tracking: it compares every span with the previous point's chunk
# IDs), and prints wall time and peak RSS (/usr/bin/time -v) of backup,
# re-backup and restore. Issue 2's target: peak RSS under 128 MiB and flat
# when the image grows to 64 GiB (sparse); issue 42's: 96 MiB.
#
# The coffer it runs is a copy of the one built, evicted from the page
# cache, as bench/budget.sh runs it (its header says why: a binary fresh
# from `go build` counts all of its 57 MiB of code in RSS on this kernel).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

dir="$here/.cache/bench"
big=64G
while [ $# -gt 0 ]; do
	case "$1" in
	--dir) dir=$2; shift 2 ;;
	--big) big=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "rss.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
"$here/bench/data.sh" --dir "$dir" --no-mod >/dev/null
DATA=$dir
WORK=$dir/rss
rm -rf "$WORK"; mkdir -p "$WORK"
export WORK
apt_need /usr/bin/time time
apt_need bc bc
(cd "$here" && go build -o "$GOBIN/coffer.built" ./cmd/coffer)
cp "$GOBIN/coffer.built" "$GOBIN/coffer"
rm -f "$GOBIN/coffer.built"
dd if="$GOBIN/coffer" iflag=nocache count=0 status=none
cp --sparse=always "$DATA/disk.raw" "$WORK/big.raw"
truncate -s "$big" "$WORK/big.raw"
RES=$WORK/results.tsv
: >"$RES"
export COFFER_PASSWORD=coffer-bench-password COFFER_CONFIG=/dev/null
for img in "$DATA/disk.raw" "$WORK/big.raw"; do
	n=$(basename "$img" .raw)
	export COFFER_REPO=$WORK/repo-$n COFFER_CATALOG=$WORK/$n.db COFFER_CACHE_DIR=$WORK/cache-$n
	coffer init -q
	timed "$RES" "$n:backup:1" "$WORK" coffer backup disk "$img" --name "$n" -q
	timed "$RES" "$n:incr:1" "$WORK" coffer backup disk "$img" --name "$n" -q
	mkdir -p "$WORK/out"
	timed "$RES" "$n:restore:1" "$WORK" coffer restore latest --to "$WORK/out/$n.raw" -q
	rm -rf "$WORK/out" "$COFFER_REPO"
done
rm -f "$WORK/big.raw"
echo "| image | logical | backup s | backup peak RSS MiB | re-backup s | re-backup peak RSS MiB | restore s | restore peak RSS MiB |"
echo "|---|---|---|---|---|---|---|---|"
for n in disk big; do
	awk -F'\t' -v n="$n" -v big="$big" '
		$1 == n":backup:1" {bs=$2; br=$4}
		$1 == n":incr:1" {is=$2; ir=$4}
		$1 == n":restore:1" {rs=$2; rr=$4}
		END {printf "| %s | %s | %.2f | %.0f | %.2f | %.0f | %.2f | %.0f |\n", (n=="disk" ? "disk.raw (thick)" : "sparse copy grown to " big), (n=="disk" ? "4 GiB" : big), bs, br/1024, is, ir/1024, rs, rr/1024}' "$RES"
done
