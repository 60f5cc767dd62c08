package api

import (
	"encoding"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// An operation's input is one struct, the same whichever face calls the
// operation: its path, query and header parameters are fields tagged as
// huma reads them (path:"repo", query:"vm", query:"path,explode",
// header:"If-Match"), embedded parameter structs included, and its JSON
// body is the field named Body. The server decodes a request into it; the
// command line fills it in and calls the operation by its ID, in this
// process or through a server (EncodeInput makes the request of it).
//
// Written here rather than borrowed from huma because it is the inverse of
// huma's decoding for coffer's own input types only: a client of the API
// must not import the server's framework.

// Encoded is an operation input as an HTTP request carries it.
type Encoded struct {
	Path   map[string]string
	Query  url.Values
	Header http.Header
	// Body is the input's Body field (nil: none).
	Body any
}

// EncodeInput turns an operation's input (a pointer to its struct, or
// nil) into the parameters and body of its request. Zero-valued query and
// header parameters are left out, as a client that does not set them
// would, so that the server applies its defaults (ApplyDefaults does the
// same for a call in this process).
func EncodeInput(in any) (Encoded, error) {
	e := Encoded{Path: map[string]string{}, Query: url.Values{}, Header: http.Header{}}
	if in == nil {
		return e, nil
	}
	v := reflect.ValueOf(in)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return e, fmt.Errorf("an operation's input is a struct, not %T", in)
	}
	return e, encodeFields(v, &e)
}

func encodeFields(v reflect.Value, e *Encoded) error {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		switch {
		case f.Anonymous && f.Type.Kind() == reflect.Struct:
			if err := encodeFields(fv, e); err != nil {
				return err
			}
		case f.Name == "Body":
			if !(fv.Kind() == reflect.Pointer || fv.Kind() == reflect.Map || fv.Kind() == reflect.Slice) || !fv.IsNil() {
				e.Body = fv.Interface()
			}
		case f.Tag.Get("path") != "":
			s, err := formatParam(fv)
			if err != nil {
				return fmt.Errorf("path parameter %s: %w", f.Tag.Get("path"), err)
			}
			e.Path[f.Tag.Get("path")] = s
		case f.Tag.Get("query") != "":
			if err := encodeQuery(f, fv, e.Query); err != nil {
				return err
			}
		case f.Tag.Get("header") != "" && !fv.IsZero():
			s, err := formatParam(fv)
			if err != nil {
				return fmt.Errorf("header %s: %w", f.Tag.Get("header"), err)
			}
			e.Header.Set(f.Tag.Get("header"), s)
		}
	}
	return nil
}

func encodeQuery(f reflect.StructField, fv reflect.Value, q url.Values) error {
	name, _, _ := strings.Cut(f.Tag.Get("query"), ",")
	if fv.IsZero() {
		return nil
	}
	if fv.Kind() == reflect.Slice {
		for j := range fv.Len() {
			s, err := formatParam(fv.Index(j))
			if err != nil {
				return fmt.Errorf("query parameter %s: %w", name, err)
			}
			q.Add(name, s)
		}
		return nil
	}
	s, err := formatParam(fv)
	if err != nil {
		return fmt.Errorf("query parameter %s: %w", name, err)
	}
	q.Set(name, s)
	return nil
}

var textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()

// formatParam writes a parameter's value as huma parses it back.
func formatParam(v reflect.Value) (string, error) {
	switch x := v.Interface().(type) {
	case time.Time:
		return x.Format(time.RFC3339Nano), nil
	case time.Duration:
		return x.String(), nil
	}
	if v.Type().Implements(textMarshaler) {
		b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		return string(b), err
	}
	switch v.Kind() {
	case reflect.String:
		return v.String(), nil
	case reflect.Bool:
		return strconv.FormatBool(v.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10), nil
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64), nil
	}
	return "", fmt.Errorf("cannot write a %s as a parameter", v.Type())
}

// ApplyDefaults sets the zero-valued query parameters of an input that
// declare a default (default:"5") to it, as the server does for a
// parameter a request leaves out: an operation called in this process
// sees what it would see through a server.
func ApplyDefaults(in any) error {
	v := reflect.ValueOf(in)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("an operation's input is a pointer to a struct, not %T", in)
	}
	return applyDefaults(v.Elem())
}

func applyDefaults(v reflect.Value) error {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			if err := applyDefaults(fv); err != nil {
				return err
			}
			continue
		}
		def, ok := f.Tag.Lookup("default")
		if !ok || f.Tag.Get("query") == "" || !fv.IsZero() {
			continue
		}
		if err := parseParam(fv, def); err != nil {
			return fmt.Errorf("default of %s: %w", f.Name, err)
		}
	}
	return nil
}

// parseParam sets v from a default's text: the kinds defaults are
// declared for.
func parseParam(v reflect.Value, s string) error {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("no default for a %s", v.Type())
	}
	return nil
}
