package store

// CopyMethod is how a backend copied an object from another store (see
// the copy offload in internal/transfer): by the storage itself, or with
// the bytes passing through coffer.
type CopyMethod string

const (
	// CopyCloned: the filesystem shares the source's extents (FICLONE on
	// XFS with reflink=1, btrfs): no data moved at all.
	CopyCloned CopyMethod = "cloned"
	// CopyKernel: the kernel copied the bytes (copy_file_range) without
	// lifting them into coffer; NFS servers copy on their side here.
	CopyKernel CopyMethod = "kernel-copied"
	// CopyServerSide: the S3 service copied the object (CopyObject, or
	// UploadPartCopy for a large one); no payload passed through the host.
	CopyServerSide CopyMethod = "server-side"
	// CopyThroughHost: coffer read and wrote the bytes (another
	// filesystem, or one that cannot copy by itself).
	CopyThroughHost CopyMethod = "copied"
)

// Offloaded reports whether the storage made the copy without the data
// passing through this host. A kernel copy still moves every byte through
// the host's page cache and disks, so it counts as the fallback, as it
// does for the other copies (internal/offload).
func (m CopyMethod) Offloaded() bool {
	return m == CopyCloned || m == CopyServerSide
}

// Innermost returns the backend under a chain of decorators (the metadata
// cache, test wrappers), each of which exposes the store it wraps with
// Unwrap. A backend's optional capabilities that involve a second store
// (a copy between two stores of one service) are found on it.
func Innermost(s Store) Store {
	for {
		u, ok := s.(interface{ Unwrap() Store })
		if !ok {
			return s
		}
		s = u.Unwrap()
	}
}
