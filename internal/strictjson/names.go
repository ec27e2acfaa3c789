package strictjson

import (
	"bytes"
	"reflect"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Escape escapes one RFC 6901 reference token: "~" becomes "~0" and "/"
// becomes "~1". It is the only escaping of pointer tokens in Rollcall.
func Escape(token string) string {
	if !strings.ContainsAny(token, "~/") {
		return token
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(token)
}

// Member returns the pointer of the member name inside the value at base.
func Member(base, name string) string { return base + "/" + Escape(name) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// topKind returns the kind of the first JSON value in body (0 if none).
func topKind(body []byte) jsontext.Kind {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return jsontext.Value(b[:1]).Kind()
}

// KindName names the JSON kind of a value by its first byte, as the details
// of every contract do: "a string", "an object", "an array", "a boolean",
// "null", and "a number" for anything else.
func KindName(k byte) string {
	switch k {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// memberNames lists the JSON member names of struct t as the library
// matches them: the json tag's name or the field's, "-" left out, embedded
// structs without a name inlined.
func memberNames(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if et := f.Type; et.Kind() == reflect.Struct || et.Kind() == reflect.Pointer && et.Elem().Kind() == reflect.Struct {
				names = append(names, memberNames(et)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}
