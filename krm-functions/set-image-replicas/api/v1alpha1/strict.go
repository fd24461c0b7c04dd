package v1alpha1

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/distribution/reference"
)

// anchoredTag is the tag grammar of github.com/distribution/reference.
var anchoredTag = regexp.MustCompile(`^` + reference.TagRegexp.String() + `$`)

// unknownFields walks decoded JSON alongside the Go type it is meant for and
// reports every key the type has no field for, with its path and the keys
// that are allowed, and every value of the wrong type. encoding/json's own
// errors name the key or the Go field but not where it is in the document,
// which is useless in a list of twenty rules.
func unknownFields(v any, target any, path string) []error {
	return walkUnknown(v, reflect.TypeOf(target), path)
}

func walkUnknown(v any, t reflect.Type, path string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch val := v.(type) {
	case map[string]any:
		if t.Kind() == reflect.Map {
			var errs []error
			for k, item := range val {
				errs = append(errs, walkUnknown(item, t.Elem(), join(path, k))...)
			}
			return errs
		}
		if t.Kind() != reflect.Struct {
			return []error{fmt.Errorf("%s: want %s, got a mapping", path, describe(t))}
		}
		fields := jsonFields(t)
		var errs []error
		keys := make([]string, 0, len(val))
		for k := range val {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: unknown field; %s allows %s", join(path, k), where(path), allowed(fields)))
				continue
			}
			errs = append(errs, walkUnknown(val[k], ft, join(path, k))...)
		}
		return errs
	case []any:
		if t.Kind() != reflect.Slice {
			return []error{fmt.Errorf("%s: want %s, got a list", path, describe(t))}
		}
		var errs []error
		for i, item := range val {
			errs = append(errs, walkUnknown(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return errs
	case string:
		if t.Kind() != reflect.String {
			return []error{fmt.Errorf("%s: want %s, got the string %q", path, describe(t), val)}
		}
	case float64:
		switch {
		case isInt(t) && val != float64(int64(val)):
			return []error{fmt.Errorf("%s: want an integer, got %v", path, val)}
		case !isInt(t):
			return []error{fmt.Errorf("%s: want %s, got the number %v", path, describe(t), val)}
		}
	case bool:
		if t.Kind() != reflect.Bool {
			return []error{fmt.Errorf("%s: want %s, got %v", path, describe(t), val)}
		}
	}
	return nil
}

func isInt(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func describe(t reflect.Type) string {
	switch {
	case isInt(t):
		return "an integer"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Slice:
		return "a list"
	default:
		return "a mapping"
	}
}

func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		out[name] = f.Type
	}
	return out
}

func allowed(fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func where(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}
