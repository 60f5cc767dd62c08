#!/usr/bin/env bash
# bench/budget.sh: does coffer's data path stay within its memory and CPU
# budget? One command; a benchmark, not a test (CI runs no part of it).
#
#   bench/budget.sh [--rounds 3] [--big 64G] [--dir DIR] [--work DIR] [--budget FILE]
#
# Builds coffer, installs it as a copy (as a package would) and evicts the
# copy from the page cache, then backs up disk.raw (bench/data.sh: the
# 4 GiB Debian image, 1.4 GiB of it non-zero) into a fresh local
# repository and restores it, --rounds times, each under /usr/bin/time -v.
# With --big it does the same once with a sparse copy of disk.raw grown to
# that size (the same data, the rest holes): peak RSS must not grow with
# the disk. --big 0 skips it. The repository and the restored image go to
# --work (default DIR/budget; about 2.2 GiB at the peak, 3.6 with --big).
#
# Prints, per step, the median peak RSS (MiB) and CPU-seconds per GiB of
# the image (user + system), against the budget in bench/budget.txt, and
# exits 1 if a figure is over its budget. Wall times are printed beside
# them, and the load average: on a shared machine CPU time moves with the
# load (caches, SMT), RSS hardly does.
#
# Why a copy: a binary fresh from `go build` sits in the page cache in
# 2 MiB folios (the linker writes it through a mapping), and the kernel
# (6.18 here) maps such a folio whole on the first touch, so every page of
# the binary's 57 MiB of code and read-only data counts in RSS. A copy, or
# the binary read back from disk, is mapped as far as it is touched (35 MiB).
# docs/benchmarks.md ("Peak RSS") has both figures.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

dir="$here/.cache/bench"
rounds=3
big=64G
budget="$here/bench/budget.txt"
work=""
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift 2 ;;
	--big) big=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--work) work=$2; shift 2 ;;
	--budget) budget=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "budget.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

"$here/bench/data.sh" --dir "$dir" --no-mod >&2
apt_need /usr/bin/time time
WORK=${work:-$dir/budget}
rm -rf "$WORK"; mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
bin=$WORK/coffer
log "building coffer"
(cd "$here" && go build -o "$WORK/coffer.built" ./cmd/coffer)
cp "$WORK/coffer.built" "$bin"
rm -f "$WORK/coffer.built"
# Drop the copy's pages from the page cache: the first run reads it from
# disk, as after a boot (dd's nocache with count=0 evicts the whole file).
dd if="$bin" iflag=nocache count=0 status=none

export COFFER_PASSWORD=coffer-bench-password COFFER_CONFIG=/dev/null
RES=$WORK/results.tsv
: >"$RES"
# step LABEL CMD...: label, wall s, CPU s, peak RSS KiB
step() {
	local label=$1 tv; shift
	tv=$(mktemp)
	local t0 t1
	t0=$(date +%s.%N)
	/usr/bin/time -v -o "$tv" "$@" >"$WORK/$label.log" 2>&1 || {
		log "$label failed:"; tail -5 "$WORK/$label.log" >&2; rm -f "$tv"; exit 2; }
	t1=$(date +%s.%N)
	awk -F': ' -v l="$label" -v w="$(echo "$t1 - $t0" | bc -l)" '
		/User time/ {u=$2} /System time/ {s=$2} /Maximum resident/ {r=$2}
		END {printf "%s\t%.3f\t%.2f\t%d\n", l, w, u+s, r}' "$tv" >>"$RES"
	rm -f "$tv"
}
run() { # run NAME IMAGE ROUND
	local n=$1 img=$2 r=$3
	export COFFER_REPO=$WORK/repo COFFER_CATALOG=$WORK/catalog.db COFFER_CACHE_DIR=$WORK/cache
	rm -rf "$COFFER_REPO" "$COFFER_CATALOG" "$COFFER_CACHE_DIR" "$WORK/out"
	"$bin" init -q
	cat "$img" >/dev/null # the source in the page cache, as repo.sh has it
	step "$n:backup:$r" "$bin" backup disk "$img" --name vm -q
	sync -f "$WORK"
	mkdir -p "$WORK/out"
	step "$n:restore:$r" "$bin" restore latest --to "$WORK/out/disk.raw" -q
	rm -rf "$WORK/out" "$COFFER_REPO"
}
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq 1 "$rounds"); do
	log "round $r of $rounds"
	run disk "$dir/disk.raw" "$r"
done
if [ "$big" != 0 ]; then
	log "sparse copy grown to $big"
	cp --sparse=always "$dir/disk.raw" "$WORK/big.raw"
	truncate -s "$big" "$WORK/big.raw"
	run big "$WORK/big.raw" 1
	rm -f "$WORK/big.raw"
fi
load1=$(cut -d' ' -f1-3 /proc/loadavg)

gib=$(awk -v b="$(stat -c %s "$dir/disk.raw")" 'BEGIN {printf "%.4f", b / 2^30}')
echo "coffer $(git -C "$here" rev-parse --short HEAD) on $(nproc) CPUs; load average $load0 before, $load1 after; $rounds rounds; budget $budget"
echo "| step | median wall s | median CPU-s/GiB | budget | median peak RSS MiB | budget | |"
echo "|---|---|---|---|---|---|---|"
over=0
for n in disk big; do
	for s in backup restore; do
		grep -q "^$n:$s:" "$RES" || continue
		b_cpu=$(awk -v k="${s}_cpu_s_per_gib" '$1 == k {print $2}' "$budget")
		b_rss=$(awk -v k="${s}_rss_mib" '$1 == k {print $2}' "$budget")
		line=$(awk -F'\t' -v p="$n:$s:" -v gib="$gib" -v bc="$b_cpu" -v br="$b_rss" -v big="$n" '
			index($1, p) == 1 {w[++k]=$2; c[k]=$3/gib; r[k]=$4/1024}
			function med(a, n,   i, j, t) {
				for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) {t=a[i]; a[i]=a[j]; a[j]=t}
				return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
			END {
				mw=med(w, k); mc=med(c, k); mr=med(r, k)
				# CPU per GiB of a grown sparse image means nothing: RSS only.
				okc = (big == "big") || mc <= bc; okr = mr <= br
				printf "%s %.2f %.3f %s %.1f %s %s\n", (okc && okr) ? "ok" : "OVER", mw, mc, (big == "big" ? "-" : bc), mr, br, (okc && okr) ? "" : (okr ? "CPU over budget" : "RSS over budget")
			}' "$RES")
		set -- $line
		label="$s"; [ $n = big ] && label="$s, sparse $big"
		echo "| $label | $2 | $([ $n = big ] && echo - || echo "$3") | $4 | $5 | $6 | $1${7:+ ($7 ${8:-} ${9:-})} |"
		[ "$1" = ok ] || over=1
	done
done
exit $over
