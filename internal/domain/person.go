package domain

import (
	"fmt"
	"strings"
	"time"
)

// Roles of a person (design: Persons and roles).
const (
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// ValidRole reports whether r is a person role.
func ValidRole(r string) bool { return r == RoleAdmin || r == RoleMember }

// SetRole sets Role and Admin together.
func (p *Person) SetRole(r string) {
	p.Role, p.Admin = r, r == RoleAdmin
}

// PersonToken is one personal API token of a person (design: Personal tokens):
// named, optionally expiring, revocable. The secret is shown once at creation
// and stored as a hash only; this type never carries it.
type PersonToken struct {
	ID         string     `json:"id"`
	PersonID   string     `json:"person_id"`
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// Usable reports whether the token authenticates at now: not revoked and
// not expired (expiry is exclusive: at ExpiresAt it no longer works).
func (t PersonToken) Usable(now time.Time) bool {
	return t.RevokedAt == nil && (t.ExpiresAt == nil || now.Before(*t.ExpiresAt))
}

// ChildExpiry decides the expiry of a token minted while authenticated
// with t (the parent), so that no token outlives the token that made it:
// with a parent that never expires the requested expiry stands (nil = none);
// with a parent that expires, no requested expiry is capped to the parent's,
// and a requested expiry after the parent's is refused (ok false). A
// requested expiry at or before the parent's stands.
func (t PersonToken) ChildExpiry(requested *time.Time) (expires *time.Time, ok bool) {
	switch {
	case t.ExpiresAt == nil:
		return requested, true
	case requested == nil:
		e := *t.ExpiresAt
		return &e, true
	case requested.After(*t.ExpiresAt):
		return nil, false
	}
	return requested, true
}

// ConsoleSession is a signed-in console session (design: Console sessions): the
// cookie names it, and every request checks it, its token and its person.
type ConsoleSession struct {
	ID        string
	PersonID  string
	TokenID   string
	CreatedAt time.Time
	ExpiresAt time.Time
	EndedAt   *time.Time
}

// Live reports whether the session is usable at now.
func (s ConsoleSession) Live(now time.Time) bool {
	return s.EndedAt == nil && now.Before(s.ExpiresAt)
}

// MaxTokenNameLen bounds personal token names (bytes).
const MaxTokenNameLen = 100

// NewPersonToken checks a new personal token's name (required, a display
// name of at most MaxTokenNameLen bytes) and expiry (in the future, kept in
// µs UTC) and returns the token id of person personID, created at now.
// Errors: invalid_argument with pointer /name or /expires_at.
func NewPersonToken(id, personID, name string, expires *time.Time, now time.Time) (PersonToken, error) {
	if strings.TrimSpace(name) == "" {
		return PersonToken{}, Errorf(CodeInvalidArgument, "name is required").At("/name")
	}
	if err := ValidateDisplayName(name); err != nil || len(name) > MaxTokenNameLen {
		return PersonToken{}, Errorf(CodeInvalidArgument, "name must be at most %d bytes of UTF-8 without control characters", MaxTokenNameLen).At("/name")
	}
	if expires != nil {
		e := expires.UTC().Truncate(time.Microsecond)
		if !e.After(now) {
			return PersonToken{}, Errorf(CodeInvalidArgument, "expires_at must be in the future").At("/expires_at")
		}
		expires = &e
	}
	return PersonToken{ID: id, PersonID: personID, Name: name, CreatedAt: now, ExpiresAt: expires}, nil
}

// ValidatePersonName checks a person's name: required, and a display name.
func ValidatePersonName(n string) error {
	if strings.TrimSpace(n) == "" {
		return Errorf(CodeInvalidArgument, "name is required").At("/name")
	}
	return ValidateDisplayName(n)
}

// ValidateRole checks a person's role (pointer /role): admin or member.
func ValidateRole(r string) error {
	if !ValidRole(r) {
		return Errorf(CodeInvalidArgument, "role %q must be %s or %s", r, RoleAdmin, RoleMember).At("/role")
	}
	return nil
}

// ActiveAdmin reports whether p is an admin and active: the persons the
// last-active-admin rule counts (design: Last active admin).
func (p Person) ActiveAdmin() bool { return p.Admin && p.Active }

// LeavesNoActiveAdmin reports whether changing before into after takes
// away the team's last active admin: before is an active admin, after is
// not, and activeAdmins, the number of active admins before the change
// (before included), is at most 1 (design: Last active admin).
func LeavesNoActiveAdmin(before, after Person, activeAdmins int) bool {
	return before.ActiveAdmin() && !after.ActiveAdmin() && activeAdmins <= 1
}

// CheckActiveAdmin is the last-active-admin rule (design: Last active
// admin): nil when changing before into after leaves an active admin, else
// conflict with reason last_admin naming before. activeAdmins is as for
// LeavesNoActiveAdmin.
func CheckActiveAdmin(before, after Person, activeAdmins int) error {
	if LeavesNoActiveAdmin(before, after, activeAdmins) {
		return &Error{Code: CodeConflict, Reason: "last_admin",
			Detail: fmt.Sprintf("%s is the last active admin; make another person admin first", before.Name)}
	}
	return nil
}
