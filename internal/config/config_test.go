package config

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestPrecedence(t *testing.T) {
	f, err := Parse([]byte("repository: /from/file\nlog-level: info\ns3:\n  region: eu-1\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"COFFER_REPO": "/from/env", "COFFER_LOG_LEVEL": "debug"}
	flags := map[string]string{"repo": "/from/flag"}
	r := &Resolver{File: f,
		Flag: func(n string) (string, bool) { v, ok := flags[n]; return v, ok },
		Env:  func(n string) (string, bool) { v, ok := env[n]; return v, ok }}
	for _, c := range []struct {
		key, want string
		src       Source
	}{
		{"repository", "/from/flag", FromFlag},
		{"log-level", "debug", FromEnv},
		{"s3.region", "eu-1", FromFile},
		{"log-format", "text", FromDefault},
	} {
		if v, s := r.Get(c.key); v != c.want || s != c.src {
			t.Errorf("%s = %q from %s, want %q from %s", c.key, v, s, c.want, c.src)
		}
	}
}

func TestUnknownKeysAreErrors(t *testing.T) {
	_, err := Parse([]byte("repositry: /x\n"))
	if err == nil || !strings.Contains(err.Error(), `did you mean "repository"`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := Parse([]byte("s3:\n  regoin: x\n")); err == nil {
		t.Fatal("nested typo accepted")
	}
	if _, err := Parse([]byte("repository: [a, b]\n")); err == nil {
		t.Fatal("list for a scalar accepted")
	}
	if _, err := Parse([]byte(": : :\n\t")); err == nil {
		t.Fatal("malformed YAML accepted")
	}
}

func TestSectionsDecode(t *testing.T) {
	f, err := Parse([]byte("policies:\n  - name: nightly\n    keep-last: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	var v []struct {
		Name     string `yaml:"name"`
		KeepLast int    `yaml:"keep-last"`
	}
	if err := f.Decode("policies", &v); err != nil || len(v) != 1 || v[0].KeepLast != 3 {
		t.Fatalf("decode = %+v, %v", v, err)
	}
}

func TestEveryKeyDeclaredOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Keys {
		for _, n := range []string{"key:" + k.Name, "flag:" + k.Flag, "env:" + k.Env} {
			if strings.HasSuffix(n, ":") {
				continue
			}
			if seen[n] {
				t.Errorf("%s declared twice", n)
			}
			seen[n] = true
		}
		if k.Secret && k.Flag != "" {
			t.Errorf("secret %s must not have a flag (it would show in ps)", k.Name)
		}
	}
}

func TestSectionUnknownKeys(t *testing.T) {
	type inner struct {
		KeepLast int `yaml:"keep-last"`
	}
	type pol struct {
		Name      string            `yaml:"name"`
		Retention inner             `yaml:"retention"`
		Tags      map[string]string `yaml:"tags"`
		Options   yaml.Node         `yaml:"options"`
	}
	for _, c := range []struct{ doc, want string }{
		{"policies:\n  - name: a\n    retention:\n      keep-lats: 3\n", `line 4: unknown key "keep-lats" in policies[0].retention (did you mean "keep-last"?)`},
		{"policies:\n  - name: a\n    nmae: b\n", `line 3: unknown key "nmae" in policies[0] (did you mean "name"?)`},
	} {
		f, err := Parse([]byte(c.doc))
		if err != nil {
			t.Fatal(err)
		}
		var v []pol
		if err := f.Decode("policies", &v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %s", c.doc, err, c.want)
		}
	}
	// Free-form maps and nodes accept any key.
	f, _ := Parse([]byte("policies:\n  - name: a\n    tags: {x: y}\n    options: {anything: 1}\n"))
	var v []pol
	if err := f.Decode("policies", &v); err != nil || v[0].Tags["x"] != "y" {
		t.Fatalf("decode = %+v, %v", v, err)
	}
}

// TestSectionWithoutKeys: a section whose schema has no field yet (the
// server's) refuses every key, saying so, and a top-level setting written
// inside a section is named as such instead of getting no hint.
func TestSectionWithoutKeys(t *testing.T) {
	type settings struct{}
	for _, c := range []struct{ doc, want string }{
		{"server:\n  listen: :8080\n", `line 2: unknown key "listen" in server (server takes no keys in this version)`},
		{"server:\n  log-format: json\n", `line 2: unknown key "log-format" in server (log-format is a top-level key: write it at the start of a line, outside server)`},
		{"server:\n  policies: []\n", `unknown key "policies" in server (policies is a top-level key`},
	} {
		f, err := Parse([]byte(c.doc))
		if err != nil {
			t.Fatal(err)
		}
		var v settings
		if err := f.Decode("server", &v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %s", c.doc, err, c.want)
		}
	}
	for _, doc := range []string{"", "server:\n", "server: {}\n"} {
		f, err := Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		var v settings
		if err := f.Decode("server", &v); err != nil {
			t.Errorf("%q: %v", doc, err)
		}
	}
}
