package api

// The operations' inputs (see input.go): each operation's parameters and
// body as one struct, which the server decodes a request into and the
// command line fills in. Parameters several operations share are structs
// of their own, embedded.

// RepoParam names the repository an operation works on.
type RepoParam struct {
	Repo string `path:"repo" maxLength:"255" example:"default" doc:"the repository's name in the server's configuration (default: the repository setting)"`
}

// VerifyInput checks a repository's integrity.
type VerifyInput struct {
	RepoParam
	Body VerifyRequest
}
