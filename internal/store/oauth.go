package store

import (
	"context"
	"time"
)

// OAuthStore holds the state of Rollcall's authorization server for /mcp
// (design: Sign-in for MCP clients): registered clients, authorization
// requests with their codes, grants and their hashed tokens. Every row is in
// the store, so a code issued by one instance is redeemed at another.
//
// A grant is an agent credential (a row in the agents' credential table
// whose secret is never shown), so revoking or rotating the agent, or
// revoking the grant, closes the sessions opened with its tokens like those
// of any credential (design: Revocation within 5 s).
type OAuthStore interface {
	// CreateOAuthClient registers a client unless MaxUnused registrations
	// that were never used are live at Now (created false). Expired unused
	// registrations are deleted first.
	CreateOAuthClient(ctx context.Context, c OAuthClient, maxUnused int, now time.Time) (created bool, err error)
	// PutOAuthMetadataClient stores or refreshes a client known by its
	// metadata document (the id is the document's URL): name and redirect
	// URIs are replaced, CreatedAt records the fetch; an approved client
	// stays approved. A new one counts against maxUnused like a
	// registration (created false when over it).
	PutOAuthMetadataClient(ctx context.Context, c OAuthClient, maxUnused int, now time.Time) (created bool, err error)
	// OAuthClient returns a client; ErrNotFound when unknown or when an
	// unused registration expired at now.
	OAuthClient(ctx context.Context, id string, now time.Time) (OAuthClient, error)

	// CreateOAuthRequest stores an authorization request (deleting expired
	// ones first).
	CreateOAuthRequest(ctx context.Context, r OAuthRequest) error
	// OAuthRequest returns an unexpired request; ErrNotFound otherwise.
	OAuthRequest(ctx context.Context, id string, now time.Time) (OAuthRequest, error)
	// ApproveOAuthRequest records the person's consent: the agent the
	// tokens will act as. The client's registration stops expiring.
	// ErrNotFound when the request is gone, expired or already approved.
	ApproveOAuthRequest(ctx context.Context, id, agentID string, now time.Time) error
	// SaveOAuthCode records the hash of the request's one code; ErrConflict
	// when a code was issued for it already, ErrNotFound when it is not
	// approved or gone.
	SaveOAuthCode(ctx context.Context, id, codeHash string, now time.Time) error
	// RedeemOAuthCode marks the code redeemed and returns its request.
	// ErrNotFound for an unknown or expired code; ErrConflict with the
	// request (whose GrantID names what it issued) when it was redeemed
	// before.
	RedeemOAuthCode(ctx context.Context, codeHash string, now time.Time) (OAuthRequest, error)

	// IssueOAuthTokens stores an access and a refresh token in one
	// transaction: for a new grant (NewGrant set, the agent active and
	// unrevoked, else ErrNotFound) or for the live grant GrantID, rotating
	// the refresh token RotateHash (ErrConflict when it was rotated before
	// or expired, ErrNotFound when the grant was revoked).
	IssueOAuthTokens(ctx context.Context, p IssueOAuthTokensParams) error
	// OAuthRefreshToken returns a refresh token by hash, rotated or not,
	// with its grant; ErrNotFound when unknown.
	OAuthRefreshToken(ctx context.Context, hash string) (OAuthToken, error)
	// OAuthAccessToken returns an access token unexpired at now whose grant
	// is live (credential unrevoked); ErrNotFound otherwise.
	OAuthAccessToken(ctx context.Context, hash string, now time.Time) (OAuthToken, error)
	// RevokeOAuthGrant revokes the grant's credential (its tokens stop
	// working); revoking a revoked grant is no error. ErrNotFound when the
	// agent has no such grant.
	RevokeOAuthGrant(ctx context.Context, agentID, grantID string, now time.Time) error
	// ListOAuthGrants lists the agent's live grants, newest first.
	ListOAuthGrants(ctx context.Context, agentID string) ([]OAuthGrant, error)
	// TouchOAuthGrant sets a grant's last use to at unless it was set
	// within every.
	TouchOAuthGrant(ctx context.Context, grantID string, at time.Time, every time.Duration) error
}

// OAuthClient is a registered client (RFC 7591). ExpiresAt is nil once a
// person approved a request of it.
type OAuthClient struct {
	ID           string
	Name         string
	RedirectURIs []string
	CreatedAt    time.Time
	ExpiresAt    *time.Time
}

// OAuthRequest is an authorization request from its arrival to its code's
// redemption. AgentID is set by consent; GrantID once tokens were issued.
type OAuthRequest struct {
	ID            string
	ClientID      string
	RedirectURI   string
	State         string
	Scopes        []string
	CodeChallenge string // S256 only
	Resource      string
	CreatedAt     time.Time
	ExpiresAt     time.Time
	AgentID       string
	ApprovedAt    *time.Time
	GrantID       string
}

// OAuthGrant is a person's consent turned into tokens: a client acting as
// an agent for a resource. ID is the agent credential's id.
type OAuthGrant struct {
	ID         string
	AgentID    string
	ClientID   string
	ClientName string
	Resource   string
	Scopes     []string
	CreatedAt  time.Time
	LastUsedAt *time.Time
}

// OAuthToken is a stored access or refresh token (by hash) with its grant.
// Live reports whether the grant's credential is unrevoked.
type OAuthToken struct {
	Hash      string
	Kind      string // "access" or "refresh"
	ExpiresAt time.Time
	RotatedAt *time.Time
	Grant     OAuthGrant
	Live      bool
}

// IssueOAuthTokensParams stores one token pair.
type IssueOAuthTokensParams struct {
	// NewGrant starts a grant: its credential row gets CredentialHash (the
	// hash of a secret nobody is shown); RequestID records the grant on the
	// authorization request whose code was redeemed.
	NewGrant       *OAuthGrant
	CredentialHash string
	RequestID      string
	// GrantID and RotateHash continue a grant by rotating its refresh token.
	GrantID        string
	RotateHash     string
	AccessHash     string
	AccessExpires  time.Time
	RefreshHash    string
	RefreshExpires time.Time
	Now            time.Time
}
