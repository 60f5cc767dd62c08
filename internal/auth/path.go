package auth

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
)

// ACL paths name objects in a tree:
//
//	/
//	/system
//	/access
//	/repositories[/{repo}]
//	/connections[/{conn}[/vm/{vm}]]
//	/policies[/{policy}]
//	/media[/{library}]
//
// Object names are path-escaped (url.PathEscape): a name holding "/" or
// "%" is written with %2F or %25. The builders below escape; ParsePath
// returns the one canonical spelling of a path a person typed.

// Fixed paths.
const (
	RootPath         = "/"
	SystemPath       = "/system"
	AccessPath       = "/access"
	RepositoriesPath = "/repositories"
	ConnectionsPath  = "/connections"
	PoliciesPath     = "/policies"
	// MediaPath holds the media libraries (tape) and their volumes.
	MediaPath = "/media"
)

// RepositoryPath is the ACL path of a repository.
func RepositoryPath(repo string) string { return RepositoriesPath + "/" + url.PathEscape(repo) }

// ConnectionPath is the ACL path of a hypervisor connection.
func ConnectionPath(conn string) string { return ConnectionsPath + "/" + url.PathEscape(conn) }

// VMPath is the ACL path of a VM of a connection.
func VMPath(conn, vm string) string { return ConnectionPath(conn) + "/vm/" + url.PathEscape(vm) }

// PolicyPath is the ACL path of a policy.
func PolicyPath(policy string) string { return PoliciesPath + "/" + url.PathEscape(policy) }

// MediaLibraryPath is the ACL path of a media library of the
// configuration (its drives, slots and volumes).
func MediaLibraryPath(library string) string { return MediaPath + "/" + url.PathEscape(library) }

// PointPaths are the paths that grant rights on a backup point: its
// repository, and its VM (so that a tenant with rights on its VMs reaches
// their points in a shared repository, and no other VM's).
func PointPaths(repo, conn, vm string) []string {
	return []string{RepositoryPath(repo), VMPath(conn, vm)}
}

// maxPathLen bounds a path (and so the work of checking it).
const maxPathLen = 1024

// splitPath splits a canonical path into its components; "/" has none. It
// accepts any syntactically valid path, also ones no ACL entry can be on
// (an operation may check "/system/tasks").
func splitPath(p string) ([]string, error) {
	if len(p) > maxPathLen {
		return nil, fmt.Errorf("%w: ACL path longer than %d bytes", ErrInvalid, maxPathLen)
	}
	if p == RootPath {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return nil, fmt.Errorf("%w: ACL path %q must start with / and not end with one", ErrInvalid, p)
	}
	comps := strings.Split(p[1:], "/")
	for _, c := range comps {
		if err := checkComponent(c); err != nil {
			return nil, fmt.Errorf("%w: ACL path %q: %v", ErrInvalid, p, err)
		}
	}
	return comps, nil
}

func checkComponent(c string) error {
	switch c {
	case "":
		return fmt.Errorf("empty name (two slashes in a row?)")
	case ".", "..":
		return fmt.Errorf("%q is not a name", c)
	}
	for _, r := range c {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return fmt.Errorf("control character or invalid UTF-8 in %q", c)
		}
	}
	return nil
}

// ParsePath checks a path for an ACL entry and returns its canonical
// spelling: names are unescaped where they hold valid escapes and escaped
// again, a trailing slash is dropped. Only the paths of the tree above
// take entries.
func ParsePath(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%w: no ACL path given; paths are /, /system, /access, /repositories/NAME, "+
			"/connections/NAME, /connections/NAME/vm/VM, /policies/NAME, /media/LIBRARY", ErrInvalid)
	}
	if p != RootPath && strings.HasSuffix(p, "/") {
		p = p[:len(p)-1]
		if strings.HasSuffix(p, "/") {
			return "", fmt.Errorf("%w: ACL path %q ends with two slashes", ErrInvalid, p+"/")
		}
	}
	comps, err := splitPath(p)
	if err != nil {
		return "", err
	}
	names := make([]string, len(comps))
	for i, c := range comps {
		if u, err := url.PathUnescape(c); err == nil {
			c = u
		}
		if err := checkComponent(c); err != nil {
			return "", fmt.Errorf("%w: ACL path %q: %v", ErrInvalid, p, err)
		}
		names[i] = c
	}
	canon := "/" + escapeJoin(names)
	if !entryShape(names) {
		return "", fmt.Errorf("%w: %q is not a path ACL entries can be on; they are /, /system, /access, "+
			"/repositories[/NAME], /connections[/NAME[/vm/VM]], /policies[/NAME], /media[/LIBRARY]", ErrInvalid, canon)
	}
	return canon, nil
}

func escapeJoin(names []string) string {
	esc := make([]string, len(names))
	for i, n := range names {
		esc[i] = url.PathEscape(n)
	}
	return strings.Join(esc, "/")
}

// entryShape reports whether (unescaped) components name a node of the
// ACL tree.
func entryShape(c []string) bool {
	switch len(c) {
	case 0:
		return true
	case 1:
		switch c[0] {
		case "system", "access", "repositories", "connections", "policies", "media":
			return true
		}
	case 2:
		switch c[0] {
		case "repositories", "connections", "policies", "media":
			return true
		}
	case 4:
		return c[0] == "connections" && c[2] == "vm"
	}
	return false
}
