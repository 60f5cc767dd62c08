package server

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// committedOpenAPI is the API's document as committed, so that a change
// of the API shows in review.
var committedOpenAPI = filepath.Join("..", "..", "docs", "api", "openapi.json")

// TestOpenAPIIsCommitted regenerates the OpenAPI document and fails when
// it differs from the committed one. COFFER_UPDATE_OPENAPI=1 writes it.
func TestOpenAPIIsCommitted(t *testing.T) {
	got, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("COFFER_UPDATE_OPENAPI") == "1" {
		if err := os.WriteFile(committedOpenAPI, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(committedOpenAPI)
	if err != nil {
		t.Fatalf("%v (COFFER_UPDATE_OPENAPI=1 go test ./internal/server -run TestOpenAPIIsCommitted writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the API changed: %s is not what the server serves; review the change and regenerate it with "+
			"COFFER_UPDATE_OPENAPI=1 go test ./internal/server -run TestOpenAPIIsCommitted", committedOpenAPI)
	}
}
