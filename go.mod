module github.com/coffer-backup/coffer

go 1.26.8

require (
	github.com/zeebo/blake3 v0.2.4
	golang.org/x/crypto v0.58.0
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/klauspost/cpuid/v2 v2.0.12 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
