package catalogexport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// The lines of a part: a header object starts a table, an array is a row.
// Rows are encoded by hand rather than by encoding/json's reflection: an
// export of a large catalog is millions of them.

type header struct {
	Table   string   `json:"table"`
	Columns []string `json:"columns"`
}

func appendHeader(b []byte, table string, columns []string) []byte {
	h, _ := json.Marshal(header{Table: table, Columns: columns}) // strings only: cannot fail
	b = append(b, h...)
	return append(b, '\n')
}

// appendRow appends values (the portable forms of catalog.Dumper) as one
// JSON array and a newline.
func appendRow(b []byte, values []any) ([]byte, error) {
	b = append(b, '[')
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		switch x := v.(type) {
		case nil:
			b = append(b, "null"...)
		case int64:
			b = strconv.AppendInt(b, x, 10)
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("value %d: %v has no JSON form", i, x)
			}
			b = strconv.AppendFloat(b, x, 'g', -1, 64)
		case string:
			b = appendString(b, x)
		default:
			return nil, fmt.Errorf("value %d: a %T, which a dump does not carry", i, v)
		}
	}
	return append(b, ']', '\n'), nil
}

// appendString appends s as a JSON string: as it is when it needs no
// escape (most of a catalog's text), else through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			q, _ := json.Marshal(s) // a string: cannot fail
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// parseLine reads one line: a header, or a row's values (numbers as
// json.Number).
func parseLine(line []byte) (*header, []any, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if len(line) > 0 && line[0] == '{' {
		var h header
		if err := dec.Decode(&h); err != nil {
			return nil, nil, err
		}
		if h.Table == "" {
			return nil, nil, fmt.Errorf("a header without a table")
		}
		return &h, nil, nil
	}
	var row []any
	if err := dec.Decode(&row); err != nil {
		return nil, nil, err
	}
	if row == nil {
		return nil, nil, fmt.Errorf("a line that is neither a header nor a row")
	}
	return nil, row, nil
}
