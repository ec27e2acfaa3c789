package doorbell_test

import "testing"

// BenchmarkRecordRings measures writing the records of rings on create
// (design: Ring on create) on SQLite: one op = one ring recorded. The
// rings are rung 1 000 at a time with the timer stopped, then written by
// DrainRecords (the recorder's loop). Run with a fixed count, since every
// op needs a todo pushed beforehand:
//
//	go test -run '^$' -bench BenchmarkRecordRings -benchtime 4000x ./internal/doorbell/
func BenchmarkRecordRings(b *testing.B) {
	e := newEnv(b)
	b.StopTimer()
	for i := 0; i < b.N; i += 1000 {
		for j := i; j < min(i+1000, b.N); j++ {
			if !e.bell.Ring(e.push(b, j)) {
				b.Fatal("not rung")
			}
		}
		b.StartTimer()
		e.bell.DrainRecords()
		b.StopTimer()
	}
}
