package s3_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestReadAfterWriteRetained: objects written with a retention are visible
// at once (a regression test for immutable backups, whose pack retention is
// checked right after the packs are committed).
func TestReadAfterWriteRetained(t *testing.T) {
	srv := testutil.StartS3(t)
	s := open(t, srv, true, "repo")
	ctx := context.Background()
	until := time.Now().Add(time.Hour)
	data := make([]byte, 1<<20)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("data/%04d", i)
			if _, err := store.Put(ctx, s, name, data, store.PutOptions{RetainUntil: until}); err != nil {
				t.Error(err)
				return
			}
			if _, err := s.Stat(ctx, name); err != nil {
				t.Errorf("stat right after put: %v", err)
			}
		}()
	}
	wg.Wait()
}
