package api

import "time"

// FileEntry is one file, directory or link inside a backed-up disk.
type FileEntry struct {
	Path string `json:"path"`
	Name string `json:"name"`
	// Type is file, dir, symlink, block-device, char-device, pipe, socket
	// or other; Mode is type and permissions as ls shows them
	// ("drwxr-xr-x").
	Type      string    `json:"type"`
	Mode      string    `json:"mode"`
	SizeBytes int64     `json:"size_bytes"`
	UID       int       `json:"uid"`
	GID       int       `json:"gid"`
	MTime     time.Time `json:"mtime"`
	ATime     time.Time `json:"atime,omitzero"`
	CTime     time.Time `json:"ctime,omitzero"`
	Link      string    `json:"link,omitempty"` // a symlink's target
	Inode     uint64    `json:"inode,omitempty"`
	// Unreadable says why part of the entry could not be read (a symlink
	// target in damaged blocks); the entry is still listed.
	Unreadable string `json:"unreadable,omitempty"`
}

// Volume is a partition or logical volume of a backed-up disk.
type Volume struct {
	Name        string `json:"name"` // "0" (bare disk), "1", "2", ..., "lvm:VG-LV"
	OffsetBytes int64  `json:"offset_bytes"`
	SizeBytes   int64  `json:"size_bytes"`
	Type        string `json:"type"` // ext4, xfs, vfat, ntfs, lvm2-pv, unknown
	Note        string `json:"note,omitempty"`
}

// Skip is an entry that could not be listed, searched or extracted.
type Skip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Warning is a distinct message of the file system readers, with how often
// it came up.
type Warning struct {
	Message string `json:"message"`
	Count   int    `json:"count"`
}

// FilesListing is a directory inside a backed-up disk.
type FilesListing struct {
	Entries  []FileEntry `json:"entries"`
	Warnings []Warning   `json:"warnings"`
}

// FilesExtract is what `coffer files get` extracted.
type FilesExtract struct {
	Files          int       `json:"files"`
	Dirs           int       `json:"dirs"`
	Links          int       `json:"links"`
	ExtractedBytes int64     `json:"extracted_bytes"`
	Skipped        []Skip    `json:"skipped"`
	Warnings       []Warning `json:"warnings"`
}

// FilesFind is what `coffer files find` found.
type FilesFind struct {
	Entries  []FileEntry `json:"entries"`
	Skipped  []Skip      `json:"skipped"`
	Warnings []Warning   `json:"warnings"`
}
