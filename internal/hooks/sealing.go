package hooks

import (
	"context"
	"errors"
	"fmt"

	"github.com/rollcall/rollcall/internal/store"
)

// SealHookSecrets brings every stored hook secret under the configured key
// at start (design: Hook secrets sealed at rest) and returns how many it
// resealed: a plaintext secret (written before a key was configured) is
// sealed, one sealed with hooks.secret_key_previous is opened and sealed
// with hooks.secret_key. Each write replaces the stored value only while it
// is still the one read, so instances starting together, or a rotation in
// between, never lose a secret. Without a key it logs a warning (secrets
// stay plaintext) and changes nothing.
//
// Errors: *UnopenedSecretsError when secrets do not open (sealed with a
// key that is neither configured key, sealed while no key is configured
// now, or altered), after resealing all the others; store errors.
func (k *Hooks) SealHookSecrets(ctx context.Context) (int, error) {
	hs, err := k.store.ListHooks(ctx, store.ListHooksParams{})
	if err != nil {
		return 0, err
	}
	var bad []error
	n := 0
	for _, h := range hs {
		if !k.sealer.NeedsSeal(h.Secret) {
			if _, err := k.sealer.Open(h.ID, h.Secret); err != nil {
				bad = append(bad, err)
			}
			continue
		}
		plain, err := k.sealer.Open(h.ID, h.Secret)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		ok, err := k.store.ResealHookSecret(ctx, store.ResealHookSecretParams{ID: h.ID, Old: h.Secret, New: k.sealer.Seal(h.ID, plain)})
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	if k.sealer == nil {
		k.log.Warn("hooks.secret_key is not set: hook secrets are stored in plaintext; anyone with a copy of the database can sign deliveries (design: Hook secrets sealed at rest)", "hooks", len(hs))
	} else {
		k.log.Info("hook secrets sealed", "key_id", k.sealer.KeyID(), "hooks", len(hs), "resealed", n)
	}
	if len(bad) > 0 {
		return n, &UnopenedSecretsError{Errs: bad, Hooks: len(hs), KeyID: k.sealer.KeyID()}
	}
	return n, nil
}

// UnopenedSecretsError is SealHookSecrets' error for stored hook secrets
// that open with neither configured key: deliveries to those hooks fail
// until the key that sealed them is configured or their secrets are
// rotated (a rotation needs no old secret).
type UnopenedSecretsError struct {
	Errs  []error // one per hook: intake.ErrUnknownSecretKey, ErrNoSecretKey or ErrSealBroken, naming the hook
	Hooks int     // hooks checked
	KeyID string  // id of hooks.secret_key ("" = none set)
}

func (e *UnopenedSecretsError) Error() string {
	return fmt.Sprintf("%d of %d hook secrets do not open with the configured hooks.secret_key / hooks.secret_key_previous (key id %q): %v",
		len(e.Errs), e.Hooks, e.KeyID, errors.Join(e.Errs...))
}

// Unwrap returns the errors of the hooks.
func (e *UnopenedSecretsError) Unwrap() []error { return e.Errs }
