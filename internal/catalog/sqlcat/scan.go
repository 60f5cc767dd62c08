package sqlcat

import (
	"encoding/json"
	"fmt"
	"time"
)

// normTime is the form every timestamp is stored and returned in: UTC,
// microseconds (PostgreSQL's precision), zero kept zero.
func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

// timeArg binds a timestamp; the zero time is stored as NULL.
func (c *Catalog) timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return c.d.BindTime(normTime(t))
}

// jsonArg binds a slice or map as JSON text; empty ones are stored as NULL
// so that nil and empty read back the same on every database.
func jsonArg[T any](v T, n int) (any, error) {
	if n == 0 {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// idArg binds a reference that may be absent (0) as NULL.
func idArg(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// timeDest scans a timestamp stored either as microseconds since the epoch
// (SQLite) or as a native timestamp (PostgreSQL); NULL is the zero time.
type timeDest struct{ p *time.Time }

func (s timeDest) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*s.p = time.Time{}
	case int64:
		*s.p = time.UnixMicro(x).UTC()
	case time.Time:
		*s.p = normTime(x)
	default:
		return fmt.Errorf("catalog: cannot scan %T as a time", v)
	}
	return nil
}

// jsonDest decodes a JSON column into p; NULL leaves p untouched (nil).
type jsonDest struct{ p any }

func (s jsonDest) Scan(v any) error {
	var b []byte
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		b = []byte(x)
	case []byte:
		b = x
	default:
		return fmt.Errorf("catalog: cannot scan %T as JSON", v)
	}
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	return json.Unmarshal(b, s.p)
}

// idDest scans a nullable reference; NULL is 0.
type idDest struct{ p *int64 }

func (s idDest) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*s.p = 0
	case int64:
		*s.p = x
	case int32:
		*s.p = int64(x)
	default:
		return fmt.Errorf("catalog: cannot scan %T as an ID", v)
	}
	return nil
}
