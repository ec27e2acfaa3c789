package storeutil

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// The OAuth statements (store.OAuthStore, design: Sign-in for MCP clients)
// exist once, here, for both adapters: they use only SQL both dialects
// read alike ($n placeholders, which the SQLite adapter rewrites to ?n;
// times as the adapter's time argument), so one implementation runs on
// either database through OAuthDB.

// SQLRunner runs statements on a connection, a pool or in a transaction.
type SQLRunner interface {
	Exec(ctx context.Context, q string, args ...any) (int64, error)
	QueryRow(ctx context.Context, q string, args ...any) Scanner
	Query(ctx context.Context, q string, args ...any) (Rows, func(), error)
}

// OAuthDB is what an adapter gives OAuth: its reads, its write
// transaction, its time encoding and its error mapping.
type OAuthDB interface {
	Reads() SQLRunner
	Write(ctx context.Context, fn func(SQLRunner) error) error
	// TimeArg encodes a time argument; NullTime is a scan destination for a
	// nullable time column, Get reads it after the scan.
	TimeArg(t time.Time) any
	NullTime() NullTimeDest
	MapErr(what string, err error) error
}

// NullTimeDest is a scan destination for a nullable time.
type NullTimeDest interface {
	Dest() any
	Get() *time.Time
}

// OAuth implements store.OAuthStore over an OAuthDB.
type OAuth struct{ DB OAuthDB }

func encodeStrings(l []string) string {
	b, _ := json.Marshal(Strings(l)) // []string always marshals
	return string(b)
}

func decodeStrings(s string) ([]string, error) {
	var l []string
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return nil, fmt.Errorf("corrupt list %q: %w", s, err)
	}
	return Strings(l), nil
}

func (o OAuth) timeOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return o.DB.TimeArg(*t)
}

// CreateOAuthClient implements store.OAuthStore.
func (o OAuth) CreateOAuthClient(ctx context.Context, c store.OAuthClient, maxUnused int, now time.Time) (bool, error) {
	return o.putClient(ctx, c, maxUnused, now, false)
}

// PutOAuthMetadataClient implements store.OAuthStore.
func (o OAuth) PutOAuthMetadataClient(ctx context.Context, c store.OAuthClient, maxUnused int, now time.Time) (bool, error) {
	return o.putClient(ctx, c, maxUnused, now, true)
}

func (o OAuth) putClient(ctx context.Context, c store.OAuthClient, maxUnused int, now time.Time, refresh bool) (bool, error) {
	created := false
	err := o.DB.Write(ctx, func(db SQLRunner) error {
		if _, err := db.Exec(ctx, `DELETE FROM oauth_clients WHERE expires_at IS NOT NULL AND expires_at <= $1`, o.DB.TimeArg(now)); err != nil {
			return err
		}
		if refresh {
			n, err := db.Exec(ctx, `UPDATE oauth_clients SET name = $2, redirect_uris = $3, created_at = $4,
				expires_at = CASE WHEN expires_at IS NULL THEN expires_at ELSE $5 END WHERE id = $1`,
				c.ID, c.Name, encodeStrings(c.RedirectURIs), o.DB.TimeArg(c.CreatedAt), o.timeOrNil(c.ExpiresAt))
			if err != nil || n > 0 {
				created = err == nil
				return err
			}
		}
		var unused int64
		if err := db.QueryRow(ctx, `SELECT count(*) FROM oauth_clients WHERE expires_at IS NOT NULL`).Scan(&unused); err != nil {
			return err
		}
		if unused >= int64(maxUnused) {
			return nil
		}
		_, err := db.Exec(ctx, `INSERT INTO oauth_clients (id, name, redirect_uris, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)`,
			c.ID, c.Name, encodeStrings(c.RedirectURIs), o.DB.TimeArg(c.CreatedAt), o.timeOrNil(c.ExpiresAt))
		created = err == nil
		return err
	})
	return created, o.DB.MapErr("create oauth client", err)
}

// OAuthClient implements store.OAuthStore.
func (o OAuth) OAuthClient(ctx context.Context, id string, now time.Time) (store.OAuthClient, error) {
	c := store.OAuthClient{ID: id}
	var uris string
	created, expires := o.DB.NullTime(), o.DB.NullTime()
	err := o.DB.Reads().QueryRow(ctx, `SELECT name, redirect_uris, created_at, expires_at FROM oauth_clients
		WHERE id = $1 AND (expires_at IS NULL OR expires_at > $2)`, id, o.DB.TimeArg(now)).
		Scan(&c.Name, &uris, created.Dest(), expires.Dest())
	if err != nil {
		return c, o.DB.MapErr("oauth client", err)
	}
	c.CreatedAt, c.ExpiresAt = *created.Get(), expires.Get()
	c.RedirectURIs, err = decodeStrings(uris)
	return c, err
}

// CreateOAuthRequest implements store.OAuthStore.
func (o OAuth) CreateOAuthRequest(ctx context.Context, r store.OAuthRequest) error {
	return o.DB.MapErr("create oauth request", o.DB.Write(ctx, func(db SQLRunner) error {
		if _, err := db.Exec(ctx, `DELETE FROM oauth_requests WHERE expires_at <= $1`, o.DB.TimeArg(r.CreatedAt)); err != nil {
			return err
		}
		_, err := db.Exec(ctx, `INSERT INTO oauth_requests (id, client_id, redirect_uri, state, scopes, code_challenge, resource, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, r.ID, r.ClientID, r.RedirectURI, r.State, encodeStrings(r.Scopes),
			r.CodeChallenge, r.Resource, o.DB.TimeArg(r.CreatedAt), o.DB.TimeArg(r.ExpiresAt))
		return err
	}))
}

const oauthRequestCols = `id, client_id, redirect_uri, state, scopes, code_challenge, resource, created_at, expires_at,
	COALESCE(agent_id, ''), approved_at, COALESCE(grant_id, ''), redeemed_at`

func (o OAuth) scanRequest(sc Scanner) (store.OAuthRequest, bool, error) {
	var r store.OAuthRequest
	var scopes string
	created, expires, approved, redeemed := o.DB.NullTime(), o.DB.NullTime(), o.DB.NullTime(), o.DB.NullTime()
	if err := sc.Scan(&r.ID, &r.ClientID, &r.RedirectURI, &r.State, &scopes, &r.CodeChallenge, &r.Resource,
		created.Dest(), expires.Dest(), &r.AgentID, approved.Dest(), &r.GrantID, redeemed.Dest()); err != nil {
		return r, false, err
	}
	r.CreatedAt, r.ExpiresAt, r.ApprovedAt = *created.Get(), *expires.Get(), approved.Get()
	var err error
	r.Scopes, err = decodeStrings(scopes)
	return r, redeemed.Get() != nil, err
}

// OAuthRequest implements store.OAuthStore.
func (o OAuth) OAuthRequest(ctx context.Context, id string, now time.Time) (store.OAuthRequest, error) {
	r, _, err := o.scanRequest(o.DB.Reads().QueryRow(ctx, `SELECT `+oauthRequestCols+` FROM oauth_requests WHERE id = $1 AND expires_at > $2`, id, o.DB.TimeArg(now)))
	return r, o.DB.MapErr("oauth request", err)
}

// ApproveOAuthRequest implements store.OAuthStore.
func (o OAuth) ApproveOAuthRequest(ctx context.Context, id, agentID string, now time.Time) error {
	return o.DB.MapErr("approve oauth request", o.DB.Write(ctx, func(db SQLRunner) error {
		var clientID string
		err := db.QueryRow(ctx, `UPDATE oauth_requests SET agent_id = $2, approved_at = $3
			WHERE id = $1 AND expires_at > $3 AND approved_at IS NULL RETURNING client_id`, id, agentID, o.DB.TimeArg(now)).Scan(&clientID)
		if err != nil {
			return err
		}
		_, err = db.Exec(ctx, `UPDATE oauth_clients SET expires_at = NULL WHERE id = $1`, clientID)
		return err
	}))
}

// SaveOAuthCode implements store.OAuthStore.
func (o OAuth) SaveOAuthCode(ctx context.Context, id, codeHash string, now time.Time) error {
	return o.DB.MapErr("save oauth code", o.DB.Write(ctx, func(db SQLRunner) error {
		n, err := db.Exec(ctx, `UPDATE oauth_requests SET code_hash = $2
			WHERE id = $1 AND expires_at > $3 AND approved_at IS NOT NULL AND code_hash IS NULL`, id, codeHash, o.DB.TimeArg(now))
		if err == nil && n == 0 {
			err = domain.ErrConflict
		}
		return err
	}))
}

// RedeemOAuthCode implements store.OAuthStore.
func (o OAuth) RedeemOAuthCode(ctx context.Context, codeHash string, now time.Time) (store.OAuthRequest, error) {
	var r store.OAuthRequest
	err := o.DB.Write(ctx, func(db SQLRunner) error {
		var redeemed bool
		var err error
		r, redeemed, err = o.scanRequest(db.QueryRow(ctx, `SELECT `+oauthRequestCols+` FROM oauth_requests WHERE code_hash = $1`, codeHash))
		switch {
		case err != nil:
			return err
		case redeemed:
			return domain.ErrConflict
		case !r.ExpiresAt.After(now):
			return domain.ErrNotFound
		}
		// Conditional: of concurrent redemptions (the SELECT above takes no
		// lock) exactly one changes the row; the others are replays.
		n, err := db.Exec(ctx, `UPDATE oauth_requests SET redeemed_at = $2 WHERE id = $1 AND redeemed_at IS NULL`, r.ID, o.DB.TimeArg(now))
		if err == nil && n == 0 {
			return domain.ErrConflict
		}
		return err
	})
	return r, o.DB.MapErr("redeem oauth code", err)
}

// IssueOAuthTokens implements store.OAuthStore.
func (o OAuth) IssueOAuthTokens(ctx context.Context, p store.IssueOAuthTokensParams) error {
	now := o.DB.TimeArg(p.Now)
	return o.DB.MapErr("issue oauth tokens", o.DB.Write(ctx, func(db SQLRunner) error {
		grant := p.GrantID
		if g := p.NewGrant; g != nil {
			grant = g.ID
			var usable int64
			if err := db.QueryRow(ctx, `SELECT count(*) FROM agents WHERE id = $1 AND revoked_at IS NULL AND active`, g.AgentID).Scan(&usable); err != nil {
				return err
			}
			if usable == 0 {
				return domain.ErrNotFound
			}
			if _, err := db.Exec(ctx, `INSERT INTO credentials (id, agent_id, hash, created_at) VALUES ($1, $2, $3, $4)`,
				g.ID, g.AgentID, p.CredentialHash, now); err != nil {
				return err
			}
			if _, err := db.Exec(ctx, `INSERT INTO oauth_grants (id, agent_id, client_id, client_name, resource, scopes, created_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7)`, g.ID, g.AgentID, g.ClientID, g.ClientName, g.Resource, encodeStrings(g.Scopes), now); err != nil {
				return err
			}
			if _, err := db.Exec(ctx, `UPDATE oauth_requests SET grant_id = $2 WHERE id = $1`, p.RequestID, g.ID); err != nil {
				return err
			}
		} else {
			var live int64
			if err := db.QueryRow(ctx, `SELECT count(*) FROM credentials WHERE id = $1 AND revoked_at IS NULL`, grant).Scan(&live); err != nil {
				return err
			}
			if live == 0 {
				return domain.ErrNotFound
			}
			n, err := db.Exec(ctx, `UPDATE oauth_tokens SET rotated_at = $3
				WHERE hash = $1 AND grant_id = $2 AND kind = 'refresh' AND rotated_at IS NULL AND expires_at > $3`, p.RotateHash, grant, now)
			if err != nil {
				return err
			}
			if n == 0 {
				return domain.ErrConflict
			}
			// Expired tokens of the grant go; rotated refresh tokens stay
			// until they expire, so a replayed one is recognised.
			if _, err := db.Exec(ctx, `DELETE FROM oauth_tokens WHERE grant_id = $1 AND expires_at <= $2`, grant, now); err != nil {
				return err
			}
		}
		_, err := db.Exec(ctx, `INSERT INTO oauth_tokens (hash, grant_id, kind, expires_at) VALUES ($1, $2, 'access', $3), ($4, $2, 'refresh', $5)`,
			p.AccessHash, grant, o.DB.TimeArg(p.AccessExpires), p.RefreshHash, o.DB.TimeArg(p.RefreshExpires))
		return err
	}))
}

const oauthTokenSelect = `SELECT t.hash, t.kind, t.expires_at, t.rotated_at, c.revoked_at IS NULL,
	g.id, g.agent_id, g.client_id, g.client_name, g.resource, g.scopes, g.created_at, g.last_used_at
	FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id JOIN credentials c ON c.id = g.id`

func (o OAuth) scanToken(sc Scanner) (store.OAuthToken, error) {
	var t store.OAuthToken
	var scopes string
	expires, rotated, created, used := o.DB.NullTime(), o.DB.NullTime(), o.DB.NullTime(), o.DB.NullTime()
	g := &t.Grant
	if err := sc.Scan(&t.Hash, &t.Kind, expires.Dest(), rotated.Dest(), &t.Live,
		&g.ID, &g.AgentID, &g.ClientID, &g.ClientName, &g.Resource, &scopes, created.Dest(), used.Dest()); err != nil {
		return t, err
	}
	t.ExpiresAt, t.RotatedAt, g.CreatedAt, g.LastUsedAt = *expires.Get(), rotated.Get(), *created.Get(), used.Get()
	var err error
	g.Scopes, err = decodeStrings(scopes)
	return t, err
}

// OAuthRefreshToken implements store.OAuthStore.
func (o OAuth) OAuthRefreshToken(ctx context.Context, hash string) (store.OAuthToken, error) {
	t, err := o.scanToken(o.DB.Reads().QueryRow(ctx, oauthTokenSelect+` WHERE t.hash = $1 AND t.kind = 'refresh'`, hash))
	return t, o.DB.MapErr("oauth refresh token", err)
}

// OAuthAccessToken implements store.OAuthStore.
func (o OAuth) OAuthAccessToken(ctx context.Context, hash string, now time.Time) (store.OAuthToken, error) {
	t, err := o.scanToken(o.DB.Reads().QueryRow(ctx, oauthTokenSelect+`
		WHERE t.hash = $1 AND t.kind = 'access' AND t.expires_at > $2 AND c.revoked_at IS NULL`, hash, o.DB.TimeArg(now)))
	return t, o.DB.MapErr("oauth access token", err)
}

// RevokeOAuthGrant implements store.OAuthStore.
func (o OAuth) RevokeOAuthGrant(ctx context.Context, agentID, grantID string, now time.Time) error {
	return o.DB.MapErr("revoke oauth grant", o.DB.Write(ctx, func(db SQLRunner) error {
		var n int64
		if err := db.QueryRow(ctx, `SELECT count(*) FROM oauth_grants WHERE id = $1 AND agent_id = $2`, grantID, agentID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return domain.ErrNotFound
		}
		_, err := db.Exec(ctx, `UPDATE credentials SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, grantID, o.DB.TimeArg(now))
		return err
	}))
}

// ListOAuthGrants implements store.OAuthStore.
func (o OAuth) ListOAuthGrants(ctx context.Context, agentID string) ([]store.OAuthGrant, error) {
	rows, done, err := o.DB.Reads().Query(ctx, `SELECT g.id, g.agent_id, g.client_id, g.client_name, g.resource, g.scopes, g.created_at, g.last_used_at
		FROM oauth_grants g JOIN credentials c ON c.id = g.id WHERE g.agent_id = $1 AND c.revoked_at IS NULL ORDER BY g.created_at DESC, g.id`, agentID)
	if err != nil {
		return nil, o.DB.MapErr("list oauth grants", err)
	}
	defer done()
	out, err := Collect(rows, func(sc Scanner) (store.OAuthGrant, error) {
		var g store.OAuthGrant
		var scopes string
		created, used := o.DB.NullTime(), o.DB.NullTime()
		if err := sc.Scan(&g.ID, &g.AgentID, &g.ClientID, &g.ClientName, &g.Resource, &scopes, created.Dest(), used.Dest()); err != nil {
			return g, err
		}
		g.CreatedAt, g.LastUsedAt = *created.Get(), used.Get()
		var err error
		g.Scopes, err = decodeStrings(scopes)
		return g, err
	})
	return out, o.DB.MapErr("list oauth grants", err)
}

// TouchOAuthGrant implements store.OAuthStore.
func (o OAuth) TouchOAuthGrant(ctx context.Context, grantID string, at time.Time, every time.Duration) error {
	err := o.DB.Write(ctx, func(db SQLRunner) error {
		_, err := db.Exec(ctx, `UPDATE oauth_grants SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= $3)`,
			grantID, o.DB.TimeArg(at), o.DB.TimeArg(at.Add(-every)))
		return err
	})
	if errors.Is(err, context.Canceled) {
		return err
	}
	return o.DB.MapErr("touch oauth grant", err)
}
