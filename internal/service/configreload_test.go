package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/configobj"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

// TestReloadFileReachesTheWatchers: the server's SIGHUP reads its file
// again (ReloadFile); its watchers get the new file's sections merged with
// the catalog's objects at once, with no object changed; a file that
// would make the configuration invalid is refused and the one in effect
// stays.
func TestReloadFileReachesTheWatchers(t *testing.T) {
	e := newConfEnv(t, "connections: [{name: lab, kind: fake}]\n")
	s := e.service()
	if _, err := servicetest.CreateObject(e.ctx, s, "policy", spec(t, `{name: api, connection: lab}`)); err != nil {
		t.Fatal(err)
	}
	// A long poll: only the reload itself may wake the watcher.
	s.Config.ConfigPoll = time.Hour
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	watch, err := s.WatchConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := next(t, watch); len(st.Engine.Policies) != 1 {
		t.Fatalf("first state: %+v", st.Engine.Policies)
	}
	read := func(doc string) configobj.File {
		f, err := config.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		eng, err := policy.Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		nc, err := notify.Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		return configobj.File{Path: confFile, Engine: eng, Notify: nc}
	}
	if err := s.ReloadFile(e.ctx, read("connections: [{name: lab, kind: fake}]\npolicies: [{name: file, connection: lab}]\n")); err != nil {
		t.Fatal(err)
	}
	st := next(t, watch)
	if len(st.Engine.Policies) != 2 {
		t.Fatalf("after the reload the policies are %+v, want the file's and the API's", st.Engine.Policies)
	}
	// The API's policy uses the connection lab: a file without it is
	// refused, and what is in effect stays.
	if err := s.ReloadFile(e.ctx, read("connections: [{name: other, kind: fake}]\n")); err == nil {
		t.Fatal("a file that leaves a policy without its connection was accepted")
	} else {
		t.Logf("refused as it should be: %v", err)
	}
	now, err := s.ReadConfig(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(now.Engine.Policies) != 2 || now.Engine.Connections[0].Name != "lab" {
		t.Fatalf("after a refused reload the configuration in effect is %+v", now.Engine)
	}
	select {
	case st := <-watch:
		t.Fatalf("a refused reload reached the watcher: %+v", st.Engine)
	default:
	}
}
