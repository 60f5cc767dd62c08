package files

import (
	"sync"

	xfslog "github.com/masahiro331/go-xfs-filesystem/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The XFS library logs through one process-wide zap logger that, left as
// it is, writes to stderr at debug level: a line for each inode of a kind
// it does not read, every time it parses that inode (hundreds of identical
// lines for one directory), and hex dumps of inodes it fails on. coffer
// routes the library's warnings to the Disk whose call raised them, where
// they are counted once per distinct message (Disk.Warnings), and drops
// its debug output: the error that follows a failure says the same.
//
// The logger being global, calls into the library hold xfsLib, which also
// makes them safe: the library seeks one shared reader per filesystem.
var xfsLib struct {
	sync.Mutex
	warn   func(string) // of the filesystem whose call is running
	logger sync.Once
}

// xfsCall runs fn with the library to itself, its warnings going to warn.
func xfsCall(warn func(string), fn func()) {
	xfsLib.logger.Do(func() { xfslog.SetLogger(zap.New(xfsLogCore{}).Sugar()) })
	xfsLib.Lock()
	defer xfsLib.Unlock()
	xfsLib.warn = warn
	defer func() { xfsLib.warn = nil }()
	fn()
}

// xfsRemoteSymlinkWarning is what the library says about every symlink
// whose target lives in blocks; xfsFS reads those itself (xfssymlink.go).
const xfsRemoteSymlinkWarning = "not support XFS_DINODE_FMT_EXTENTS isSymlink"

// xfsLogCore is a zap core that hands warnings to xfsLib.warn.
type xfsLogCore struct{}

func (xfsLogCore) Enabled(l zapcore.Level) bool        { return l >= zapcore.WarnLevel }
func (c xfsLogCore) With([]zapcore.Field) zapcore.Core { return c }
func (xfsLogCore) Sync() error                         { return nil }

func (c xfsLogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// Write runs inside a library call, so under xfsLib.
func (xfsLogCore) Write(e zapcore.Entry, _ []zapcore.Field) error {
	if xfsLib.warn != nil && e.Message != xfsRemoteSymlinkWarning {
		xfsLib.warn("xfs: " + e.Message)
	}
	return nil
}
