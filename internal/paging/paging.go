// Package paging holds the paging rules of every list route (design:
// Paging): the Page body, the opaque cursor, and the filling of a page
// from a list read in chunks, bounded by an item count and by MaxBytes of
// JSON. It does no I/O of its own: a page is read through the fetch
// function its caller passes.
package paging

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"

	"github.com/rollcall/rollcall/internal/domain"
)

// MaxBytes bounds the JSON of the items of one page (design: Paging): a
// page ends before the item that would cross it (a page always holds at
// least one item). With 64 KiB payloads that is about 60 todos, whatever
// the limit.
const MaxBytes = 4 << 20

// chunk is how many rows one fetch of a page reads at most, so a request
// holds at most a chunk of rows besides the page itself.
const chunk = 64

// Page is one page of a list: the items and, when more follow, the opaque
// cursor of the next page (the `cursor` query parameter).
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Encode returns the cursor naming key in the list kind: base64url of
// "<kind>:<key>", opaque to clients, and refused by another list.
func Encode(kind, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + key))
}

// Decode returns the key a cursor of the list kind names ("" for no
// cursor). Errors: invalid_argument with pointer /cursor for a cursor that
// is not one of this list.
func Decode(kind, c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	key, ok := strings.CutPrefix(string(b), kind+":")
	if err != nil || !ok || key == "" || len(c) > 200 {
		return "", domain.Errorf(domain.CodeInvalidArgument, "cursor %q is not a cursor of this list; pass the next_cursor of the previous page", TrimForError(c)).At("/cursor")
	}
	return key, nil
}

// TrimForError cuts s to 40 bytes (and "…") for an error detail.
func TrimForError(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Limit resolves a requested page size: 0 = def; errors: invalid_argument
// with pointer /limit outside 1..max.
func Limit(limit, def, max int) (int, error) {
	if limit < 0 || limit > max {
		return 0, domain.Errorf(domain.CodeInvalidArgument, "limit must be between 1 and %d", max).At("/limit")
	}
	if limit == 0 {
		return def, nil
	}
	return limit, nil
}

// Fill reads up to limit items in chunks through fetch(after, n) (the n
// items after the key after, in list order), stopping before MaxBytes; key
// names an item for the cursor. Errors: fetch's.
func Fill[T any](kind string, limit int, after string, key func(T) string, fetch func(after string, n int) ([]T, error)) (Page[T], error) {
	p := Page[T]{Items: []T{}}
	size := 0
	for {
		n := min(limit-len(p.Items), chunk)
		rows, err := fetch(after, n+1)
		if err != nil {
			return Page[T]{}, err
		}
		for i, it := range rows {
			if i == n {
				if len(p.Items) == limit {
					p.NextCursor = Encode(kind, after)
					return p, nil
				}
				break // more to read for this page: next chunk
			}
			b, err := json.Marshal(it)
			if err != nil {
				return Page[T]{}, err
			}
			if len(p.Items) > 0 && size+len(b)+1 > MaxBytes {
				p.NextCursor = Encode(kind, after)
				return p, nil
			}
			size += len(b) + 1
			p.Items = append(p.Items, it)
			after = key(it)
		}
		if len(rows) <= n {
			return p, nil // the list ends here
		}
	}
}

// Of pages a short list held in memory (persons, tokens, hooks, an
// owner's agents) the way the store-backed lists are paged: ordered by key,
// at most limit items (0 = 100, at most domain.MaxListLimit) and at most
// MaxBytes of JSON, after the key the cursor names. Errors:
// invalid_argument with pointer /limit or /cursor.
func Of[T any](kind string, all []T, key func(T) string, limit int, cursor string) (Page[T], error) {
	limit, err := Limit(limit, 100, domain.MaxListLimit)
	if err != nil {
		return Page[T]{}, err
	}
	after, err := Decode(kind, cursor)
	if err != nil {
		return Page[T]{}, err
	}
	sorted := slices.SortedFunc(slices.Values(all), func(a, b T) int { return strings.Compare(key(a), key(b)) })
	return Fill(kind, limit, after, key, func(after string, n int) ([]T, error) {
		i, _ := slices.BinarySearchFunc(sorted, after, func(t T, k string) int { return strings.Compare(key(t), k) })
		for i < len(sorted) && key(sorted[i]) <= after {
			i++
		}
		return sorted[i:min(i+n, len(sorted))], nil
	})
}
