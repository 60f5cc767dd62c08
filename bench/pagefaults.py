#!/usr/bin/env python3
"""bench/pagefaults.py BINARY PERF_DATA: where in a binary a run faulted.

Counts the distinct pages of BINARY's address range a run faulted on,
by ELF section (readelf -S), with the type descriptors (runtime.types to
runtime.etypes, go tool nm) apart from the rest of .rodata. Record the
run with perf's software event (this VM has no hardware counters, but
page faults are counted by the kernel):

    perf record -q -e page-faults -c 1 -d -o run.data ./coffer backup disk disk.raw --name vm -q
    bench/pagefaults.py ./coffer run.data

Each fault maps a window of the file (64 KiB of fault-around, or a whole
large folio): the counts compare two binaries, they are not MiB.
docs/benchmarks.md (session of 2026-12-07) compares 1b15cd6 with main.
"""
import collections
import subprocess
import sys

binary, data = sys.argv[1], sys.argv[2]
sections = []
for line in subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True, check=True).stdout.splitlines():
    f = line.replace("[ ", "[").split()
    if len(f) > 5 and f[0].startswith("[") and f[2] in ("PROGBITS", "NOBITS") and int(f[3], 16) != 0:
        sections.append((int(f[3], 16), int(f[5], 16), f[1]))
marks = {}
for line in subprocess.run(["go", "tool", "nm", binary], capture_output=True, text=True, check=True).stdout.splitlines():
    f = line.split()
    if f[-1] in ("runtime.types", "runtime.etypes"):
        marks[f[-1]] = int(f[0], 16)
addrs = subprocess.run(["perf", "script", "-i", data, "-F", "addr"], capture_output=True, text=True, check=True).stdout.split()
count = collections.Counter()
seen = set()
for a in addrs:
    a = int(a, 16)
    if (a >> 12) in seen:
        continue
    seen.add(a >> 12)
    name = None
    for start, size, sec in sections:
        if start <= a < start + size:
            name = sec
    if name is None:
        continue  # the heap, stacks, shared libraries, the kernel
    if name == ".rodata" and marks.get("runtime.types", 0) <= a < marks.get("runtime.etypes", 0):
        name = ".rodata (runtime.types)"
    count[name] += 1
for name, n in sorted(count.items()):
    print(f"{n:6d} {name}")
