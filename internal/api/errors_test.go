package api

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestErrorsKeepTheirCauseAndClass(t *testing.T) {
	base := errors.New("disk gone")
	err := Errorf(SourceChanged, "backup of %s: %w", "web", base)
	if !errors.Is(err, base) || err.Error() != "backup of web: disk gone" {
		t.Fatalf("Errorf lost its cause or message: %v", err)
	}
	if c, ok := ClassOf(fmt.Errorf("outer: %w", err)); !ok || c != SourceChanged {
		t.Fatalf("class through wrapping = %q, %v", c, ok)
	}
	// The outermost class wins: a face classifies what the caller decided.
	if c, _ := ClassOf(WithClass(Partial, err)); c != Partial {
		t.Fatalf("outer class = %q, want partial", c)
	}
	two := Errorf(Cancelled, "%w: %w", context.Canceled, base)
	if !errors.Is(two, context.Canceled) || !errors.Is(two, base) {
		t.Fatalf("multiple %%w lost a cause: %v", two)
	}
	if _, ok := ClassOf(base); ok {
		t.Fatal("an error without a class reports one")
	}
	if WithClass(Internal, nil) != nil {
		t.Fatal("WithClass(nil) is not nil")
	}
}
