package policy

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// StorageSnapshots is the storage-snapshots section: where the providers of
// storage-level snapshots (an array's FlashCopy, ZFS, LVM) that `group:
// datastore` needs will be declared, each naming the datastores it covers.
// This version has no provider, so any content is refused: a section that
// is accepted and ignored would let an operator believe datastores are
// protected by storage snapshots while every VM is backed up on its own.
// An empty or absent section is fine.
//
// A provider kind added later becomes an entry type here (name, kind,
// datastores, options decoded by the provider, like connections), and
// HasProvider answers from those entries.
type StorageSnapshots struct{}

// ErrNoStorageProviders is the message for any content in the section.
const ErrNoStorageProviders = "storage snapshot providers are not available in this version of coffer: remove the storage-snapshots section " +
	"(policies back up each VM through its own hypervisor snapshot)"

// UnmarshalYAML accepts only an empty section.
func (s *StorageSnapshots) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	empty := (n.Kind == yaml.ScalarNode && n.Tag == "!!null") ||
		((n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode) && len(n.Content) == 0)
	if empty {
		return nil
	}
	return fmt.Errorf("line %d: %s", n.Line, ErrNoStorageProviders)
}

// HasProvider reports whether a storage snapshot provider of this section
// covers the connection's datastores. None can in this version.
func (s StorageSnapshots) HasProvider(connection string) bool { return false }
