// Package upgradecmd holds `coffer upgrade`: what an operator runs before
// installing another version of coffer. Its tests hold the upgrade path
// itself: every release's fixture opens in this build, the previous
// release's build and this one share a repository, and servers of both
// share a PostgreSQL catalog (docs/upgrading.md).
package upgradecmd
