package api

import (
	"net/url"
	"reflect"
	"testing"
	"time"
)

type pageParam struct {
	Limit int    `query:"limit"`
	After string `query:"after"`
}

type sampleInput struct {
	RepoParam
	pageParam
	Point   string    `path:"point"`
	Since   time.Time `query:"since"`
	Conns   []string  `query:"connection,explode"`
	Runs    int       `query:"runs" default:"5"`
	Wait    bool      `query:"wait"`
	IfMatch string    `header:"If-Match"`
	Body    *VerifyRequest
}

func TestEncodeInput(t *testing.T) {
	since := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)
	in := &sampleInput{RepoParam: RepoParam{Repo: "offsite"}, pageParam: pageParam{Limit: 20}, Point: "latest",
		Since: since, Conns: []string{"kvm1", "vc1"}, IfMatch: `"12"`, Body: &VerifyRequest{ReadData: true}}
	e, err := EncodeInput(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"repo": "offsite", "point": "latest"}; !reflect.DeepEqual(e.Path, want) {
		t.Errorf("path %v, want %v", e.Path, want)
	}
	// Zero values (after, runs, wait) are left out: the server applies its
	// defaults to them.
	want := url.Values{"limit": {"20"}, "since": {"2026-03-29T01:30:00Z"}, "connection": {"kvm1", "vc1"}}
	if !reflect.DeepEqual(e.Query, want) {
		t.Errorf("query %v, want %v", e.Query, want)
	}
	if got := e.Header.Get("If-Match"); got != `"12"` {
		t.Errorf("If-Match %q", got)
	}
	if b, ok := e.Body.(*VerifyRequest); !ok || !b.ReadData {
		t.Errorf("body %#v", e.Body)
	}
	if e, _ := EncodeInput(&sampleInput{}); e.Body != nil {
		t.Errorf("a nil body encoded as %#v", e.Body)
	}
}

func TestApplyDefaults(t *testing.T) {
	in := &sampleInput{}
	if err := ApplyDefaults(in); err != nil {
		t.Fatal(err)
	}
	if in.Runs != 5 || in.Limit != 0 {
		t.Errorf("runs %d limit %d, want 5 and 0", in.Runs, in.Limit)
	}
	in = &sampleInput{Runs: 2}
	if err := ApplyDefaults(in); err != nil || in.Runs != 2 {
		t.Errorf("a set value was replaced: %d %v", in.Runs, err)
	}
	if err := ApplyDefaults(sampleInput{}); err == nil {
		t.Error("a struct value (not a pointer) was accepted")
	}
}
