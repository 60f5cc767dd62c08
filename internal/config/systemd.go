package config

import (
	"os"
	"path/filepath"
	"strings"
)

// Under systemd (the packages' coffer.service and coffer-worker.service),
// the unit's StateDirectory=, CacheDirectory= and LoadCredential= give
// coffer its directories and secrets through the environment: they are
// the defaults of these keys there, so the units name no path twice and a
// credential never needs a flag. A flag, a COFFER_* variable or the
// configuration file still decide first.
var systemdDefaults = map[string]func(env func(string) (string, bool)) string{
	"state-dir":     func(env func(string) (string, bool)) string { return firstDir(env, "STATE_DIRECTORY") },
	"cache-dir":     func(env func(string) (string, bool)) string { return firstDir(env, "CACHE_DIRECTORY") },
	"password-file": func(env func(string) (string, bool)) string { return Credential(env, RepositoryPasswordCredential) },
}

// RepositoryPasswordCredential is the name of the credential
// (LoadCredential=repository-password:FILE) whose file becomes the default
// password-file.
const RepositoryPasswordCredential = "repository-password"

func fromSystemd(name string, env func(string) (string, bool)) string {
	if f, ok := systemdDefaults[name]; ok {
		return f(env)
	}
	return ""
}

// firstDir is the first of the directories systemd lists in variable (a
// unit may list several, separated by colons).
func firstDir(env func(string) (string, bool), variable string) string {
	v, _ := env(variable)
	dir, _, _ := strings.Cut(v, ":")
	return dir
}

// Credential is the path of the credential systemd loaded for the unit
// under name ($CREDENTIALS_DIRECTORY/name), "" when there is none.
// env is os.LookupEnv unless a test says otherwise.
func Credential(env func(string) (string, bool), name string) string {
	if env == nil {
		env = os.LookupEnv
	}
	dir, ok := env("CREDENTIALS_DIRECTORY")
	if !ok || dir == "" {
		return ""
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}
