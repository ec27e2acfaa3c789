package storetest

import "testing"

// Run runs the whole contract suite against the adapter, one subtest per
// behaviour, each on a fresh store, and the migration tests, each on an
// empty database.
func Run(t *testing.T, h Harness) {
	var tests []contractTest
	tests = append(tests, personTests...)
	tests = append(tests, agentTests...)
	tests = append(tests, todoTests...)
	tests = append(tests, auditTests...)
	tests = append(tests, firstStreamTests...)
	tests = append(tests, hookTests...)
	tests = append(tests, presenceTests...)
	tests = append(tests, livenessTests...)
	tests = append(tests, ownerLeaseTests...)
	tests = append(tests, oauthTests...)
	tests = append(tests, poolTests...)
	tests = append(tests, poolGrantTests...)
	tests = append(tests, claimBatchTests...)
	tests = append(tests, groupCommitTests...)
	h.run(t, tests)
	t.Run("Migrations/UpDownUp", func(t *testing.T) {
		if h.Parallel {
			t.Parallel()
		}
		if h.Empty == nil {
			t.Fatal("storetest.Harness.Empty is required")
		}
		testUpDownUp(t, h.Empty(t))
	})
}

// testUpDownUp applies every migration, reverts them all, applies them
// again, and then the store must work on the schema as on a fresh one: the
// fixture writes and reads back exactly as the release that wrote the
// adapters' testdata read it.
func testUpDownUp(t *testing.T, db EmptyDatabase) {
	ctx, p := t.Context(), db.Migrations
	up, err := p.Up(ctx)
	must(t, "migrate up", err)
	if len(up) == 0 || len(up) != len(p.ListSources()) {
		t.Fatalf("up applied %d of %d migrations", len(up), len(p.ListSources()))
	}
	down, err := p.DownTo(ctx, 0)
	must(t, "migrate down to 0", err)
	if len(down) != len(up) {
		t.Fatalf("down reverted %d of %d migrations", len(down), len(up))
	}
	if v, err := p.GetDBVersion(ctx); err != nil || v != 0 {
		t.Fatalf("version after down = %d, %v; want 0", v, err)
	}
	again, err := p.Up(ctx)
	must(t, "migrate up again", err)
	if len(again) != len(up) {
		t.Fatalf("second up applied %d of %d migrations", len(again), len(up))
	}
	s := db.Open(t)
	must(t, "WriteFixture", WriteFixture(ctx, s))
	CheckFixture(t, s)
}

// run runs each contract test as a subtest on a fresh store, in parallel
// when the harness allows it.
func (h Harness) run(t *testing.T, tests []contractTest) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if h.Parallel {
				t.Parallel()
			}
			tc.fn(t, h.New(t))
		})
	}
}
