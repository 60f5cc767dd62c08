// Package api holds coffer's result documents and error classes: what every
// face prints or serves. The command line's --json output and the REST API
// answer with these types, so one operation gives one document whichever
// face calls it.
//
// Conventions every document follows (TestDocumentConventions checks the
// ones a type can show):
//
//   - Field names are snake_case.
//   - Lists are [] when empty, never null; a list a source does not know
//     (the catalog records how many disks a point has, not the disks) is
//     left out rather than given empty.
//   - Times are RFC 3339; durations are seconds, in fields named
//     *_seconds.
//   - Byte counts are integers in fields named *_bytes: no MiB or MB in a
//     document, so nothing can be read in the wrong unit.
//   - Names say what they mean. A backup point (what `coffer snapshots`
//     lists) is "point" (point_id when referred to); a VM snapshot is the
//     hypervisor's (snapshot_mode says which kind was asked for and
//     achieved); a storage snapshot is the array's. The VM is always "vm"
//     (its name) and "vm_id". Retention is the keep rules of forget and
//     policies; object lock is what the storage enforces (locked_until).
//
// The package imports nothing of coffer: converting core values into
// documents is internal/service's job.
package api
