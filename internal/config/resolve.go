package config

import (
	"fmt"
	"os"
	"strconv"
)

// Source says where a resolved value came from.
type Source string

const (
	FromFlag Source = "flag"
	FromEnv  Source = "environment"
	FromFile Source = "file"
	// FromSystemd is a directory systemd gave the unit coffer runs in
	// (systemd.go): after the file, before the default.
	FromSystemd Source = "systemd"
	FromDefault Source = "default"
)

// Resolver applies the precedence flag > environment > file > default.
type Resolver struct {
	File *File
	// Flag returns a flag's value if the user set it.
	Flag func(flag string) (string, bool)
	// Env defaults to os.LookupEnv.
	Env func(string) (string, bool)
}

// Get resolves a declared key; undeclared names panic (a programming error).
func (r *Resolver) Get(name string) (string, Source) {
	k, ok := Lookup(name)
	if !ok {
		panic("config: undeclared key " + name)
	}
	if k.Flag != "" && r.Flag != nil {
		if v, ok := r.Flag(k.Flag); ok {
			return v, FromFlag
		}
	}
	env := r.Env
	if env == nil {
		env = os.LookupEnv
	}
	if k.Env != "" {
		if v, ok := env(k.Env); ok && v != "" {
			return v, FromEnv
		}
	}
	if r.File != nil {
		if v, ok := r.File.Value(name); ok {
			return v, FromFile
		}
	}
	if v := fromSystemd(name, env); v != "" {
		return v, FromSystemd
	}
	return k.Default, FromDefault
}

// String resolves a key.
func (r *Resolver) String(name string) string {
	v, _ := r.Get(name)
	return v
}

// Path resolves a key and expands ~.
func (r *Resolver) Path(name string) string { return ExpandHome(r.String(name)) }

// Bool resolves a boolean key.
func (r *Resolver) Bool(name string) (bool, error) {
	v, src := r.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s (from %s): %q is not true or false", name, src, v)
	}
	return b, nil
}

// Int resolves an integer key.
func (r *Resolver) Int(name string) (int, error) {
	v, src := r.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s (from %s): %q is not a number", name, src, v)
	}
	return n, nil
}
