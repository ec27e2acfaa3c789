package paging

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/domain"
)

// TestOfPagesInOrder: Of walks a list page by page, in key order, each
// page at most limit items, and the cursors lead to the end.
func TestOfPagesInOrder(t *testing.T) {
	var all []string
	for i := 250; i > 0; i-- {
		all = append(all, strconv.Itoa(1000+i))
	}
	key := func(s string) string { return s }
	var got []string
	cursor, pages := "", 0
	for {
		p, err := Of("n", all, key, 100, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) > 100 {
			t.Fatalf("page of %d items, limit 100", len(p.Items))
		}
		got = append(got, p.Items...)
		pages++
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if pages != 3 || len(got) != 250 || got[0] != "1001" || got[249] != "1250" {
		t.Fatalf("%d pages, %d items, first %s last %s", pages, len(got), got[0], got[len(got)-1])
	}
	for i := 1; i < len(got); i++ {
		if got[i-1] >= got[i] {
			t.Fatalf("out of order at %d: %s then %s", i, got[i-1], got[i])
		}
	}
}

// TestFillStopsAtMaxBytes: a page ends before the item that would cross
// MaxBytes, and always holds one item.
func TestFillStopsAtMaxBytes(t *testing.T) {
	big := strings.Repeat("x", MaxBytes/3)
	items := []string{big + "1", big + "2", big + "3", big + "4"}
	p, err := Fill("b", 500, "", func(s string) string { return s[len(s)-1:] }, func(after string, n int) ([]string, error) {
		i := 0
		if after != "" {
			i, _ = strconv.Atoi(after)
		}
		return items[i:min(i+n, len(items))], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 2 || p.NextCursor != Encode("b", "2") {
		t.Fatalf("%d items, cursor %q; want 2 and the cursor after item 2", len(p.Items), p.NextCursor)
	}
	huge := []string{strings.Repeat("y", MaxBytes+10)}
	p, err = Of("h", huge, func(s string) string { return "k" }, 0, "")
	if err != nil || len(p.Items) != 1 {
		t.Fatalf("a page with an item over MaxBytes holds %d items (%v), want 1", len(p.Items), err)
	}
}

// TestCursorsAndLimits: a cursor of one list is refused by another, and
// limits outside 1..max are refused; 0 takes the default.
func TestCursorsAndLimits(t *testing.T) {
	c := Encode("todo", "k1")
	if k, err := Decode("todo", c); err != nil || k != "k1" {
		t.Fatalf("Decode = %q, %v", k, err)
	}
	for _, bad := range []string{Encode("agent", "k1"), "not base64!", Encode("todo", ""), strings.Repeat("A", 201)} {
		_, err := Decode("todo", bad)
		var de *domain.Error
		if !asDomain(err, &de) || de.Code != domain.CodeInvalidArgument || de.Pointer != "/cursor" {
			t.Errorf("Decode(%q) = %v, want invalid_argument at /cursor", bad, err)
		}
	}
	if n, err := Limit(0, 100, 500); err != nil || n != 100 {
		t.Fatalf("Limit(0) = %d, %v", n, err)
	}
	for _, bad := range []int{-1, 501} {
		if _, err := Limit(bad, 100, 500); domain.CodeOf(err) != domain.CodeInvalidArgument {
			t.Errorf("Limit(%d) = %v, want invalid_argument", bad, err)
		}
	}
}

func asDomain(err error, de **domain.Error) bool {
	e, ok := err.(*domain.Error)
	*de = e
	return ok
}
