package api

import "time"

// The inputs of the sequential-media operations (see inputs.go). A
// request names a library of the server's configuration, never a
// directory or a device of its host.

// LibraryParam is the media library a request names (media-library-status
// takes nothing else).
type LibraryParam struct {
	Library string `path:"library" minLength:"1" maxLength:"255" example:"vtl1" doc:"a media library of the server's configuration"`
}

// DriveParam is a drive of the library a request names (media-unload
// takes nothing else).
type DriveParam struct {
	LibraryParam
	Drive int `path:"drive" minimum:"0" maximum:"1024" doc:"the changer's number of the drive (mtx's data transfer element)"`
}

// MediaLoadInput loads a cartridge into a drive.
type MediaLoadInput struct {
	DriveParam
	Body MediaLoadRequest
}

// MediaLabelInput labels a cartridge into a media pool.
type MediaLabelInput struct {
	LibraryParam
	Body MediaLabelRequest
}

// MediaCopyInput copies points of a repository to a pool of a library.
type MediaCopyInput struct {
	RepoParam
	Library string `query:"library" required:"true" minLength:"1" maxLength:"255" doc:"the media library of the server's configuration to write to"`
	Body    MediaCopyRequest
}

// Retention is how long the volumes written are protected.
func (r MediaCopyRequest) Retention() time.Duration {
	return time.Duration(r.RetentionSeconds * float64(time.Second))
}

// MediaPointParam is a backup point on a library's volumes.
type MediaPointParam struct {
	LibraryParam
	Point string `path:"point" minLength:"1" maxLength:"64" doc:"a backup point in the media catalogue: its ID or a unique ID prefix"`
}

// MediaRestoreInput restores a point's disks from a library.
type MediaRestoreInput struct {
	MediaPointParam
	Body MediaRestoreRequest
}

// MediaFilesExtractInput extracts files from a disk of a point on media.
type MediaFilesExtractInput struct {
	MediaPointParam
	Disk string `query:"disk" maxLength:"255" doc:"the disk: index, key or name (default: the first)"`
	Body FilesExtractRequest
}

// MediaVerifyInput reads a volume of a library back.
type MediaVerifyInput struct {
	LibraryParam
	Barcode string `path:"barcode" minLength:"1" maxLength:"16" doc:"the volume's barcode"`
}

// RebuildMediaCatalogInput rebuilds the media catalogue from a library's
// volumes.
type RebuildMediaCatalogInput struct {
	LibraryParam
	Body MediaCatalogRequest
}

// ListMediaVolumesInput lists the volumes of the media catalogue.
type ListMediaVolumesInput struct {
	Pool    string `query:"pool" maxLength:"255" doc:"only this pool's volumes"`
	Library string `query:"library" maxLength:"255" doc:"only the volumes last seen in this library"`
}

// MediaContentsInput lists the segments of the media catalogue.
type MediaContentsInput struct {
	Barcode string `query:"barcode" maxLength:"16" doc:"only this volume's segments"`
	Point   string `query:"point" maxLength:"64" doc:"only this backup point's segments: its ID or a unique ID prefix"`
}
