package storeutil

import (
	"fmt"
	"reflect"
	"strings"
	"unicode"
)

// The generated reads return rows of the dialect's dbsqlc types; each adapter
// has one mapping function per table (agentFrom, todoFrom, …) and these
// helpers apply it to what a read returned, so every read method is its query
// and its mapping.

// One maps the row r a read returned with err: from(r), or T's zero value
// and err when err is not nil.
func One[R, T any](r R, err error, from func(R) T) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return from(r), nil
}

// OneErr is One for a mapping that can fail (a corrupt stored list).
func OneErr[R, T any](r R, err error, from func(R) (T, error)) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return from(r)
}

// All maps the rows a read returned with err, in order: a non-nil slice
// (empty for no rows), or nil and err when err is not nil.
func All[R, T any](rows []R, err error, from func(R) T) ([]T, error) {
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(rows))
	for _, r := range rows {
		out = append(out, from(r))
	}
	return out, nil
}

// AllErr is All for a mapping that can fail: nil and the first failure.
func AllErr[R, T any](rows []R, err error, from func(R) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(rows))
	for _, r := range rows {
		t, err := from(r)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Scanner is one row of a result set, as database/sql and pgx both give it.
type Scanner interface{ Scan(dest ...any) error }

// Rows is a result set of either driver; the caller closes it.
type Rows interface {
	Scanner
	Next() bool
	Err() error
}

// Each calls add with every row of rows, read by scan, in order, holding
// none of them; it stops at the first error (of scan or of rows).
func Each[T any](rows Rows, scan func(Scanner) (T, error), add func(T)) error {
	for rows.Next() {
		t, err := scan(rows)
		if err != nil {
			return err
		}
		add(t)
	}
	return rows.Err()
}

// Collect is Each into a slice: every row in order (non-nil, empty for
// none), or nil and the first error.
func Collect[T any](rows Rows, scan func(Scanner) (T, error)) ([]T, error) {
	out := []T{}
	if err := Each(rows, scan, func(t T) { out = append(out, t) }); err != nil {
		return nil, err
	}
	return out, nil
}

// ScanString reads a row of one text column (an id).
func ScanString(sc Scanner) (string, error) {
	var s string
	err := sc.Scan(&s)
	return s, err
}

// ScanRow returns the scan of a row of the columns cols (a comma-separated
// list such as AgentCols or TodoCols) into a generated row type R, mapped
// with from. cols must name R's fields in declaration order, each field's
// name in snake case (sqlc generates R from the table in column order:
// AgentID is agent_id); ScanRow panics when they do not, so a schema or
// model that drifts from the list fails at package initialisation.
func ScanRow[R, T any](cols string, from func(R) T) func(Scanner) (T, error) {
	return ScanRowErr(cols, func(r R) (T, error) { return from(r), nil })
}

// ScanRowErr is ScanRow for a mapping that can fail (a corrupt stored list).
func ScanRowErr[R, T any](cols string, from func(R) (T, error)) func(Scanner) (T, error) {
	n := checkFields[R](cols)
	return func(sc Scanner) (T, error) {
		var r R
		v := reflect.ValueOf(&r).Elem()
		dest := make([]any, n)
		for i := range dest {
			dest[i] = v.Field(i).Addr().Interface()
		}
		if err := sc.Scan(dest...); err != nil {
			var zero T
			return zero, err
		}
		return from(r)
	}
}

// checkFields returns the number of fields of the struct R after checking
// that cols names them in order; it panics otherwise.
func checkFields[R any](cols string) int {
	t := reflect.TypeFor[R]()
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("storeutil.ScanRow: %v is not a struct", t))
	}
	names := strings.Split(cols, ",")
	if len(names) != t.NumField() {
		panic(fmt.Sprintf("storeutil.ScanRow: %v has %d fields, the columns are %d", t, t.NumField(), len(names)))
	}
	for i, c := range names {
		if c, f := strings.TrimSpace(c), snakeCase(t.Field(i).Name); c != f {
			panic(fmt.Sprintf("storeutil.ScanRow: %v field %d is %s, column %q", t, i, f, c))
		}
	}
	return len(names)
}

// snakeCase spells a Go field name as its column: AgentID is agent_id,
// ID is id.
func snakeCase(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) && i > 0 && !unicode.IsUpper(rune(name[i-1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
