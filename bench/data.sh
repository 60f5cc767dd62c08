#!/usr/bin/env bash
# bench/data.sh: build the benchmark disk images.
#
#   bench/data.sh [--size 4G] [--dir DIR] [--change-pct 2] [--rootfs debootstrap|host] [--no-mod]
#
# Produces in DIR (default: .cache/bench in the repository):
#   disk.raw      a raw disk image of --size bytes: an MBR with one ext4
#                 partition at 1 MiB, built with mkfs.ext4 -d (no loop mount),
#                 holding a Debian 12 root filesystem plus 300 MiB of
#                 incompressible data at /srv/data/random.bin; the rest is
#                 free. Fully allocated on the host (every byte written, as a
#                 thick-provisioned image), so every tool reads all of it.
#   disk.mod.raw  a copy in which --change-pct percent of the image's 4 MiB
#                 regions (all chosen among regions that hold data) are
#                 touched, as in the reference data set (20 of 1024 regions,
#                 96 blocks, 6 MiB at 4 GiB): ~4.8 random 64 KiB blocks per
#                 touched region are rewritten, half with fresh random bytes,
#                 half with a copy of another 64 KiB block of the image with
#                 16 bytes changed (seeded, reproducible).
#   changes.csv   offset,length of every rewritten block.
# --no-mod builds (or accepts) disk.raw alone: bench/budget.sh and
# bench/rss.sh need no disk.mod.raw, and it is 4 GiB of disk more.
#
# The root filesystem comes from debootstrap (bookworm, minbase plus systemd,
# linux-image-amd64, openssh-server, python3, perl, git, build-essential,
# vim, locales, man-db; apt cache cleaned), fetched from deb.debian.org.
# Without network access to Debian use --rootfs host: the files of this
# machine's installed Debian packages (dpkg -L) instead (also real OS data).
# The rootfs is kept in DIR/rootfs and reused by later runs.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
size=4G
dir="$here/.cache/bench"
change_pct=2
rootfs_kind=debootstrap
no_mod=0
while [ $# -gt 0 ]; do
	case "$1" in
	--size) size=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--change-pct) change_pct=$2; shift 2 ;;
	--rootfs) rootfs_kind=$2; shift 2 ;;
	--no-mod) no_mod=1; shift ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "data.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
mkdir -p "$dir"
cd "$dir"

need() { command -v "$1" >/dev/null 2>&1 || apt-get install -y "$2" >/dev/null; }
need mkfs.ext4 e2fsprogs
need sfdisk fdisk
need python3 python3

bytes=$(numfmt --from=iec "$size")
stamp="size=$bytes change=$change_pct rootfs=$rootfs_kind v2"
if [ -f disk.raw ] && { [ -f disk.mod.raw ] || [ $no_mod = 1 ]; } && [ "$(cat stamp 2>/dev/null)" = "$stamp" ]; then
	echo "data.sh: the images in $dir are up to date ($stamp)"
	exit 0
fi
rm -f stamp

if [ ! -f rootfs/.complete ]; then
	rm -rf rootfs
	if [ "$rootfs_kind" = debootstrap ]; then
		need debootstrap debootstrap
		echo "data.sh: debootstrap bookworm into $dir/rootfs (needs deb.debian.org)"
		debootstrap --variant=minbase \
			--include=systemd,systemd-sysv,linux-image-amd64,openssh-server,python3,perl,git,build-essential,vim,locales,man-db \
			bookworm rootfs http://deb.debian.org/debian >debootstrap.log 2>&1 ||
			{ echo "data.sh: debootstrap failed (see $dir/debootstrap.log); try --rootfs host" >&2; exit 1; }
		rm -rf rootfs/var/cache/apt/archives/*.deb rootfs/var/lib/apt/lists/*
	else
		echo "data.sh: copying the files of this machine's installed Debian packages into $dir/rootfs"
		mkdir -p rootfs
		dpkg-query -W -f '${binary:Package}\n' | xargs dpkg-query -L 2>/dev/null | sort -u | sed 's|^/||; /^$/d; /^\.$/d' |
			tar -C / --no-recursion -cf - -T - 2>/dev/null | tar -C rootfs -xf -
	fi
	touch rootfs/.complete
fi

# 300 MiB of incompressible data, reproducible (seeded).
mkdir -p rootfs/srv/data
if [ ! -f rootfs/srv/data/random.bin ]; then
	python3 -c 'import random,sys; r=random.Random(20261123); [sys.stdout.buffer.write(r.randbytes(1<<20)) for _ in range(300)]' >rootfs/srv/data/random.bin
fi

echo "data.sh: building $size disk.raw"
part_bytes=$((bytes - (1 << 20)))
rm -f part.img disk.raw disk.mod.raw

mkfs.ext4 -q -F -L benchroot -d rootfs part.img $((part_bytes / 1024))k
# Thick image: write every byte (zeros first), then the MBR and the partition.
dd if=/dev/zero of=disk.raw bs=4M count=$((bytes / (4 << 20))) status=none
echo 'label: dos
start=2048, type=83' | sfdisk -q disk.raw >/dev/null
dd if=part.img of=disk.raw bs=1M seek=1 conv=notrunc,sparse status=none
# conv=sparse above skips zero blocks of part.img: the zeros are already written.
rm -f part.img

if [ $no_mod = 1 ]; then
	sync -f disk.raw
	echo "$stamp" >stamp
	ls -ls disk.raw
	exit 0
fi
echo "data.sh: building disk.mod.raw (${change_pct}% of the data regions touched)"
cp --sparse=never disk.raw disk.mod.raw
python3 - "$change_pct" <<'EOF'
import os, random, sys
pct = float(sys.argv[1])
R, B = 4 << 20, 64 << 10
rnd = random.Random(42)
f = open("disk.mod.raw", "r+b")
size = os.fstat(f.fileno()).st_size
zero = bytes(R)
data_regions = []
used_blocks = 0
for i in range(size // R):
    f.seek(i * R)
    buf = f.read(R)
    if buf != zero:
        data_regions.append(i)
        used_blocks += sum(1 for j in range(0, R, B) if buf[j:j+B] != bytes(B))
n = min(len(data_regions), max(1, round(size // R * pct / 100)))
touched = sorted(rnd.sample(data_regions, n))
nblocks = round(n * 4.8)  # 20 regions -> 96 blocks at 4 GiB, as in the reference data
out = []
for k in range(nblocks):
    reg = touched[k % n]
    off = reg * R + rnd.randrange(R // B) * B
    if k % 2 == 0:
        new = rnd.randbytes(B)
    else:
        src = rnd.choice(data_regions) * R + rnd.randrange(R // B) * B
        f.seek(src); new = bytearray(f.read(B))
        p = rnd.randrange(B - 16); new[p:p+16] = rnd.randbytes(16); new = bytes(new)
    f.seek(off); f.write(new)
    out.append((off, B))
f.close()
with open("changes.csv", "w") as c:
    c.write("offset,length\n")
    for o, l in sorted(set(out)):
        c.write(f"{o},{l}\n")
msg = (f"{len(data_regions)} of {size//R} 4 MiB regions hold data "
      f"({used_blocks*B/2**20:.0f} MiB non-zero at 64 KiB); touched {n} regions, "
      f"{len(set(out))} blocks of 64 KiB ({len(set(out))*B/2**20:.1f} MiB)")
print("data.sh: " + msg)
open("stats.txt", "w").write(msg + "\n")
EOF
sync -f disk.raw
echo "$stamp" >stamp
ls -ls disk.raw disk.mod.raw
