module github.com/coffer-backup/coffer

go 1.26.8
