#!/usr/bin/env bash
# bench/repo.sh: repository benchmark. coffer against restic, borg and kopia
# (and cp / qemu-img convert / zstd as copy limits) on the same image, in the
# same run, on the same disk.
#
#   bench/repo.sh [--size 4G] [--rounds 3] [--tools "coffer coffer-purego restic borg kopia cp qemu-img zstd"]
#                 [--dir DIR] [--no-cmp] [--keep]
#
# Steps per tool and round, each on a fresh repository:
#   full     back up vm/disk.img, a hard link to disk.raw
#   incr     back up vm/disk.img again, now a hard link to disk.mod.raw (same
#            path, different file: every tool re-reads and re-hashes it all;
#            no change tracking is used)
#   restore  restore the full backup point to a file on the same disk
#            (sparse where the tool can: restic --sparse, borg --sparse,
#            kopia --write-sparse-files; coffer always writes sparse), then
#            compare it with disk.raw (cmp, untimed; --no-cmp skips it)
# Every timed step is the tool's own run under /usr/bin/time -v (CPU, peak
# RSS) followed by `sync -f`; wall times include that sync. The source is
# read into the page cache before each backup. Medians over --rounds.
# Repository size is `du -sb` of the repository directory. Snapshot-ID
# lookups are outside the timed steps.
#
# Settings (default ones unless noted, encryption on everywhere):
#   coffer      256 KiB chunks (its default), zstd level 1, AES-256-GCM
#   coffer-purego  the same binary built with CGO_ENABLED=0 (pure-Go zstd
#               from klauspost/compress instead of the bundled C zstd)
#   coffer-1m   coffer with `init --chunk-size 1MiB`; coffer-4m and
#               coffer-64k likewise (not in the default list)
#   restic      0.18.1 (built from its pinned module), `backup --stdin`,
#               compression auto (zstd default level), repository v2
#   borg        Debian 1.2.4, -e repokey, default compression lz4
#   borg-zstd   the same with --compression zstd,3 (not in the default list)
#   kopia       0.22.3 (built from its pinned module), BLAKE3-256,
#               AES256-GCM-HMAC-SHA256, compression zstd-fastest, parallel
#               upload of the one big file
#   cp          cp + sync of disk.raw (copy limit for backup)
#   qemu-img    qemu-img convert -O raw (sparse output; the restore limit)
#   zstd        zstd -T2 -1 (compression without dedup)
# Output: a table on stdout (markdown), raw figures in DIR/run/results.tsv.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

size=4G
rounds=3
tools="coffer coffer-purego restic borg kopia cp qemu-img zstd"
dir="$here/.cache/bench"
do_cmp=1
keep=0
while [ $# -gt 0 ]; do
	case "$1" in
	--size) size=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--tools) tools=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--no-cmp) do_cmp=0; shift ;;
	--keep) keep=1; shift ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "repo.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

"$here/bench/data.sh" --size "$size" --dir "$dir" >&2
DATA=$dir
WORK=$dir/run
rm -rf "$WORK"; mkdir -p "$WORK" "$DATA/vm"
RES=$WORK/results.tsv
SZ=$WORK/sizes.tsv
: >"$RES"; : >"$SZ"
export WORK

# --- tools ------------------------------------------------------------------
apt_need /usr/bin/time time
apt_need bc bc
apt_need jq jq
apt_need qemu-img qemu-utils
log "building coffer"
(cd "$here" && go build -o "$GOBIN/coffer" ./cmd/coffer)
case " $tools " in *" coffer-purego "*)
	(cd "$here" && CGO_ENABLED=0 go build -o "$GOBIN/coffer-purego" ./cmd/coffer) ;;
esac
for t in $tools; do
	case $t in
	restic) go_tool restic github.com/restic/restic v0.18.1 github.com/restic/restic/cmd/restic ||
		{ apt_need restic restic; log "using Debian's restic: $(restic version)"; } ;;
	kopia) go_tool kopia github.com/kopia/kopia v0.22.3 github.com/kopia/kopia ||
		{ log "kopia unavailable: skipped"; tools=${tools/kopia/}; } ;;
	borg|borg-zstd) apt_need borg borgbackup ;;
	zstd) apt_need zstd zstd ;;
	esac
done

# --- per-tool steps ---------------------------------------------------------
PW=coffer-bench-password
link() { ln -f "$DATA/$1" "$DATA/vm/disk.img"; }
record_size() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$SZ"; } # tool key round value
check() { # check TOOL ROUND FILE
	if [ $do_cmp = 1 ]; then
		if cmp -s "$DATA/disk.raw" "$3"; then record_size "$1" cmp_ok "$2" 1
		else log "$1 round $2: RESTORED IMAGE DIFFERS from disk.raw"; record_size "$1" cmp_ok "$2" 0; fi
	fi
	rm -rf "$WORK/out"
}

run_coffer() { # run_coffer TOOL ROUND CHUNK [BINARY]
	local t=$1 r=$2 chunk=$3 bin=${4:-coffer} repo=$WORK/repo-$1
	export COFFER_REPO=$repo COFFER_PASSWORD=$PW COFFER_CONFIG=/dev/null
	export COFFER_CATALOG=$WORK/$t-catalog.db COFFER_CACHE_DIR=$WORK/$t-cache
	rm -rf "$repo" "$COFFER_CATALOG" "$COFFER_CACHE_DIR"
	"$bin" init --chunk-size "$chunk" --json >/dev/null
	link disk.raw
	timed "$RES" "$t:full:$r" "$WORK" "$bin" backup disk "$DATA/vm/disk.img" --name vm --json
	local id; id=$(jq -r .id "$WORK/$t:full:$r.out")
	record_size "$t" repo_full "$r" "$(du_b "$repo")"
	"$bin" stats --json >"$WORK/$t-stats.json"
	link disk.mod.raw
	timed "$RES" "$t:incr:$r" "$WORK" "$bin" backup disk "$DATA/vm/disk.img" --name vm --json
	record_size "$t" repo_incr "$r" "$(du_b "$repo")"
	record_size "$t" incr_read "$r" "$(jq -r .read_bytes "$WORK/$t:incr:$r.out")"
	mkdir -p "$WORK/out"
	timed "$RES" "$t:restore:$r" "$WORK" "$bin" restore "$id" --to "$WORK/out/disk.raw" --json
	check "$t" "$r" "$WORK/out/disk.raw"
	[ $keep = 1 ] || rm -rf "$repo"
	unset COFFER_REPO COFFER_PASSWORD COFFER_CATALOG COFFER_CACHE_DIR
}

run_restic() {
	local t=$1 r=$2 repo=$WORK/repo-$1
	export RESTIC_REPOSITORY=$repo RESTIC_PASSWORD=$PW RESTIC_CACHE_DIR=$WORK/restic-cache
	rm -rf "$repo" "$RESTIC_CACHE_DIR"
	restic init --repository-version 2 >/dev/null
	link disk.raw
	timed "$RES" "$t:full:$r" "$WORK" sh -c 'exec restic backup --no-scan --quiet --host bench --stdin --stdin-filename disk.img <"$1"' - "$DATA/vm/disk.img"
	local id; id=$(restic snapshots --json | jq -r '.[0].id')
	record_size "$t" repo_full "$r" "$(du_b "$repo")"
	link disk.mod.raw
	timed "$RES" "$t:incr:$r" "$WORK" sh -c 'exec restic backup --no-scan --quiet --host bench --stdin --stdin-filename disk.img <"$1"' - "$DATA/vm/disk.img"
	record_size "$t" repo_incr "$r" "$(du_b "$repo")"
	mkdir -p "$WORK/out"
	timed "$RES" "$t:restore:$r" "$WORK" restic restore "$id" --sparse --target "$WORK/out"
	check "$t" "$r" "$WORK/out/disk.img"
	[ $keep = 1 ] || rm -rf "$repo"
	unset RESTIC_REPOSITORY RESTIC_PASSWORD RESTIC_CACHE_DIR
}

run_borg() { # run_borg TOOL ROUND COMPRESSION
	local t=$1 r=$2 comp=$3 repo=$WORK/repo-$1
	export BORG_PASSPHRASE=$PW BORG_BASE_DIR=$WORK/borg-base BORG_RELOCATED_REPO_ACCESS_IS_OK=yes
	rm -rf "$repo" "$BORG_BASE_DIR"
	borg init -e repokey "$repo" >/dev/null 2>&1
	link disk.raw
	(cd "$DATA" && timed "$RES" "$t:full:$r" "$WORK" borg create --compression "$comp" "$repo::full" vm/disk.img)
	record_size "$t" repo_full "$r" "$(du_b "$repo")"
	link disk.mod.raw
	(cd "$DATA" && timed "$RES" "$t:incr:$r" "$WORK" borg create --compression "$comp" "$repo::incr" vm/disk.img)
	record_size "$t" repo_incr "$r" "$(du_b "$repo")"
	mkdir -p "$WORK/out"
	(cd "$WORK/out" && timed "$RES" "$t:restore:$r" "$WORK" borg extract --sparse "$repo::full")
	check "$t" "$r" "$WORK/out/vm/disk.img"
	[ $keep = 1 ] || rm -rf "$repo"
	unset BORG_PASSPHRASE BORG_BASE_DIR
}

run_kopia() {
	local t=$1 r=$2 repo=$WORK/repo-$1
	export KOPIA_PASSWORD=$PW KOPIA_CONFIG_PATH=$WORK/kopia/repository.config KOPIA_CHECK_FOR_UPDATES=false
	export KOPIA_CACHE_DIRECTORY=$WORK/kopia/cache KOPIA_LOG_DIR=$WORK/kopia/logs
	rm -rf "$repo" "$WORK/kopia"
	kopia repository create filesystem --path "$repo" --block-hash=BLAKE3-256 \
		--encryption=AES256-GCM-HMAC-SHA256 --cache-directory "$KOPIA_CACHE_DIRECTORY" >/dev/null 2>&1
	kopia policy set --global --compression=zstd-fastest --parallel-upload-above-size-mib=512 >/dev/null 2>&1
	link disk.raw
	timed "$RES" "$t:full:$r" "$WORK" kopia snapshot create --no-progress "$DATA/vm"
	local id; id=$(kopia snapshot list --json "$DATA/vm" | jq -r '.[0].id')
	record_size "$t" repo_full "$r" "$(du_b "$repo")"
	link disk.mod.raw
	timed "$RES" "$t:incr:$r" "$WORK" kopia snapshot create --no-progress "$DATA/vm"
	record_size "$t" repo_incr "$r" "$(du_b "$repo")"
	timed "$RES" "$t:restore:$r" "$WORK" kopia snapshot restore --write-sparse-files "$id" "$WORK/out"
	check "$t" "$r" "$WORK/out/disk.img"
	[ $keep = 1 ] || rm -rf "$repo"
	unset KOPIA_PASSWORD KOPIA_CONFIG_PATH
}

run_cp() {
	local t=$1 r=$2
	mkdir -p "$WORK/out"
	timed "$RES" "$t:full:$r" "$WORK" cp "$DATA/disk.raw" "$WORK/out/disk.raw"
	record_size "$t" repo_full "$r" "$(du_b "$WORK/out/disk.raw")"
	rm -rf "$WORK/out"
}

run_qemu-img() {
	local t=$1 r=$2
	mkdir -p "$WORK/out"
	timed "$RES" "$t:restore:$r" "$WORK" qemu-img convert -f raw -O raw "$DATA/disk.raw" "$WORK/out/disk.raw"
	check "$t" "$r" "$WORK/out/disk.raw"
}

run_zstd() {
	local t=$1 r=$2
	mkdir -p "$WORK/out"
	timed "$RES" "$t:full:$r" "$WORK" zstd -q -T2 -1 "$DATA/disk.raw" -o "$WORK/out/disk.raw.zst"
	record_size "$t" repo_full "$r" "$(du_b "$WORK/out/disk.raw.zst")"
	timed "$RES" "$t:restore:$r" "$WORK" zstd -q -d --sparse "$WORK/out/disk.raw.zst" -o "$WORK/out/disk.raw"
	check "$t" "$r" "$WORK/out/disk.raw"
}

versions() {
	echo "coffer $(cd "$here" && git rev-parse --short HEAD)$(cd "$here" && git diff --quiet HEAD -- . ':!docs' || echo +dirty) $(coffer --version | sed 's/^coffer [^ ]* //')"
	case " $tools " in *" coffer-purego "*) echo "coffer-purego $(coffer-purego --version | sed 's/^coffer [^ ]* //')" ;; esac
	for t in $tools; do case $t in
		restic) restic version | head -1 ;;
		borg|borg-zstd) borg --version ;;
		kopia) echo "kopia $(kopia --version 2>&1 | head -1)" ;;
		qemu-img) qemu-img --version | head -1 ;;
		zstd) zstd --version ;;
	esac; done | sort -u
}

# --- run ----------------------------------------------------------------------
log "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
versions | tee "$WORK/versions.txt" >&2
for r in $(seq 1 "$rounds"); do
	for t in $tools; do
		log "round $r: $t"
		case $t in
		coffer) run_coffer coffer "$r" 256KiB ;;
		coffer-purego) run_coffer coffer-purego "$r" 256KiB coffer-purego ;;
		coffer-1m) run_coffer coffer-1m "$r" 1MiB ;;
		coffer-4m) run_coffer coffer-4m "$r" 4MiB ;;
		coffer-64k) run_coffer coffer-64k "$r" 64KiB ;;
		restic) run_restic restic "$r" ;;
		borg) run_borg borg "$r" lz4 ;;
		borg-zstd) run_borg borg-zstd "$r" zstd,3 ;;
		kopia) run_kopia kopia "$r" ;;
		cp) run_cp cp "$r" ;;
		qemu-img) run_qemu-img qemu-img "$r" ;;
		zstd) run_zstd zstd "$r" ;;
		*) log "unknown tool $t"; exit 2 ;;
		esac
	done
done
[ $keep = 1 ] || rm -rf "$WORK/out"
python3 "$here/bench/report.py" "$RES" "$SZ" "$(stat -c %s "$DATA/disk.raw")" "$(cat "$DATA/stats.txt" 2>/dev/null || true)" "$tools"
