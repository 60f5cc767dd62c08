# bench/lib.sh: shared helpers of the bench/*.sh scripts (sourced).

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export GOBIN="$here/.cache/bin"
export PATH="$GOBIN:$PATH"
export GOFLAGS="${GOFLAGS:-} -mod=mod"

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

apt_need() { # apt_need CMD PACKAGE
	command -v "$1" >/dev/null 2>&1 && return 0
	log "installing $2 (apt)"
	apt-get install -y "$2" >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y "$2" >/dev/null; }
}

# go_tool NAME MODULE VERSION PACKAGE: build a pinned Go tool into .cache/bin.
# `go install M@v` does not work through this proxy (it asks for the module
# list to check deprecation and gets 403), so a throwaway module pins the
# version with `go get` and builds the package.
go_tool() {
	local name=$1 mod=$2 ver=$3 pkg=$4
	if [ -x "$GOBIN/$name" ] && [ -f "$GOBIN/$name.version" ] && [ "$(cat "$GOBIN/$name.version")" = "$ver" ]; then
		return 0
	fi
	mkdir -p "$GOBIN"
	if (cd "$GOBIN" && GOBIN="$GOBIN" go install "$pkg@$ver") >/dev/null 2>&1; then
		echo "$ver" >"$GOBIN/$name.version"; return 0
	fi
	log "go install $pkg@$ver refused; building $mod@$ver from a pinned throwaway module"
	local tmp; tmp=$(mktemp -d)
	if (cd "$tmp" && go mod init benchtool >/dev/null 2>&1 && go get "$pkg@$ver" >/dev/null 2>&1 &&
		go build -o "$GOBIN/$name" "$pkg"); then
		echo "$ver" >"$GOBIN/$name.version"; rm -rf "$tmp"; return 0
	fi
	rm -rf "$tmp"
	log "could not build $name $ver (module proxy refused?)"
	return 1
}

# cpu_busy: busy CPU-seconds of the whole machine so far (all tenants).
cpu_busy() { awk '/^cpu / {printf "%.2f", ($2+$3+$4+$7+$8)/100}' /proc/stat; }

# waitidle: this machine is shared with other sessions' workloads. Wait (at
# most BENCH_IDLE_WAIT seconds, default 60) until the CPUs were >= 90% idle
# for 2 s in a row. Under a load that never drops, every step then waits
# the whole time: a small BENCH_IDLE_WAIT keeps a run within its deadline
# (other_cpu still reports the disturbance).
waitidle() {
	local ok=0 a b
	for _ in $(seq 1 "${BENCH_IDLE_WAIT:-60}"); do
		a=$(awk '/^cpu / {print $2+$3+$4+$7+$8, $5+$6}' /proc/stat)
		sleep 1
		b=$(awk '/^cpu / {print $2+$3+$4+$7+$8, $5+$6}' /proc/stat)
		if awk -v a="$a" -v b="$b" 'BEGIN {split(a,x," "); split(b,y," "); busy=y[1]-x[1]; idle=y[2]-x[2]; exit !(idle/(busy+idle) >= 0.9)}'; then
			ok=$((ok + 1)); [ $ok -ge 2 ] && return 0
		else
			ok=0
		fi
	done
	log "machine not idle after ${BENCH_IDLE_WAIT:-60} s; measuring anyway (see other_cpu)"
}

# settle: same state before every step: dirty pages written back, the
# machine idle, the source images and everything under $WORK (repositories,
# tool caches; not the restore target) in the page cache. With
# DROP_CACHES=1 the page cache is dropped first (this disturbs other
# tenants of a shared machine, so it is off by default).
settle() {
	sync
	if [ "${DROP_CACHES:-0}" = 1 ]; then echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; fi
	# disk.mod.raw only when built: bench/rss.sh and bench/budget.sh run
	# on data.sh --no-mod.
	cat "${DATA:?}"/disk.raw >/dev/null
	if [ -f "$DATA/disk.mod.raw" ]; then cat "$DATA/disk.mod.raw" >/dev/null; fi
	find "$WORK" -type f ! -path "$WORK/out/*" -exec cat {} + >/dev/null 2>&1 || true
	sync
	waitidle
	prefault
}

# prefault: this VM's balloon has free page reporting on (virtio-balloon
# feature bit 5): pages freed for ~2 s are handed back to the host, and the
# next process to touch them pays a host fault per page. A restore then
# varied between 2.0 and 4.5 s (2.7 to 6.8 CPU-s, all system time) with
# nothing else running. So, right before each step, touch PREFAULT_MIB
# (default 4096) of fresh memory through a tmpfs file and free it, so the
# step runs on guest-backed pages like it would on a normal host.
prefault() {
	local mib=${PREFAULT_MIB:-4096}
	[ "$mib" -gt 0 ] || return 0
	local f=/dev/shm/coffer-bench-prefault.$$
	dd if=/dev/zero of="$f" bs=1M count="$mib" status=none 2>/dev/null || true
	rm -f "$f"
}

# timed OUT LABEL SYNC_PATH CMD...: runs CMD under /usr/bin/time -v, then
# sync -f SYNC_PATH; appends "label wall cpu rss_kib other_cpu" to OUT.
# CMD is killed after STEP_DEADLINE seconds (default 1800), and the step
# fails saying so.
# The wall time includes the sync (the tools differ in their fsync
# behaviour). other_cpu is the CPU time other processes (other tenants)
# used during the step: a step with a large figure was disturbed.
timed() {
	local out=$1 label=$2 syncp=$3; shift 3
	local tv; tv=$(mktemp)
	local t0 t1 c0 c1 rc=0
	settle
	c0=$(cpu_busy)
	t0=$(date +%s.%N)
	timeout --kill-after=10 "${STEP_DEADLINE:-1800}" /usr/bin/time -v -o "$tv" "$@" >"$WORK/$label.out" 2>"$WORK/$label.log" || rc=$?
	sync -f "$syncp"
	t1=$(date +%s.%N)
	c1=$(cpu_busy)
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		log "$label: $1 did not finish within ${STEP_DEADLINE:-1800} s (STEP_DEADLINE; killed)"
		rm -f "$tv"; return $rc
	elif [ $rc -ne 0 ]; then
		log "$label failed (exit $rc): see $WORK/$label.log"; tail -5 "$WORK/$label.log" "$WORK/$label.out" >&2
		rm -f "$tv"; return $rc
	fi
	local usr sys rss cpu other
	usr=$(awk -F': ' '/User time/ {print $2}' "$tv")
	sys=$(awk -F': ' '/System time/ {print $2}' "$tv")
	rss=$(awk -F': ' '/Maximum resident/ {print $2}' "$tv")
	rm -f "$tv"
	cpu=$(echo "$usr + $sys" | bc -l)
	other=$(echo "o = $c1 - $c0 - $cpu; if (o < 0) o = 0; o" | bc -l)
	printf '%s\t%.3f\t%.2f\t%d\t%.2f\n' "$label" "$(echo "$t1 - $t0" | bc -l)" "$cpu" "$rss" "$other" >>"$out"
}

# warm FILE: read FILE into the page cache (every tool reads a cached source).
warm() { cat "$@" >/dev/null; }

du_b() { du -sb "$1" | cut -f1; }
