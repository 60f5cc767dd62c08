#!/usr/bin/env bash
# bench/budget.sh: does coffer's data path stay within its budget of
# memory, CPU work and speed against its peers? One command; a benchmark,
# not a test (CI runs no part of it). Run it before resolving an issue that
# touches the data path, and put its output in the closing note.
#
#   bench/budget.sh [--rounds 3] [--big 64G] [--repo-rounds 2] [--ir-size 128M]
#                   [--dir DIR] [--work DIR] [--budget FILE] [--deadline 1800]
#
# Three parts, each compared with the committed figures in bench/budget.txt
# (docs/benchmarks.md, "The budget", says where each came from):
#
# 1. Peak RSS and CPU. Builds coffer, installs it as a copy (as a package
#    would) and evicts the copy from the page cache, then backs up disk.raw
#    (bench/data.sh: the 4 GiB Debian image, 1.4 GiB of it non-zero) into
#    a fresh local repository and restores it, --rounds times, each under
#    /usr/bin/time -v. With --big it does the same once with a sparse copy
#    of disk.raw grown to that size (the same data, the rest holes): peak
#    RSS must not grow with the disk (bench/rss.sh's measure). --big 0
#    skips it. Medians of peak RSS (MiB) and CPU-seconds per GiB of image.
# 2. Instructions per byte (bench/instr.sh, callgrind, on the first
#    --ir-size bytes of disk.raw; 0 skips): the CPU work per byte of a
#    backup and of a restore, which does not move with the machine's load.
# 3. The repository benchmark against its peers (bench/repo.sh --tools
#    "coffer restic qemu-img", --repo-rounds rounds; 0 skips): full backup,
#    re-backup and restore as ratios of restic's times, and the restore's
#    time as a ratio of qemu-img convert's. It needs disk.mod.raw (4 GiB
#    more disk).
#
# Prints one table: every measure, the committed figure, the limit (the
# figure plus the run-to-run spread written beside it in budget.txt), and
# whether it got worse by more than that spread; exits 1 if one did. Wall
# times on a shared 2-core machine move by 10-30% from run to run, CPU time
# with the load (caches, SMT), instruction counts and RSS hardly at all:
# hence the spreads. The load average before and after is printed too.
#
# Every step runs under a deadline (--deadline seconds each, `timeout`):
# a step past it is killed and the script says which step it waited for.
# The work directory is removed on exit, also when the script is killed.
#
# Why a copy of the binary: a binary fresh from `go build` sits in the page
# cache in 2 MiB folios (the linker writes it through a mapping), and the
# kernel (6.18 here) maps such a folio whole on the first touch, so every
# page of the binary's 57 MiB of code and read-only data counts in RSS. A
# copy, or the binary read back from disk, is mapped as far as it is
# touched (35 MiB). docs/benchmarks.md ("Peak RSS") has both figures.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

dir="$here/.cache/bench"
rounds=3
big=64G
repo_rounds=2
ir_size=128M
deadline=1800
budget="$here/bench/budget.txt"
work=""
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift 2 ;;
	--big) big=$2; shift 2 ;;
	--repo-rounds) repo_rounds=$2; shift 2 ;;
	--ir-size) ir_size=$2; shift 2 ;;
	--deadline) deadline=$2; shift 2 ;;
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
trap 'log "budget.sh: interrupted; removing $WORK"; exit 130' INT TERM
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
MEASURES=$WORK/measures.tsv
: >"$RES"; : >"$MEASURES"
# step LABEL CMD...: label, wall s, CPU s, peak RSS KiB
step() {
	local label=$1 tv rc=0; shift
	tv=$(mktemp)
	local t0 t1
	t0=$(date +%s.%N)
	timeout --kill-after=10 "$deadline" /usr/bin/time -v -o "$tv" "$@" >"$WORK/$label.log" 2>&1 || rc=$?
	t1=$(date +%s.%N)
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		log "$label: coffer did not finish within $deadline s (killed)"; rm -f "$tv"; exit 2
	elif [ $rc != 0 ]; then
		log "$label failed:"; tail -5 "$WORK/$label.log" >&2; rm -f "$tv"; exit 2
	fi
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
# median LABEL-PREFIX COLUMN [DIVISOR]: median of a column of $RES.
median() {
	awk -F'\t' -v p="$1" -v c="$2" -v d="${3:-1}" '
		index($1, p) == 1 {v[++k]=$c/d}
		END {
			if (k == 0) exit
			for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (v[j] < v[i]) {t=v[i]; v[i]=v[j]; v[j]=t}
			printf "%.4f\n", k % 2 ? v[(k+1)/2] : (v[k/2] + v[k/2+1]) / 2
		}' "$RES"
}
measure() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$MEASURES"; } # name value note

load0=$(cut -d' ' -f1-3 /proc/loadavg)
# 1. Peak RSS and CPU.
for r in $(seq 1 "$rounds"); do
	log "round $r of $rounds"
	run disk "$dir/disk.raw" "$r"
done
gib=$(awk -v b="$(stat -c %s "$dir/disk.raw")" 'BEGIN {printf "%.4f", b / 2^30}')
for s in backup restore; do
	measure "${s}_rss_mib" "$(median "disk:$s:" 4 1024)" "wall $(median "disk:$s:" 2) s"
	measure "${s}_cpu_s_per_gib" "$(median "disk:$s:" 3 "$gib")" ""
done
if [ "$big" != 0 ]; then
	log "sparse copy grown to $big"
	cp --sparse=always "$dir/disk.raw" "$WORK/big.raw"
	truncate -s "$big" "$WORK/big.raw"
	run big "$WORK/big.raw" 1
	rm -f "$WORK/big.raw"
	for s in backup restore; do
		measure "${s}_rss_mib_sparse_$big" "$(median "big:$s:" 4 1024)" "wall $(median "big:$s:" 2) s"
	done
fi

# 2. Instructions per byte.
if [ "$ir_size" != 0 ]; then
	log "instructions per byte (bench/instr.sh --size $ir_size)"
	"$here/bench/instr.sh" --dir "$dir" --size "$ir_size" --bin "$bin" --deadline "$deadline" >"$WORK/instr.tsv"
	while IFS=$'\t' read -r k v; do
		case $k in *_ir_per_byte) measure "$k" "$v" "first $ir_size of disk.raw" ;; esac
	done <"$WORK/instr.tsv"
fi

# 3. The repository benchmark against restic and qemu-img.
if [ "$repo_rounds" != 0 ]; then
	log "repository benchmark (bench/repo.sh --rounds $repo_rounds --tools \"coffer restic qemu-img\")"
	timeout --kill-after=30 "$((deadline * 4 * repo_rounds))" \
		"$here/bench/repo.sh" --dir "$dir" --rounds "$repo_rounds" --tools "coffer restic qemu-img" >"$WORK/repo.md" || {
		log "bench/repo.sh failed or did not finish within $((deadline * 4 * repo_rounds)) s"; exit 2; }
	RES=$dir/run/results.tsv
	for s in full incr restore; do
		c=$(median "coffer:$s:" 2); p=$(median "restic:$s:" 2)
		measure "${s}_x_restic" "$(echo "$p / $c" | bc -l)" "coffer $c s, restic $p s"
	done
	c=$(median "coffer:restore:" 2); q=$(median "qemu-img:restore:" 2)
	measure restore_of_qemu_img "$(echo "$c / $q" | bc -l)" "coffer $c s, qemu-img $q s"
fi
load1=$(cut -d' ' -f1-3 /proc/loadavg)

# The verdict: budget.txt lines are "name figure spread direction": max
# means lower is better (worse when above figure x (1 + spread)), min the
# opposite (worse when below figure x (1 - spread)).
echo "coffer $(git -C "$here" rev-parse --short HEAD) on $(nproc) CPUs; load average $load0 before, $load1 after; $rounds rounds; budget $budget"
echo
echo "| measure | this run | committed | limit | | note |"
echo "|---|---|---|---|---|---|"
awk -F'\t' '
	NR == FNR { if ($0 !~ /^#/ && NF) { split($0, f, /[ \t]+/); fig[f[1]]=f[2]; spr[f[1]]=f[3]; dir[f[1]]=f[4] } next }
	{
		n=$1; v=$2
		if (!(n in fig)) { printf "| %s | %.3f | - | - | | %s |\n", n, v, $3; next }
		lim = dir[n] == "min" ? fig[n] * (1 - spr[n]) : fig[n] * (1 + spr[n])
		bad = dir[n] == "min" ? v < lim : v > lim
		if (bad) over = 1
		printf "| %s | %.3f | %s | %s %.3f | %s | %s |\n", n, v, fig[n], (dir[n] == "min" ? ">=" : "<="), lim, (bad ? "WORSE" : "ok"), $3
	}
	END { exit over }' "$budget" "$MEASURES"
