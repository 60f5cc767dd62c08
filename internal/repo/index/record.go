package index

import "encoding/binary"

// RecordSize is the size of an entry encoded as a sort record.
const RecordSize = 60

// PutRecord encodes e as a fixed-size record for an external sort (see
// internal/extsort): chunk ID first, so that records sort by chunk ID and
// the entries of one chunk in several segments come out next to each other.
func PutRecord(b []byte, e Entry) {
	copy(b[:32], e.ID[:])
	copy(b[32:48], e.Pack[:])
	binary.BigEndian.PutUint32(b[48:], e.Offset)
	binary.BigEndian.PutUint32(b[52:], e.Length)
	binary.BigEndian.PutUint32(b[56:], e.RawLength)
}

// GetRecord decodes a record written by PutRecord.
func GetRecord(b []byte) Entry {
	var e Entry
	copy(e.ID[:], b[:32])
	copy(e.Pack[:], b[32:48])
	e.Offset = binary.BigEndian.Uint32(b[48:])
	e.Length = binary.BigEndian.Uint32(b[52:])
	e.RawLength = binary.BigEndian.Uint32(b[56:])
	return e
}
