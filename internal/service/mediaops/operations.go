package mediaops

import (
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/service"
)

// Operations are this domain's rows of the operation table.
var Operations = []service.Operation{

	// Sequential media: libraries of the configuration, their volumes and
	// what is on them (endpoints_media.go).
	{ID: "media-library-status", Method: "MediaLibraryStatus", Summary: "a media library's drives and slots and the cartridges in them (as mtx status)",
		HTTP: service.Get, Path: "/media/libraries/{library}/status", Requires: service.Require(auth.RepoAudit, onLibrary),
		Endpoint: service.Returns(served(Ops.MediaLibraryStatus))},
	{ID: "media-load", Method: "MediaLoad", Summary: "load a cartridge of a media library into one of its drives (as mtx load, by barcode)", HTTP: service.Post,
		Path: "/media/libraries/{library}/drives/{drive}/load", Requires: service.Require(auth.RepoModify, onLibrary),
		NoConsole: "moves a cartridge with a library's robot by hand, for the one at the library (`coffer media load`): copies, restores and verifies load what they need",
		Endpoint:  service.Returns(served(Ops.MediaLoad))},
	{ID: "media-unload", Method: "MediaUnload", Summary: "return the cartridge in a drive of a media library to its slot (as mtx unload)", HTTP: service.Post,
		Path: "/media/libraries/{library}/drives/{drive}/unload", Requires: service.Require(auth.RepoModify, onLibrary),
		NoConsole: "moves a cartridge with a library's robot by hand, for the one at the library (`coffer media unload`): copies, restores and verifies unload what they loaded",
		Endpoint:  service.Returns(served(Ops.MediaUnload))},
	{ID: "media-label", Method: "MediaLabel", Summary: "label a cartridge of a media library into a media pool, erasing it", HTTP: service.Post,
		Path: "/media/libraries/{library}/label", Requires: service.Require(auth.RepoModify, onLibrary),
		Endpoint: service.Returns(served(Ops.MediaLabel))},
	{ID: "media-copy", Method: "MediaCopy", Summary: "copy backup points to a media pool of a library, multiplexed onto its drive (a task)", HTTP: service.Post,
		Path:         "/repositories/{repo}/media-copy",
		Requires:     []service.Requirement{{Privilege: auth.RepoRead, Object: service.OnRepo}, {Privilege: auth.RepoBackup, Object: onLibrary}},
		MaxBodyBytes: 256 * service.KiB, Endpoint: service.Returns(served(Ops.MediaCopy))},
	{ID: MediaCopyOnWorkerOperation, Method: "MediaCopyOnWorker", Summary: "write a copy to tape on the worker its library is attached to, the volumes written returned for the server to record",
		Internal: "a server hands it to the worker that a media-copy's library is attached to (media_worker.go): a request runs media-copy",
		Endpoint: service.Returns(Ops.MediaCopyOnWorker)},
	{ID: MediaOnWorkerOperation, Method: "MediaOnWorker", Summary: "run an operation on a media library on the worker it is attached to, the volumes it indexed returned for the server to record",
		Internal: "a server hands it to the worker that a media operation's library is attached to (media_handoff.go): a request runs that operation",
		Endpoint: service.Returns(Ops.MediaOnWorker)},
	{ID: "media-restore", Method: "MediaRestore", Summary: "restore a backup point's disks from a media library, without its repository (a task)",
		HTTP: service.Post, Path: "/media/libraries/{library}/points/{point}/restore", Requires: service.Require(auth.RepoRead, onLibrary),
		Endpoint: service.Returns(served(Ops.MediaRestore))},
	{ID: "media-files-extract", Method: "MediaFilesExtract", Summary: "extract files from a backed-up disk on media, without its repository (a task)",
		HTTP: service.Post, Path: "/media/libraries/{library}/points/{point}/files/extract", Requires: service.Require(auth.RepoRead, onLibrary),
		NoConsole: "writes files from tape into a directory of the server's host (`coffer media files`): the console restores a point from tape whole (media-restore, on the volume's page)",
		Endpoint:  service.Returns(served(Ops.MediaFilesExtract))},
	{ID: "media-verify", Method: "MediaVerify", Summary: "read a volume back: every block's checksum, its index and the media catalogue compared (a task)",
		HTTP: service.Post, Path: "/media/libraries/{library}/volumes/{barcode}/verify", Requires: service.Require(auth.RepoVerify, onLibrary),
		Endpoint: service.Returns(served(Ops.MediaVerify))},
	{ID: "rebuild-media-catalog", Method: "MediaCatalog", Summary: "rebuild the media catalogue from a library's volumes alone", HTTP: service.Post,
		Path: "/media/libraries/{library}/catalog/rebuild", Requires: service.Require(auth.RepoModify, onLibrary),
		Endpoint: service.Returns(served(Ops.MediaCatalog))},
	{ID: "list-media-volumes", Method: "MediaVolumes", Summary: "list the volumes of the media catalogue, with their pools, retention and WORM",
		HTTP: service.Get, Path: "/media/volumes", Requires: service.Lists(auth.RepoAudit, auth.MediaPath),
		Endpoint: service.Returns(Ops.MediaVolumes)},
	{ID: "media-contents", Method: "MediaContents", Summary: "list which blocks of which volumes hold backup points", HTTP: service.Get,
		Path: "/media/contents", Requires: service.Lists(auth.RepoAudit, auth.MediaPath),
		Endpoint: service.Returns(Ops.MediaContents)},
}
