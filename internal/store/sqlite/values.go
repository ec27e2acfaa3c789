package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
)

// Column encodings (see the package doc): times as INTEGER unix microseconds
// (UTC), lists as JSON arrays, booleans as 0/1, JSON documents as TEXT kept
// byte for byte, optional values as NULL.

func micros(t time.Time) int64 { return t.UnixMicro() }

func microsPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func nullMicros(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: true}
}

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func fromNullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

type scanner = storeutil.Scanner

func nullStr(v sql.NullString) *string {
	if !v.Valid {
		return nil
	}
	return &v.String
}

func nullBytes(v sql.NullString) []byte {
	if !v.Valid {
		return nil
	}
	return []byte(v.String)
}

func toNullStr(v *string) sql.NullString {
	if v == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *v, Valid: true}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func encodeList(l []string) string {
	b, _ := json.Marshal(storeutil.Strings(l)) // []string always marshals
	return string(b)
}

func decodeList(s string) ([]string, error) {
	var l []string
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return nil, fmt.Errorf("sqlite store: corrupt list %q: %w", s, err)
	}
	return storeutil.Strings(l), nil
}

func rawJSON(v sql.NullString) json.RawMessage {
	if !v.Valid {
		return nil
	}
	return json.RawMessage(v.String)
}

// nullJSON binds a JSON document kept byte for byte; nil → NULL.
func nullJSON(b json.RawMessage) sql.NullString {
	if b == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: string(b), Valid: true}
}

// limit maps Limit <= 0 to -1, which LIMIT reads as "no limit".
func limit(n int) int64 {
	if n <= 0 {
		return -1
	}
	return int64(n)
}
