package storeutil

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
