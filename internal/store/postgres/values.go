package postgres

import (
	"encoding/json"
	"time"

	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
)

// Shared helpers of the adapter. Every time sent is
// first truncated to the microsecond (PostgreSQL would round), and every
// time read is returned in UTC.

var micro = storeutil.Micro

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// limitArg maps Limit <= 0 to NULL, which LIMIT reads as "no limit".
func limitArg(n int) *int64 {
	if n <= 0 {
		return nil
	}
	v := int64(n)
	return &v
}

func nullJSON(b json.RawMessage) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// deref reads a nullable text column whose NULL means "".
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// rawBytes reads a nullable text column kept byte for byte; NULL → nil.
func rawBytes(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}

func rawJSON(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}
