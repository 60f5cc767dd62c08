// Package files gives file-level access to the disks inside backup points
// without mounting anything: no root, no kernel filesystem drivers, no loop
// devices and no full restore. It reads the image through any io.ReaderAt
// (in coffer, restore.DiskReader: repository chunks behind a bounded
// cache), so it also runs on a backup server.
//
// # What works
//
//   - Partition tables: GPT, and MBR primary partitions (via
//     github.com/diskfs/go-diskfs). A disk without a table is treated as
//     one bare filesystem.
//   - ext2/ext3/ext4 (go-diskfs): names, data, mode, owner (uid/gid),
//     mtime/atime/ctime, symlinks.
//   - XFS v5 (github.com/masahiro331/go-xfs-filesystem): names, data, mode,
//     owner, times (read from the library's parsed inodes), symlinks: those
//     stored in the inode through the library, those in blocks (up to 1023
//     bytes, v5 header and CRC checked) by coffer (xfssymlink.go).
//   - FAT32 (go-diskfs): names (long names), data, mtime. FAT has no owners
//     or permissions: files extract as 0644, directories as 0755.
//   - NTFS (www.velocidex.com/golang/go-ntfs): names, data (the unnamed
//     stream), mtime/atime/ctime. Windows ACLs/SIDs are not mapped to Unix
//     owners: files extract as 0644, directories as 0755.
//   - LVM2: linear logical volumes on a physical volume inside a partition
//     (or the whole disk) appear as volumes named lvm:VG/LV; striped,
//     mirrored, thin and cached LVs are listed as unsupported.
//
// # Addressing
//
// Volumes are numbered like the partition table (1, 2, ...); a bare
// filesystem is volume 0; LVM logical volumes follow the partitions. When a
// disk holds exactly one readable filesystem its paths are used as they
// are ("/etc/passwd"); otherwise the root lists one directory per volume
// ("/1/etc/passwd", "/lvm:vg0-root/etc/passwd").
//
// # Damaged or hostile images
//
// Third-party readers can panic on corrupt input; every call into them is
// guarded and a panic becomes an error naming the volume. Sizes read from
// the image are bounded before they allocate. Damage confined to one entry
// (an unreadable file, symlink target or directory) makes Walk, Find,
// Extract, Zip and Tar skip that entry and return it with the reason (Skip);
// readers' warnings are counted per distinct message (Disk.Warnings).
// Failures of the image reader itself (ImageReadError) end the operation.
package files
