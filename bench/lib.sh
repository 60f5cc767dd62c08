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

# timed OUT LABEL SYNC_PATH CMD...: runs CMD under /usr/bin/time -v, then
# sync -f SYNC_PATH; appends "label wall cpu rss_kib" to OUT. The wall
# time includes the sync (the tools differ in their fsync behaviour).
timed() {
	local out=$1 label=$2 syncp=$3; shift 3
	local tv; tv=$(mktemp)
	local t0 t1 rc=0
	# Same memory state before every step: write back and drop the page
	# cache (when permitted), then read the source images and everything
	# under $WORK (repositories, tool caches; not the restore target) back
	# in. Without this, a step that follows large writes pays for reclaiming
	# other steps' pages (seen: the same restore took 2.0 s or 4.3 s).
	settle
	t0=$(date +%s.%N)
	/usr/bin/time -v -o "$tv" "$@" >"$WORK/$label.out" 2>"$WORK/$label.log" || rc=$?
	sync -f "$syncp"
	t1=$(date +%s.%N)
	if [ $rc -ne 0 ]; then
		log "$label failed (exit $rc): see $WORK/$label.log"; tail -5 "$WORK/$label.log" "$WORK/$label.out" >&2
		rm -f "$tv"; return $rc
	fi
	local usr sys rss
	usr=$(awk -F': ' '/User time/ {print $2}' "$tv")
	sys=$(awk -F': ' '/System time/ {print $2}' "$tv")
	rss=$(awk -F': ' '/Maximum resident/ {print $2}' "$tv")
	rm -f "$tv"
	printf '%s\t%.3f\t%.2f\t%d\n' "$label" "$(echo "$t1 - $t0" | bc -l)" "$(echo "$usr + $sys" | bc -l)" "$rss" >>"$out"
}

settle() {
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
	cat "${DATA:?}"/disk.raw "$DATA"/disk.mod.raw >/dev/null
	find "$WORK" -type f ! -path "$WORK/out/*" -exec cat {} + >/dev/null 2>&1 || true
	sleep 0.5
}

# warm FILE: read FILE into the page cache (every tool reads a cached source).
warm() { cat "$@" >/dev/null; }

du_b() { du -sb "$1" | cut -f1; }
