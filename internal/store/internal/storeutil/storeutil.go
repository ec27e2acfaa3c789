// Package storeutil holds the few pure helpers both store adapters share:
// time normalisation, slice normalisation and building a chained audit entry
// (DESIGN.md §1, audit log). It does no I/O.
package storeutil

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// Micro returns t in UTC truncated to the microsecond, the precision both
// stores keep. Rounding is never used, so both adapters agree.
func Micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// MicroPtr is Micro for an optional time; nil stays nil.
func MicroPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	m := Micro(*t)
	return &m
}

// Strings returns s, or an empty non-nil slice when s is nil, so stored
// lists read back as [] rather than null.
func Strings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Lease returns d, or domain.DefaultLease when d is not positive.
func Lease(d time.Duration) time.Duration {
	if d <= 0 {
		return domain.DefaultLease
	}
	return d
}

// AuditEntry builds the entry that follows prevHash at seq: At truncated to
// µs in UTC, Decision "" → "allow", Data marshalled with encoding/json (nil
// → no data), Hash = domain.AuditHash. Error: Data cannot be marshalled.
func AuditEntry(seq int64, prevHash string, at time.Time, r domain.AuditRecord) (domain.AuditEntry, error) {
	e := domain.AuditEntry{
		Seq:      seq,
		At:       Micro(at),
		Actor:    r.Actor,
		Action:   r.Action,
		AgentID:  r.AgentID,
		Decision: r.Decision,
		PrevHash: prevHash,
	}
	if e.Decision == "" {
		e.Decision = "allow"
	}
	if r.Data != nil {
		b, err := json.Marshal(r.Data)
		if err != nil {
			return domain.AuditEntry{}, fmt.Errorf("audit %s: marshal data: %w", r.Action, err)
		}
		e.Data = b
	}
	e.Hash = domain.AuditHash(e)
	return e, nil
}
